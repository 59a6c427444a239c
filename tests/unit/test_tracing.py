"""State store calls as OpenTelemetry spans: the exact span tree, through the real OpenTelemetry SDK.

A real ``TracerProvider`` with an ``InMemorySpanExporter`` stands where Airflow's provider is; a
``worker.t`` span stands where the task runner's span is (the real one is in
``tests/airflow/test_traces.py``). The inner stores are the in-memory fakes of
``support.fake_accessors``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import store_metrics
from store_metrics.counting import accessors, tracing
from store_metrics.testing import MetricsRecorder, capture_metrics
from support.fake_accessors import TAGS, Asset, Boom, FakeAssetStores, FakeAsyncTaskStore, FakeTaskStore

TASK = {"db.system.name": "airflow.state_store", "db.collection.name": "task_state_store"}
ASSET = {"db.system.name": "airflow.state_store", "db.collection.name": "asset_state_store"}


class Traces:
    """A real SDK provider whose finished spans are kept in memory, and its tracers."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = tracing.tracer_from(self.provider)
        self.task_tracer = self.provider.get_tracer("airflow.sdk.execution_time.task_runner")

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def tree(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        """(name, parent's name, attributes) of every finished span, in the order they ended."""
        spans = self.spans()
        names = {span.context.span_id: span.name for span in spans}
        return [
            (span.name, names.get(span.parent.span_id) if span.parent else None, dict(span.attributes or {}))
            for span in spans
        ]


@pytest.fixture
def traces() -> Iterator[Traces]:
    found = Traces()
    yield found
    found.provider.shutdown()


@pytest.fixture
def metrics() -> Iterator[MetricsRecorder]:
    with capture_metrics() as recorder:
        yield recorder


def span(operation: str, store: dict[str, str], outcome: str, **more: str) -> dict[str, str]:
    return {**store, "db.operation.name": operation, "store_metrics.outcome": outcome, **more}


def run_task(traces: Traces, metrics: MetricsRecorder, inner: Any, body: Any, *, retried: bool) -> None:
    """Instrument as the listener does (inside the task's span), then run the task's body there."""
    from opentelemetry import trace

    with traces.task_tracer.start_as_current_span("worker.t"):
        store = store_metrics.instrument_task_store(
            inner,
            metrics,
            TAGS,
            retried=retried,
            tracer=traces.tracer,
            task_span=trace.get_current_span(),
        )
        body(store)


# -- the user's story: a retry's trace ---------------------------------------------------------


def test_a_resumed_retrys_trace_shows_its_first_read_found_and_the_decision(
    traces: Traces, metrics: MetricsRecorder
) -> None:
    inner = FakeTaskStore()
    inner.data["job_id"] = "j-1"  # what try 1 saved

    def body(store: Any) -> None:
        assert store.get("job_id") == "j-1"
        store.set("job_id", "j-2")
        assert store.get("job_id") == "j-2"
        store.delete("job_id")

    run_task(traces, metrics, inner, body, retried=True)
    assert traces.tree() == [
        (
            "get task_state_store",
            "worker.t",
            span("get", TASK, "found", **{"store_metrics.retry": "resumed"}),
        ),
        ("set task_state_store", "worker.t", span("set", TASK, "written")),
        ("get task_state_store", "worker.t", span("get", TASK, "found")),
        ("delete task_state_store", "worker.t", span("delete", TASK, "deleted")),
        ("worker.t", None, {"store_metrics.retry": "resumed"}),
    ]
    assert {s.kind for s in traces.spans() if s.name != "worker.t"} == {SpanKind.CLIENT}
    assert {s.instrumentation_scope.name for s in traces.spans() if s.name != "worker.t"} == {"store_metrics"}
    # The counters are what the untraced wrapper counts.
    assert metrics.counts() == {
        "task_state_store.read_found": 2,
        "task_state_store.write": 1,
        "task_state_store.delete": 1,
        "task_state_store.retry_resumed": 1,
    }


def test_a_started_over_retrys_trace_says_so_on_the_read_and_the_task(
    traces: Traces, metrics: MetricsRecorder
) -> None:
    def body(store: Any) -> None:
        assert store.get("job_id", "none") == "none"
        store.set("job_id", "j-new")
        store.clear()

    run_task(traces, metrics, FakeTaskStore(), body, retried=True)
    assert traces.tree() == [
        (
            "get task_state_store",
            "worker.t",
            span("get", TASK, "absent", **{"store_metrics.retry": "started_over"}),
        ),
        ("set task_state_store", "worker.t", span("set", TASK, "written")),
        ("clear task_state_store", "worker.t", span("clear", TASK, "cleared")),
        ("worker.t", None, {"store_metrics.retry": "started_over"}),
    ]
    assert metrics.counts()["task_state_store.retry_not_resumed"] == 1


def test_a_first_try_has_no_retry_attribute_anywhere(traces: Traces, metrics: MetricsRecorder) -> None:
    run_task(traces, metrics, FakeTaskStore(), lambda store: store.get("k"), retried=False)
    assert traces.tree() == [
        ("get task_state_store", "worker.t", span("get", TASK, "absent")),
        ("worker.t", None, {}),
    ]


def test_a_failing_call_is_an_error_span_and_the_task_gets_the_same_exception(
    traces: Traces, metrics: MetricsRecorder
) -> None:
    inner = FakeTaskStore()
    boom = Boom("supervisor said no")
    inner.fail = boom
    caught: list[BaseException] = []

    def body(store: Any) -> None:
        for call in (lambda: store.get("k"), lambda: store.set("k", 1), store.clear):
            with pytest.raises(Boom) as raised:
                call()
            caught.append(raised.value)
        inner.fail = None
        assert store.get("k") is None  # the retry's first answered read decides, not the failed one

    run_task(traces, metrics, inner, body, retried=True)
    assert caught == [boom, boom, boom] and all(exc is boom for exc in caught)
    error = {"error.type": "support.fake_accessors.Boom"}
    assert traces.tree() == [
        ("get task_state_store", "worker.t", span("get", TASK, "error", **error)),
        ("set task_state_store", "worker.t", span("set", TASK, "error", **error)),
        ("clear task_state_store", "worker.t", span("clear", TASK, "error", **error)),
        (
            "get task_state_store",
            "worker.t",
            span("get", TASK, "absent", **{"store_metrics.retry": "started_over"}),
        ),
        ("worker.t", None, {"store_metrics.retry": "started_over"}),
    ]
    failed = traces.spans()[0]
    assert failed.status.status_code is StatusCode.ERROR
    assert [(event.name, event.attributes["exception.type"]) for event in failed.events] == [
        ("exception", "support.fake_accessors.Boom")
    ]
    assert metrics.counts() == {
        "task_state_store.error": 3,
        "task_state_store.read_absent": 1,
        "task_state_store.retry_not_resumed": 1,
    }


def test_builtin_exceptions_are_named_alone() -> None:
    assert tracing.error_type(KeyError("k")) == "KeyError"
    assert tracing.error_type(Boom()) == "support.fake_accessors.Boom"


def test_return_values_and_defaults_pass_through_untouched(traces: Traces, metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore()
    stored = {"nested": [1, 2]}
    inner.data["k"] = stored
    mine = object()
    store = store_metrics.instrument_task_store(inner, metrics, TAGS, tracer=traces.tracer)
    assert store.get("k") is stored
    assert store.get("missing", mine) is mine
    assert store.set("k", stored) is None
    assert inner.calls[-1] == ("set", ("k", stored), {})


def test_the_key_is_on_the_span_only_when_asked_for(traces: Traces, metrics: MetricsRecorder) -> None:
    plain = store_metrics.instrument_task_store(FakeTaskStore(), metrics, TAGS, tracer=traces.tracer)
    keyed = store_metrics.instrument_task_store(
        FakeTaskStore(), metrics, TAGS, tracer=traces.tracer, trace_keys=True
    )
    plain.get("customer-ä/42")
    keyed.get("customer-ä/42")
    keyed.clear()
    assert [s.attributes.get("store_metrics.key") for s in traces.spans()] == [None, "customer-ä/42", None]


def test_async_calls_are_spans_like_sync_ones(traces: Traces, metrics: MetricsRecorder) -> None:
    inner = FakeAsyncTaskStore()

    async def body(store: Any) -> None:
        assert await store.aget("k") is None
        await store.aset("k", "v")
        assert await store.aget("k") == "v"
        await store.adelete("k")
        await store.aclear()
        inner.fail = Boom()
        with pytest.raises(Boom):
            await store.aget("k")

    run_task(traces, metrics, inner, lambda store: asyncio.run(body(store)), retried=True)
    assert traces.tree() == [
        (
            "get task_state_store",
            "worker.t",
            span("get", TASK, "absent", **{"store_metrics.retry": "started_over"}),
        ),
        ("set task_state_store", "worker.t", span("set", TASK, "written")),
        ("get task_state_store", "worker.t", span("get", TASK, "found")),
        ("delete task_state_store", "worker.t", span("delete", TASK, "deleted")),
        ("clear task_state_store", "worker.t", span("clear", TASK, "cleared")),
        (
            "get task_state_store",
            "worker.t",
            span("get", TASK, "error", **{"error.type": "support.fake_accessors.Boom"}),
        ),
        ("worker.t", None, {"store_metrics.retry": "started_over"}),
    ]


def test_the_asset_store_and_its_subscripted_accessors_are_spans(
    traces: Traces, metrics: MetricsRecorder
) -> None:
    asset = Asset("orders")
    stores = store_metrics.instrument_asset_store(
        FakeAssetStores("orders"), metrics, TAGS, tracer=traces.tracer
    )
    stores[asset].set("watermark", 3)
    assert stores[asset].get("watermark") == 3
    assert stores.get("watermark") == 3  # the single-asset sugar
    assert asyncio.run(stores.aget("other", "none")) == "none"
    assert traces.tree() == [
        ("set asset_state_store", None, span("set", ASSET, "written")),
        ("get asset_state_store", None, span("get", ASSET, "found")),
        ("get asset_state_store", None, span("get", ASSET, "found")),
        ("get asset_state_store", None, span("get", ASSET, "absent")),
    ]


def test_the_span_is_current_while_the_inner_call_runs(traces: Traces, metrics: MetricsRecorder) -> None:
    """What the call does (the Task SDK's request to its supervisor takes the current context) is
    the span's."""
    from opentelemetry import trace

    seen: list[Any] = []

    class Seeing(FakeTaskStore):
        def get(self, key: str, default: Any = None) -> Any:
            seen.append(trace.get_current_span().get_span_context().span_id)
            return super().get(key, default)

    store_metrics.instrument_task_store(Seeing(), metrics, TAGS, tracer=traces.tracer).get("k")
    assert seen == [traces.spans()[0].context.span_id]
    assert trace.get_current_span() is trace.INVALID_SPAN  # and detached after


def test_copies_stay_traced_and_share_the_one_decision(traces: Traces, metrics: MetricsRecorder) -> None:
    import copy

    def body(store: Any) -> None:
        copy.copy(store).get("k")
        copy.deepcopy(store).get("k")

    run_task(traces, metrics, FakeTaskStore(), body, retried=True)
    assert [attributes.get("store_metrics.retry") for (_, _, attributes) in traces.tree()] == [
        "started_over",
        None,
        "started_over",
    ]


# -- traces off: the wrapper is today's, unchanged -------------------------------------------------


def test_without_a_tracer_the_wrapper_runs_the_counting_methods_unchanged(metrics: MetricsRecorder) -> None:
    plain = store_metrics.instrument_task_store(FakeTaskStore(), metrics, TAGS)
    retried = store_metrics.instrument_task_store(FakeTaskStore(), metrics, TAGS, retried=True)
    both = store_metrics.instrument_task_store(FakeAsyncTaskStore(), metrics, TAGS)
    # type() sees the wrapper's own class (isinstance is fooled on purpose).
    assert type(plain).get is accessors.InstrumentedStore.get
    assert type(retried).get is accessors._retried_get
    assert type(both).aget is accessors.InstrumentedAsyncStore.aget
    assert type(both).set is accessors.InstrumentedStore.set


def test_without_a_tracer_nothing_of_opentelemetry_is_imported() -> None:
    import subprocess
    import sys

    from testbed.repository import ROOT, python_path

    code = (
        "import sys, store_metrics\n"
        "from store_metrics.testing import capture_metrics\n"
        "from support.fake_accessors import FakeAsyncTaskStore, TAGS\n"
        "with capture_metrics() as m:\n"
        "    s = store_metrics.instrument_task_store(FakeAsyncTaskStore(), m, TAGS, retried=True)\n"
        "    s.get('k'); s.set('k', 1)\n"
        "names = ('opentelemetry', 'store_metrics.counting.tracing')\n"
        "print(sorted(n for n in sys.modules if n.startswith(names)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": python_path(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"
