"""``count_at = api_server`` with traces on: each state store request as a span in the task's trace.

The Task SDK (Airflow 3.3.0 and later) carries the task runner's trace context to the API server:
the runner puts a W3C ``context_carrier`` on each request to its supervisor, the supervisor attaches
it and its HTTP client injects it as the ``traceparent`` header of the Execution API request. The
span made here has that ``traceparent`` as its parent, so it sits under the task's
``worker.<task_id>`` span:

* kind SERVER: this process serves a request whose parent is remote (OpenTelemetry's span kinds),
  and a CLIENT span here would draw a second caller of the store in service graphs;
* the task side's name and database attributes (``store_metrics.counting.tracing``):
  ``get task_state_store``, ``db.system.name``, ``db.collection.name``, ``db.operation.name``,
  ``store_metrics.outcome`` (decided from the status, as the counters decide it), so one query
  finds the spans of both ``count_at`` modes; plus the HTTP server's ``http.request.method`` and
  ``http.response.status_code``;
* on a failure ``error.type``: the exception's class when the route raised, else the status code
  (HTTP's convention); status ERROR for a 5xx or an exception only (a 4xx is the caller's error);
* ``store_metrics.retry``: on the span of a retried attempt's first answered read that this worker
  decided (``retries``). That decision waits for the attempt's lookup, so such a span is ended
  once decided, with the time its response finished as its end.

``TracedServerMetrics`` is chosen once per worker, when its metrics are made: with traces off
the worker runs ``ServerMetrics`` unchanged and never imports this module. Nothing
here raises into a request: a failure costs one log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any, Final
from uuid import UUID

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .. import logs
from ..catalogue import Outcome, Store
from ..counting.tracing import (
    DB_COLLECTION_NAME,
    DB_OPERATION_NAME,
    DB_SYSTEM_NAME,
    ERROR_TYPE,
    OUTCOME,
    RESUMED,
    RETRY,
    STARTED_OVER,
    SYSTEM,
    error_type,
    has_provider,
    tracer_from,
)
from .attribution import NULL_TI, requester
from .caller import Attempt
from .metrics import ServerMetrics
from .routes import ROUTES, ASGIApp, Receive, Route, Scope, Send
from .store_calls import StoreCalls

HTTP_METHOD: Final = "http.request.method"
HTTP_STATUS: Final = "http.response.status_code"
#: The server's outcomes (``outcome_of``) as the task side's spans say them.
SPAN_OUTCOMES: Final = {
    Outcome.READ_FOUND.value: "found",
    Outcome.READ_ABSENT.value: "absent",
    Outcome.WRITE.value: "written",
    Outcome.DELETE.value: "deleted",
    Outcome.CLEAR.value: "cleared",
    Outcome.ERROR.value: "error",
}
_ERROR: Final = Outcome.ERROR.value
#: The outcomes of an answered task store read, and whether it found a value.
_ANSWERED: Final = {Outcome.READ_FOUND.value: True, Outcome.READ_ABSENT.value: False}
_TASK_GET: Final[Route] = (Store.TASK.tag, "get")
_SERVER = SpanKind.SERVER
_propagator = TraceContextTextMapPropagator()


def _failed_once() -> None:
    logs.once(
        "server:trace",
        logging.ERROR,
        "store-metrics could not trace a state store request (it is served and counted as usual)",
        exc_info=True,
    )


class _Headers:
    """The ASGI scope's headers as the W3C propagator reads them (``traceparent``, ``tracestate``)."""

    __slots__ = ("_headers",)

    def __init__(self, headers: Any) -> None:
        self._headers = headers

    def get(self, name: str, default: Any = None) -> list[str] | None:
        wanted = name.encode("latin-1")
        found = [value.decode("latin-1") for key, value in self._headers if key.lower() == wanted]
        return found or default


class RouteSpan:
    """One request's span: answered once, maybe decided, ended once (at the response's end)."""

    __slots__ = ("_end_time", "_errored", "span")

    def __init__(self, span: Any) -> None:
        self.span = span
        self._end_time: int | None = None
        self._errored = False

    def raised(self, exc: BaseException) -> None:
        """The route raised ``exc`` (the server answers 500)."""
        try:
            self._errored = True
            span = self.span
            span.set_attribute(ERROR_TYPE, error_type(exc))
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        except Exception:
            _failed_once()

    def answered(self, status: int, outcome: str) -> None:
        """The response is finished: its status and outcome, and the span's end time."""
        try:
            self._end_time = time.time_ns()
            span = self.span
            span.set_attribute(HTTP_STATUS, status)
            span.set_attribute(OUTCOME, SPAN_OUTCOMES.get(outcome, outcome))
            if outcome == _ERROR and not self._errored:
                span.set_attribute(ERROR_TYPE, str(status))
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
        except Exception:
            _failed_once()

    def decided(self, found: bool) -> None:
        """This worker decided the retried attempt at this read: resumed or started over."""
        try:
            self.span.set_attribute(RETRY, RESUMED if found else STARTED_OVER)
        except Exception:
            _failed_once()

    def end(self) -> None:
        try:
            self.span.end(end_time=self._end_time)
        except Exception:
            _failed_once()


class RouteTracing:
    """What every request's span shares: the tracer, each route's name and fixed attributes."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self._names: dict[Route, str] = {}
        self._attributes: dict[Route, dict[str, str]] = {}
        for route in ROUTES:
            store, operation = route
            collection = Store.of_tag(store).value
            self._names[route] = f"{operation} {collection}"
            self._attributes[route] = {
                DB_SYSTEM_NAME: SYSTEM,
                DB_COLLECTION_NAME: collection,
                DB_OPERATION_NAME: operation,
            }

    def start(self, scope: Scope, route: Route) -> RouteSpan | None:
        """The request's span, its parent the ``traceparent`` it carries (a root span without one);
        ``None`` if it cannot be made (said once)."""
        try:
            parent = _propagator.extract(_Headers(scope.get("headers") or ()))
            span = self.tracer.start_span(
                self._names[route], context=parent, kind=_SERVER, attributes=self._attributes[route]
            )
            span.set_attribute(HTTP_METHOD, scope.get("method", "_OTHER"))
            return RouteSpan(span)
        except Exception:
            _failed_once()
            return None


class TracedStoreCalls(StoreCalls):
    """``StoreCalls`` that answers and ends each request's span.

    A span is ended once its request is counted, except the span of a task instance's first answered
    read this worker saw: it is held until the attempt is known (its lookup answered) and, for a
    retry, decided here or claimed by another worker, then ended with ``store_metrics.retry`` if
    this worker decided it. Held spans are bounded as the first reads are; one still held when
    it is pushed out (a lookup that never answered) or at shutdown is ended without a decision.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: OrderedDict[UUID, tuple[RouteSpan, bool]] = OrderedDict()

    def count(
        self, scope: Scope, route: Route, status: int, outcome: str, *, span: RouteSpan | None = None
    ) -> None:
        if span is None:
            super().count(scope, route, status, outcome)
            return
        span.answered(status, outcome)
        held = False
        try:
            if route == _TASK_GET and outcome in _ANSWERED:
                ident = requester(scope, route, status)
                if ident is not None and ident != NULL_TI and ident not in self.first_reads:
                    self._hold(ident, span, _ANSWERED[outcome])
                    held = True
        except Exception:
            _failed_once()
        super().count(scope, route, status, outcome)
        if not held:
            span.end()

    def _hold(self, ident: UUID, span: RouteSpan, found: bool) -> None:
        self._held[ident] = (span, found)
        if len(self._held) > self.first_reads.size:
            self._held.popitem(last=False)[1][0].end()

    def _settle(self, ident: UUID, attempt: Attempt) -> asyncio.Task[bool] | None:
        task = super()._settle(ident, attempt)
        held = self._held.pop(ident, None)
        if held is not None:
            span, found = held
            if task is None:
                span.end()
            else:
                task.add_done_callback(lambda done: _decided(done, span, found))
        return task

    def close(self) -> None:
        super().close()
        while self._held:
            self._held.popitem(last=False)[1][0].end()


def _decided(task: asyncio.Task[bool], span: RouteSpan, found: bool) -> None:
    if not task.cancelled() and task.exception() is None and task.result():
        span.decided(found)
    span.end()


class TracedServerMetrics(ServerMetrics):
    """``ServerMetrics`` whose state store requests are also spans (module docs)."""

    def __init__(self, *args: Any, tracing: RouteTracing, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tracing = tracing

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
        span = self.tracing.start(scope, route)
        if span is None:
            await super().serve(app, route, scope, receive, send)
            return
        traced = span

        async def traced_app(scope: Scope, receive: Receive, send: Send) -> None:
            try:
                await app(scope, receive, send)
            except Exception as exc:
                traced.raised(exc)
                raise

        # The counting (``calls.count``) answers the span and ends it, now or once decided.
        await super().serve(traced_app, route, scope, receive, send, span=traced)


def route_tracing(traces: str) -> RouteTracing | None:
    """This worker's ``RouteTracing`` for ``[store_metrics] traces``, or ``None`` (decided once,
    when the worker's metrics are made): ``off`` never; ``auto`` where Airflow's ``[traces] otel_on``
    is on; ``on`` also without it; either way only where a tracer provider is set (Airflow sets its
    own in every process when ``otel_on`` is on)."""
    from ..config.options import TRACES_AUTO, TRACES_OFF

    if traces == TRACES_OFF:
        return None
    if traces == TRACES_AUTO:
        from airflow.configuration import conf

        if not conf.getboolean("traces", "otel_on", fallback=False):
            return None
    if not has_provider():
        logs.once(
            "server:traces",
            logging.WARNING,
            "store-metrics: [store_metrics] traces = on, but no OpenTelemetry tracer provider is set in "
            "this API server worker ([traces] otel_on is off): state store requests are not traced",
        )
        return None
    return RouteTracing(tracer_from(trace.get_tracer_provider()))
