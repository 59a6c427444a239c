"""The API server side: state store route metrics and an event-loop stall monitor.

Every state store call of every task, whatever its SDK, ends up as an Execution API request to
an API server worker. :class:`StateStoreRouteMetrics` is a pure ASGI middleware that the plugin
registers as a FastAPI *root* middleware (``fastapi_root_middlewares``), so it sees the core app
with the Execution API mounted at ``/execution``:

* For the state store routes only (:func:`route_of`) it counts each request by store
  (``task``/``asset``), operation (``get``/``set``/``delete``/``clear``), status class and
  outcome (``read_found``, ``read_absent`` for a GET answered 404, ``write``, ``delete``,
  ``clear``, ``error``: the task side's outcomes), and records its duration and its request and
  response body sizes, counting body bytes as they stream. Never an id or a key. Messages pass
  through untouched, in both directions, including errors and streaming responses.
* Every other request costs one substring test and goes straight to the app.
* :class:`LoopMonitor` wakes up every ``stall_tick_ms`` on the worker's own event loop (started
  at ASGI lifespan startup, or lazily at the first request) and records how late it woke up: a
  tick that is late is time the loop could not serve anything. A stall at or above
  ``stall_threshold_ms`` is counted once per state store (store, operation) that was in flight
  during it (still running, or finished after the tick was due: a request whose handler held the
  loop has usually finished by the time the ticker runs again), and logged (at most once per
  ``flush_interval``).

Each API server worker has its own emitter (cumulative temporality; the identity
``<host>-<pid>`` as the ``worker`` tag and OpenTelemetry ``service.instance.id``), made on first
use in that worker, never at import and never in a task process.
"""

from __future__ import annotations

from .loop_monitor import LoopMonitor
from .metrics import STALL_FLOOR_MS, ServerMetrics, server_metrics, worker_identity
from .middleware import StateStoreRouteMetrics
from .routes import (
    MARK,
    NONE_ROUTE,
    ROUTES,
    Route,
    outcome_of,
    route_of,
    route_path,
    status_class,
    value_size,
)

__all__ = [
    "MARK",
    "NONE_ROUTE",
    "ROUTES",
    "STALL_FLOOR_MS",
    "LoopMonitor",
    "Route",
    "ServerMetrics",
    "StateStoreRouteMetrics",
    "outcome_of",
    "route_of",
    "route_path",
    "server_metrics",
    "status_class",
    "value_size",
    "worker_identity",
]
