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

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from . import catalogue, logs
from .aggregator import AggregatingEmitter
from .catalogue import (
    LONG_STALLS,
    LOOP_STALL,
    LOOP_STALL_MAX,
    SERVER_DURATION,
    SERVER_REQUEST_SIZE,
    SERVER_REQUESTS,
    SERVER_RESPONSE_SIZE,
    Operation,
    Outcome,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: (store, operation) of a state store route.
Route = tuple[str, str]

#: Every state store path contains this; anything else is passed on after this one test.
MARK: Final = "/execution/store/"
_TASK_PREFIX: Final = "/execution/store/ti/"
_ASSET_ROUTES: Final[dict[tuple[str, str], Route]] = {
    (method, f"/execution/store/asset/{by}/{what}"): ("asset", operation)
    for by in ("by-name", "by-uri")
    for method, what, operation in (
        ("GET", "value", Operation.GET.value),
        ("PUT", "value", Operation.SET.value),
        ("DELETE", "value", Operation.DELETE.value),
        ("DELETE", "clear", Operation.CLEAR.value),
    )
}
_TASK_KEY_OPERATIONS: Final = {
    "GET": Operation.GET.value,
    "PUT": Operation.SET.value,
    "DELETE": Operation.DELETE.value,
}
#: Every route, in a fixed order (the in-flight table and the docs use it).
ROUTES: Final[tuple[Route, ...]] = (
    ("task", "get"),
    ("task", "set"),
    ("task", "delete"),
    ("task", "clear"),
    ("asset", "get"),
    ("asset", "set"),
    ("asset", "delete"),
    ("asset", "clear"),
)
NONE_ROUTE: Final[Route] = ("none", "none")

#: A tick at least this late is a stall (recorded in the stall histogram).
STALL_FLOOR_MS: Final = 1.0
_SIZE_CLASSES: Final = ((1024, "le_1KiB"), (64 * 1024, "le_64KiB"), (1024 * 1024, "le_1MiB"))


def route_path(scope: Scope) -> str:
    """The path the app routes on: ``scope["path"]`` without the ``root_path`` prefix, if it has it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :]
    return path


def route_of(method: str, path: str) -> Route | None:
    """The (store, operation) of a state store route of the Execution API, or ``None``.

    Mirrors the route table of ``airflow/api_fastapi/execution_api/routes`` (Airflow 3.3):

    * ``GET|PUT|DELETE /execution/store/ti/{ti_id}/{key:path}``: task get / set / delete (the
      key may contain ``/``, and an empty key still reaches the route, which answers 422);
    * ``DELETE /execution/store/ti/{ti_id}``: task clear;
    * ``GET|PUT|DELETE /execution/store/asset/by-name/value`` and ``by-uri/value``: asset get /
      set / delete; ``DELETE .../by-name/clear`` and ``by-uri/clear``: asset clear.

    Anything else (other methods, other paths) is not a state store route.
    """
    if path.startswith(_TASK_PREFIX):
        rest = path[len(_TASK_PREFIX) :]
        ti_id, slash, _key = rest.partition("/")
        if not ti_id:
            return None
        if slash:
            operation = _TASK_KEY_OPERATIONS.get(method)
            return ("task", operation) if operation else None
        return ("task", Operation.CLEAR.value) if method == "DELETE" else None
    return _ASSET_ROUTES.get((method, path))


def status_class(status: int) -> str:
    """``2xx``, ``4xx``, ``5xx`` (and ``1xx``/``3xx``)."""
    return f"{status // 100}xx"


_COMPLETED: Final = {
    Operation.GET.value: Outcome.READ_FOUND.value,
    Operation.SET.value: Outcome.WRITE.value,
    Operation.DELETE.value: Outcome.DELETE.value,
    Operation.CLEAR.value: Outcome.CLEAR.value,
}


def outcome_of(operation: str, status: int) -> str:
    """The task side's outcome for a request: a GET answered 404 is an absent read."""
    if 200 <= status < 300:
        return _COMPLETED[operation]
    if status == 404 and operation == Operation.GET.value:
        return Outcome.READ_ABSENT.value
    return Outcome.ERROR.value


def value_size(operation: str, request_bytes: int, response_bytes: int) -> str:
    """Size class of the value a request moved: the body of a set, the response to a get."""
    if operation == Operation.SET.value:
        size = request_bytes
    elif operation == Operation.GET.value:
        size = response_bytes
    else:
        return "none"
    for bound, name in _SIZE_CLASSES:
        if size <= bound:
            return name
    return "gt_1MiB"


def worker_identity() -> str:
    """``<short host name>-<pid>``: stable for the worker's life, distinct between workers."""
    return f"{socket.gethostname().split('.')[0] or 'host'}-{os.getpid()}"


class LoopMonitor:
    """A ticker on one event loop: how late each tick wakes up is how long the loop was stalled.

    Rescheduled from the time it actually ran (never a burst of catch-up ticks after a stall).
    ``on_tick(late_ms, due)`` is called on the loop for every tick; ``due`` is when it should
    have run (``loop.time()``, i.e. ``time.monotonic()``): the loop was stalled from before ``due``
    until now.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, tick_ms: float, on_tick: Callable[[float, float], None]
    ):
        self.loop = loop
        self.tick = tick_ms / 1000.0
        self._on_tick = on_tick
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None

    @property
    def running(self) -> bool:
        return self._handle is not None

    def start(self) -> None:
        if self._handle is None:
            self._due = self.loop.time() + self.tick
            self._handle = self.loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        now = self.loop.time()
        due = self._due
        late_ms = max(0.0, (now - due) * 1000.0)
        self._due = now + self.tick
        self._handle = self.loop.call_at(self._due, self._tick)
        self._on_tick(late_ms, due)


class ServerMetrics:
    """One API server worker's metrics: its emitter, the in-flight table and the stall monitor."""

    def __init__(
        self,
        emitter: AggregatingEmitter,
        worker: str,
        *,
        tick_ms: float,
        threshold_ms: float,
        log_interval: float = 10.0,
    ) -> None:
        self.emitter = emitter
        self.worker = worker
        self.tick_ms = tick_ms
        self.threshold_ms = threshold_ms
        self.log_interval = log_interval
        self.pid = os.getpid()
        self.in_flight: dict[Route, int] = dict.fromkeys(ROUTES, 0)
        #: When a request of each route last finished (time.monotonic(), the event loop's clock).
        self.last_done: dict[Route, float] = dict.fromkeys(ROUTES, 0.0)
        self._recorders: dict[tuple[str, ...], tuple[Callable[..., None], ...]] = {}
        tags = {catalogue.WORKER: worker}
        self._stall = emitter.histogram(LOOP_STALL, tags).record
        self._stall_max = emitter.gauge(LOOP_STALL_MAX, tags).observe
        self._long_stalls: dict[Route, Callable[[int], None]] = {}
        self._last_log = -1e9
        self.monitor: LoopMonitor | None = None

    # -- requests -----------------------------------------------------------------------------

    async def serve(self, app: ASGIApp, route: Route, scope: Scope, receive: Receive, send: Send) -> None:
        """Run one state store request through ``app``, passing every message on unchanged."""
        received = 0
        sent = 0
        status = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
            return message

        async def counting_send(message: Message) -> None:
            nonlocal sent, status
            kind = message["type"]
            if kind == "http.response.body":
                sent += len(message.get("body", b""))
            elif kind == "http.response.start":
                status = message["status"]
            await send(message)

        self.in_flight[route] += 1
        start = time.perf_counter()
        try:
            await app(scope, counting_receive, counting_send)
        finally:
            self.in_flight[route] -= 1
            self.last_done[route] = time.monotonic()
            # No response started: the server answers 500 (an exception, or nothing sent).
            self.record(route, status or 500, received, sent, (time.perf_counter() - start) * 1000.0)

    def record(self, route: Route, status: int, request_bytes: int, response_bytes: int, ms: float) -> None:
        """Count one finished request. Never raises."""
        try:
            store, operation = route
            klass = status_class(status)
            outcome = outcome_of(operation, status)
            size = value_size(operation, request_bytes, response_bytes)
            key = (store, operation, klass, outcome, size)
            recorders = self._recorders.get(key)
            if recorders is None:
                recorders = self._recorders[key] = self._make_recorders(
                    store, operation, klass, outcome, size
                )
            count, duration, request_size, response_size = recorders
            count(1)
            duration(ms)
            request_size(request_bytes)
            response_size(response_bytes)
        except Exception:
            logs.once(
                "server:record", logging.ERROR, "store-metrics could not record a request", exc_info=True
            )

    def _make_recorders(
        self, store: str, operation: str, klass: str, outcome: str, size: str
    ) -> tuple[Callable[..., None], ...]:
        route = {
            catalogue.STORE: store,
            catalogue.OPERATION: operation,
            catalogue.STATUS_CLASS: klass,
            catalogue.WORKER: self.worker,
        }
        emitter = self.emitter
        return (
            emitter.counter(SERVER_REQUESTS, {**route, catalogue.OUTCOME: outcome}).add,
            emitter.histogram(SERVER_DURATION, {**route, catalogue.VALUE_SIZE: size}).record,
            emitter.histogram(SERVER_REQUEST_SIZE, route).record,
            emitter.histogram(SERVER_RESPONSE_SIZE, route).record,
        )

    # -- the event loop -----------------------------------------------------------------------

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run the stall monitor on ``loop`` (idempotent; moves to ``loop`` if it ran on another)."""
        monitor = self.monitor
        if monitor is not None and monitor.loop is loop and monitor.running:
            return
        if monitor is not None:
            monitor.stop()
        self.monitor = LoopMonitor(loop, self.tick_ms, self.on_tick)
        self.monitor.start()

    def unwatch(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()

    def on_tick(self, late_ms: float, due: float) -> None:
        self._stall_max(late_ms)
        if late_ms >= STALL_FLOOR_MS:
            self._stall(late_ms)
            if late_ms >= self.threshold_ms:
                self.long_stall(late_ms, due)

    def long_stall(self, late_ms: float, due: float) -> None:
        """Count a stall at or above the threshold by the state store routes in flight, and say so."""
        in_flight = [
            (route, n) for route, n in self.in_flight.items() if n > 0 or self.last_done[route] >= due
        ]
        for route, _ in in_flight or [(NONE_ROUTE, 0)]:
            add = self._long_stalls.get(route)
            if add is None:
                tags = {
                    catalogue.STORE: route[0],
                    catalogue.OPERATION: route[1],
                    catalogue.WORKER: self.worker,
                }
                add = self._long_stalls[route] = self.emitter.counter(LONG_STALLS, tags).add
            add(1)
        now = time.monotonic()
        if now - self._last_log >= self.log_interval:
            self._last_log = now
            what = ", ".join(f"{s} {o}" for (s, o), _ in in_flight) or "none"
            logs.logger.warning(
                "store-metrics: event loop of API server worker %s stalled %.0f ms (threshold %.0f ms); "
                "state store requests in flight: %s",
                self.worker,
                late_ms,
                self.threshold_ms,
                what,
            )


_lock = threading.Lock()
_active: ServerMetrics | None = None
_decided_pid = 0


def server_metrics() -> ServerMetrics | None:
    """This worker's :class:`ServerMetrics`, made from ``[store_metrics]`` on first use.

    ``None`` (once decided, for the life of the process) when store-metrics or its server side
    is switched off, or the configuration is bad: the middleware then only passes requests on.
    """
    global _active, _decided_pid
    pid = os.getpid()
    if _decided_pid == pid:
        return _active
    with _lock:
        if _decided_pid != pid:
            _active = _build()
            _decided_pid = pid
    return _active


def _build() -> ServerMetrics | None:
    from .config import load_settings
    from .errors import ConfigError, MissingExtraError
    from .runtime import create_emitter

    try:
        settings = load_settings()
        if not (settings.enabled and settings.server_metrics):
            logs.once("server:off", logging.INFO, "store-metrics: API server metrics are off")
            return None
        worker = worker_identity()
        emitter = create_emitter(**settings.server_configure_kwargs(worker))
    except (ConfigError, MissingExtraError) as exc:
        logs.once("server:config", logging.ERROR, "store-metrics API server metrics are off: %s", exc)
        return None
    except Exception:
        logs.once("server:config", logging.ERROR, "store-metrics API server metrics are off", exc_info=True)
        return None
    logs.once(
        "server:on",
        logging.INFO,
        "store-metrics: API server worker %s counts state store requests and watches its event loop "
        "(tick %g ms, long stall %g ms), sending to %s",
        worker,
        settings.stall_tick_ms,
        settings.stall_threshold_ms,
        emitter.backend.describe(),
    )
    return ServerMetrics(
        emitter,
        worker,
        tick_ms=settings.stall_tick_ms,
        threshold_ms=settings.stall_threshold_ms,
        log_interval=settings.flush_interval,
    )


class StateStoreRouteMetrics:
    """Pure ASGI root middleware: state store route metrics and the stall monitor (module docs)."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics | None = None) -> None:
        self.app = app
        # Given: used as is (tests, benchmarks). Else the worker's own, made on first use.
        self._given = metrics
        self._watching: asyncio.AbstractEventLoop | None = None

    def _metrics(self) -> ServerMetrics | None:
        return self._given if self._given is not None else server_metrics()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if self._watching is None:
                self._watch()
            if MARK in scope["path"]:
                route = route_of(scope["method"], route_path(scope))
                if route is not None:
                    metrics = self._metrics()
                    if metrics is not None:
                        await metrics.serve(self.app, route, scope, receive, send)
                        return
        elif kind == "lifespan":
            await self.app(scope, self._lifespan_receive(receive), send)
            return
        await self.app(scope, receive, send)

    def _watch(self) -> None:
        # The stall monitor belongs to the server's own loop: the one running this request.
        loop = asyncio.get_running_loop()
        self._watching = loop
        metrics = self._metrics()
        if metrics is not None:
            metrics.watch(loop)

    def _lifespan_receive(self, receive: Receive) -> Receive:
        async def watched() -> Message:
            message = await receive()
            kind = message["type"]
            if kind == "lifespan.startup":
                self._watch()
            elif kind == "lifespan.shutdown":
                metrics = self._metrics()
                self._watching = None
                if metrics is not None:
                    metrics.unwatch()
                    # Hand the last counts on without holding the loop.
                    emitter = metrics.emitter
                    await asyncio.get_running_loop().run_in_executor(
                        None, emitter.flush, emitter.flush_timeout
                    )
            return message

        return watched
