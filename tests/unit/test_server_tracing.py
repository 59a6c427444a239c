"""``count_at = api_server`` with traces on: each state store request a SERVER span in the task's trace.

The real ASGI middleware serves requests carrying the ``traceparent`` header the Task SDK's
supervisor sends; a real ``TracerProvider`` with an ``InMemorySpanExporter`` stands where Airflow's
provider is, and the route is a stand-in for the Execution API (it verifies the token as Airflow's
does, by leaving ``ti_token`` on the scope, and answers).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from store_metrics.api_server import ServerMetrics, StateStoreRouteMetrics
from store_metrics.api_server.attribution import TaskAttempt
from store_metrics.api_server.retries import HostClaims
from store_metrics.api_server.routes import Receive, Scope, Send
from store_metrics.api_server.tracing import (
    RouteTracing,
    TracedServerMetrics,
    TracedStoreCalls,
    route_tracing,
)
from store_metrics.emitter import AggregatingEmitter

TI = uuid.UUID("01a227c4-7477-73da-8ac2-9f0094c7c3ef")
TAGS = {"dag_id": "etl", "task_id": "load", "run_type": "scheduled", "operator": "PythonOperator"}
#: The task's ``worker.load`` span, as the supervisor's HTTP client sends it.
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TASK_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{TASK_SPAN_ID}-01".encode()


class Lookup:
    def __init__(self, try_number: int) -> None:
        self.try_number = try_number

    def __call__(self, ti_id: uuid.UUID) -> TaskAttempt | None:
        return TaskAttempt(TAGS, self.try_number) if ti_id == TI else None


class Boom(Exception):
    pass


async def execution_api(scope: Scope, receive: Receive, send: Send) -> None:
    """The state store routes: ``/missing`` is absent, ``/boom`` raises, ``/conflict`` answers 409."""
    await receive()
    scope["ti_token"] = SimpleNamespace(id=TI)
    path = scope["path"]
    if path.endswith("/boom"):
        raise Boom("the store backend failed")
    if path.endswith("/missing"):
        status = 404
    elif path.endswith("/conflict"):
        status = 409
    else:
        status = 200 if scope["method"] == "GET" else 204
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b'{"value":1}' if status == 200 else b""})


async def request(app: Any, method: str, path: str, traceparent: bytes | None = TRACEPARENT) -> int:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"content-type", b"application/json")]
    if traceparent is not None:
        headers.append((b"traceparent", traceparent))
    await app(
        {"type": "http", "method": method, "path": path, "root_path": "", "headers": headers}, receive, send
    )
    return int(sent[0]["status"])


class Server:
    """One API server worker with traces on, its spans read back from memory."""

    def __init__(self, emitter: AggregatingEmitter, claims: Path, try_number: int = 1) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.calls = TracedStoreCalls(emitter, Lookup(try_number), claims=HostClaims(claims))
        self.metrics = TracedServerMetrics(
            emitter,
            "w-1",
            tick_ms=10,
            threshold_ms=100,
            calls=self.calls,
            tracing=RouteTracing(provider.get_tracer("store_metrics")),
        )
        self.app = StateStoreRouteMetrics(execution_api, metrics=self.metrics)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def db(operation: str, collection: str = "task_state_store") -> dict[str, Any]:
    return {
        "db.system.name": "airflow.state_store",
        "db.collection.name": collection,
        "db.operation.name": operation,
    }


def test_each_request_is_a_server_span_under_the_task_span_it_carries(
    emitter: AggregatingEmitter, tmp_path: Path
) -> None:
    server = Server(emitter, tmp_path / "claims")
    key = f"/execution/store/ti/{TI}"

    async def run() -> None:
        assert await request(server.app, "GET", f"{key}/missing") == 404
        assert await request(server.app, "PUT", f"{key}/k") == 204
        assert await request(server.app, "GET", f"{key}/k") == 200
        assert await request(server.app, "DELETE", f"{key}/k") == 204
        assert await request(server.app, "DELETE", key) == 204
        assert await request(server.app, "PUT", "/execution/store/asset/by-name/value") == 204
        assert await request(server.app, "GET", "/execution/task-instances/x") == 200  # not a store route
        assert await server.calls.drain(5)

    asyncio.run(run())
    # In request order: the first read's span ends once its task instance is known (module docs).
    spans = sorted(server.spans(), key=lambda s: s.start_time or 0)
    assert [(s.name, attributes(s)) for s in spans] == [
        ("get task_state_store", {**db("get"), "http.request.method": "GET", "http.response.status_code": 404,
                                  "store_metrics.outcome": "absent"}),
        ("set task_state_store", {**db("set"), "http.request.method": "PUT", "http.response.status_code": 204,
                                  "store_metrics.outcome": "written"}),
        ("get task_state_store", {**db("get"), "http.request.method": "GET", "http.response.status_code": 200,
                                  "store_metrics.outcome": "found"}),
        ("delete task_state_store", {**db("delete"), "http.request.method": "DELETE",
                                     "http.response.status_code": 204, "store_metrics.outcome": "deleted"}),
        ("clear task_state_store", {**db("clear"), "http.request.method": "DELETE",
                                    "http.response.status_code": 204, "store_metrics.outcome": "cleared"}),
        ("set asset_state_store", {**db("set", "asset_state_store"), "http.request.method": "PUT",
                                   "http.response.status_code": 204, "store_metrics.outcome": "written"}),
    ]  # fmt: skip
    for span in spans:
        assert span.kind is SpanKind.SERVER
        assert span.parent is not None and span.parent.is_remote
        assert f"{span.parent.span_id:016x}" == TASK_SPAN_ID
        assert f"{span.context.trace_id:032x}" == TRACE_ID
        assert span.status.status_code is StatusCode.UNSET
        assert span.instrumentation_scope is not None and span.instrumentation_scope.name == "store_metrics"


def test_a_request_without_a_trace_context_is_a_root_span(
    emitter: AggregatingEmitter, tmp_path: Path
) -> None:
    server = Server(emitter, tmp_path / "claims")
    asyncio.run(request(server.app, "PUT", f"/execution/store/ti/{TI}/k", traceparent=None))
    (span,) = server.spans()
    assert span.name == "set task_state_store"
    assert span.parent is None


@pytest.mark.parametrize(("first", "decision"), [("k", "resumed"), ("missing", "started_over")])
def test_a_retried_attempts_first_read_span_carries_the_decision(
    emitter: AggregatingEmitter, tmp_path: Path, first: str, decision: str
) -> None:
    server = Server(emitter, tmp_path / "claims", try_number=2)
    key = f"/execution/store/ti/{TI}"

    async def run() -> None:
        await request(server.app, "GET", f"{key}/{first}")
        await request(server.app, "PUT", f"{key}/k")
        await request(server.app, "GET", f"{key}/k")
        assert await server.calls.drain(5)

    asyncio.run(run())
    got = [(s.name, attributes(s)["store_metrics.outcome"], attributes(s).get("store_metrics.retry"))
           for s in sorted(server.spans(), key=lambda s: s.start_time or 0)]  # fmt: skip
    assert got == [
        ("get task_state_store", "found" if first == "k" else "absent", decision),
        ("set task_state_store", "written", None),
        ("get task_state_store", "found", None),
    ]
    # The held span still ends when its response did, not when the decision was made.
    first_span = min(server.spans(), key=lambda s: s.start_time or 0)
    second = sorted(server.spans(), key=lambda s: s.start_time or 0)[1]
    assert first_span.end_time is not None and second.start_time is not None
    assert first_span.end_time <= second.start_time
    counted = {name for (name, _tags) in emitter.snapshot() if "retry" in name}
    assert counted == {f"task_state_store.retry_{'resumed' if first == 'k' else 'not_resumed'}"}


def test_a_first_try_reads_decide_nothing(emitter: AggregatingEmitter, tmp_path: Path) -> None:
    server = Server(emitter, tmp_path / "claims", try_number=1)

    async def run() -> None:
        await request(server.app, "GET", f"/execution/store/ti/{TI}/missing")
        assert await server.calls.drain(5)

    asyncio.run(run())
    (span,) = server.spans()
    assert "store_metrics.retry" not in attributes(span)


def test_a_route_that_raises_gives_its_exception_type_and_still_raises(
    emitter: AggregatingEmitter, tmp_path: Path
) -> None:
    server = Server(emitter, tmp_path / "claims")
    with pytest.raises(Boom, match="the store backend failed"):
        asyncio.run(request(server.app, "PUT", f"/execution/store/ti/{TI}/boom"))
    (span,) = server.spans()
    assert attributes(span) == {
        **db("set"),
        "http.request.method": "PUT",
        "http.response.status_code": 500,
        "store_metrics.outcome": "error",
        "error.type": f"{__name__}.Boom",
    }
    assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]


def test_a_refused_request_is_an_error_by_its_status_not_a_server_failure(
    emitter: AggregatingEmitter, tmp_path: Path
) -> None:
    server = Server(emitter, tmp_path / "claims")
    assert asyncio.run(request(server.app, "PUT", f"/execution/store/ti/{TI}/conflict")) == 409
    (span,) = server.spans()
    assert attributes(span)["store_metrics.outcome"] == "error"
    assert attributes(span)["error.type"] == "409"
    assert span.status.status_code is StatusCode.UNSET  # a 4xx is the caller's error


def test_a_tracer_that_fails_costs_a_log_line_not_the_request(
    emitter: AggregatingEmitter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class BrokenTracer:
        def start_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("exporter misconfigured")

    calls = TracedStoreCalls(emitter, Lookup(1), claims=HostClaims(tmp_path / "claims"))
    metrics = TracedServerMetrics(
        emitter, "w-1", tick_ms=10, threshold_ms=100, calls=calls, tracing=RouteTracing(BrokenTracer())
    )
    app = StateStoreRouteMetrics(execution_api, metrics=metrics)

    async def run() -> None:
        assert await request(app, "GET", f"/execution/store/ti/{TI}/k") == 200
        assert await calls.drain(5)

    asyncio.run(run())
    assert {name for (name, _tags) in emitter.snapshot() if name.startswith("task_state_store.")} == {
        "task_state_store.read_found"
    }
    assert "could not trace a state store request" in caplog.text


@pytest.mark.parametrize("otel_on", ["False", "True"])
def test_traces_off_or_auto_without_otel_on_makes_no_tracing(
    monkeypatch: pytest.MonkeyPatch, otel_on: str
) -> None:
    monkeypatch.setenv("AIRFLOW__TRACES__OTEL_ON", otel_on)
    assert route_tracing("off") is None
    if otel_on == "False":
        assert route_tracing("auto") is None


def test_traces_on_without_a_tracer_provider_says_so_and_traces_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from store_metrics.counting import tracing

    monkeypatch.setattr(tracing, "has_provider", lambda: False)
    monkeypatch.setattr("store_metrics.api_server.tracing.has_provider", lambda: False)
    assert route_tracing("on") is None
    assert "no OpenTelemetry tracer provider" in caplog.text


def test_with_traces_off_the_worker_serves_with_the_untraced_classes(
    emitter: AggregatingEmitter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from store_metrics.api_server import worker_metrics

    monkeypatch.setenv("AIRFLOW__STORE_METRICS__TRACES", "off")
    assert worker_metrics._route_tracing("off") is None
    assert type(ServerMetrics(emitter, "w-1", tick_ms=10, threshold_ms=100)).serve is ServerMetrics.serve


def test_a_trace_the_task_did_not_sample_gets_no_route_span(
    emitter: AggregatingEmitter, tmp_path: Path
) -> None:
    server = Server(emitter, tmp_path / "claims")
    unsampled = f"00-{TRACE_ID}-{TASK_SPAN_ID}-00".encode()
    assert (
        asyncio.run(request(server.app, "PUT", f"/execution/store/ti/{TI}/k", traceparent=unsampled)) == 204
    )
    assert server.spans() == []


def test_the_counts_are_the_same_with_traces_on_and_off(tmp_path: Path) -> None:
    from store_metrics.api_server import StoreCalls
    from store_metrics.counting.runtime import create_emitter

    key = f"/execution/store/ti/{TI}"
    sequence = [
        ("GET", f"{key}/missing"),
        ("PUT", f"{key}/k"),
        ("PUT", f"{key}/conflict"),
        ("GET", f"{key}/k"),
    ]

    def counted(traced: bool) -> dict[Any, int]:
        em = create_emitter("none", flush_interval=60)
        try:
            calls: StoreCalls
            if traced:
                server = Server(em, tmp_path / "on", try_number=2)
                app, calls = server.app, server.calls
            else:
                calls = StoreCalls(em, Lookup(2), claims=HostClaims(tmp_path / "off"))
                app = StateStoreRouteMetrics(
                    execution_api, metrics=ServerMetrics(em, "w-1", tick_ms=10, threshold_ms=100, calls=calls)
                )

            async def run() -> None:
                for method, path in sequence:
                    await request(app, method, path)
                assert await calls.drain(5)

            asyncio.run(run())
            # The task side's counters (the route metrics time requests, the stall monitor the loop:
            # what a loaded machine does to them is no part of tracing).
            return {k: v for k, v in em.snapshot().items() if not k[0].startswith("api_server.")}
        finally:
            em.close(1)

    off = counted(traced=False)
    assert {name for name, _tags in off} >= {"task_state_store.retry_not_resumed", "task_state_store.write"}
    assert counted(traced=True) == off
