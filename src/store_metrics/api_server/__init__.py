"""The API server side: state store route metrics and an event-loop stall monitor.

Every state store call of every task, whatever its SDK, ends up as an Execution API request to
an API server worker. ``StateStoreRouteMetrics`` is a pure ASGI middleware that the plugin
registers as a FastAPI *root* middleware (``fastapi_root_middlewares``), so it sees the core app
with the Execution API mounted at ``/execution``:

* For the state store routes only (``route_of``) it counts each request by store
  (``task``/``asset``), operation (``get``/``set``/``delete``/``clear``), status class and
  outcome (``read_found``, ``read_absent`` for a GET answered 404, ``write``, ``delete``,
  ``clear``, ``error``: the task side's outcomes), and records its duration and its request and
  response body sizes, counting body bytes as they stream. Never an id or a key. Messages pass
  through untouched, in both directions, including errors and streaming responses.
* Every other request costs one substring test and goes straight to the app.
* ``LoopMonitor`` wakes up every ``stall_tick_ms`` on the worker's own event loop (started
  at ASGI lifespan startup, or lazily at the first request) and records how late it woke up: a
  tick that is late is time the loop could not serve anything. A stall at or above
  ``stall_threshold_ms`` is counted once per state store (store, operation) that was in flight
  during it (still running, or finished after the tick was due: a request whose handler held the
  loop has usually finished by the time the ticker runs again), and logged (at most once per
  ``flush_interval``).

With ``[store_metrics] count_at = api_server`` (``attribution``) each worker also counts every
answered state store request on the task side's own counters (``task_state_store.*``,
``asset_state_store.*``), tagged dag_id, task_id, run_type, operator (and team_name) of the task
instance whose token the Execution API verified: looked up once per task instance and worker, on a
thread, through a bounded LRU cache. Task processes then count nothing. With traces on each such
request is also a SERVER span in its task's trace (``tracing``, imported only then).

Each API server worker has its own emitter (cumulative temporality; the identity
``<host>-<slot>`` as the ``worker`` tag and OpenTelemetry ``service.instance.id``), made on first
use in that worker, never at import and never in a task process.
"""

from __future__ import annotations

from .attribution import UNKNOWN_TAGS, WATCHER_TAGS, lookup_task_instance, requester
from .loop_monitor import LoopMonitor
from .metrics import ServerMetrics, worker_identity
from .middleware import StateStoreRouteMetrics
from .store_calls import StoreCalls
from .worker_metrics import server_metrics

#: What the rest of the package (the plugin, the demo, the benchmarks) uses; the route table, the
#: cache and the lookups stay in their modules.
__all__ = [
    "UNKNOWN_TAGS",
    "WATCHER_TAGS",
    "LoopMonitor",
    "ServerMetrics",
    "StateStoreRouteMetrics",
    "StoreCalls",
    "lookup_task_instance",
    "requester",
    "server_metrics",
    "worker_identity",
]
