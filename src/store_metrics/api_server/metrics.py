"""One API server worker's metrics: its emitter, the state store requests in flight, the stall monitor.

Each worker makes its own on first use (never at import, never in a task process), from
``[store_metrics]``, with cumulative temporality and the identity ``<host>-<slot>``
(``worker_slot``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from .. import catalogue, logs
from ..catalogue import (
    LONG_STALLS,
    LOOP_STALL,
    LOOP_STALL_MAX,
    SERVER_DURATION,
    SERVER_REQUEST_SIZE,
    SERVER_REQUESTS,
    SERVER_RESPONSE_SIZE,
)
from ..emitter import AggregatingEmitter
from . import worker_slot
from .loop_monitor import LoopMonitor
from .routes import (
    NONE_ROUTE,
    ROUTES,
    ASGIApp,
    Message,
    Receive,
    Route,
    Scope,
    Send,
    outcome_of,
    status_class,
    value_size,
)
from .store_calls import StoreCalls

if TYPE_CHECKING:
    from .tracing import RouteSpan

#: A tick at least this late is a stall (recorded in the stall histogram).
STALL_FLOOR_MS: Final = 1.0


def worker_identity(style: str = "host_slot") -> str:
    """``<short host name>-<slot>`` (``host_slot``) or ``<slot>`` (``slot``, setting ``worker_label``):
    distinct between a host's live workers, reused by a successor."""
    return worker_slot.label(style)


class ServerMetrics:
    """One API server worker's metrics: its emitter, the in-flight table and the stall monitor.

    With ``calls`` (``count_at = api_server``) it also counts every answered state store request
    on the task side's counters, tagged as the task instance that made it
    (``StoreCalls``). ``route_metrics = False``
    (``server_metrics = false``) leaves out the route metrics and the stall monitor.
    """

    def __init__(
        self,
        emitter: AggregatingEmitter,
        worker: str,
        *,
        tick_ms: float,
        threshold_ms: float,
        log_interval: float = 10.0,
        calls: StoreCalls | None = None,
        route_metrics: bool = True,
    ) -> None:
        self.emitter = emitter
        self.worker = worker
        self.calls = calls
        self.route_metrics = route_metrics
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

    async def serve(
        self,
        app: ASGIApp,
        route: Route,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        span: RouteSpan | None = None,
    ) -> None:
        """Run one state store request through ``app``, passing every message on unchanged.

        ``span``: the request's span (``tracing``), answered and ended by its counting."""
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
            if self.route_metrics:
                self.record(route, status or 500, received, sent, (time.perf_counter() - start) * 1000.0)
            if self.calls is not None:
                self.calls.count(scope, route, status or 500, outcome_of(route[1], status or 500), span=span)

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
        if not self.route_metrics:
            return
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
