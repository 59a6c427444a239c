"""Exemplars: a counter point made by a traced call carries that call's trace, through the real SDK.

A real ``MeterProvider`` with the SDK's ``InMemoryMetricReader`` (its exemplar filter the default,
``trace_based``) takes the ``otel`` backend's counters; a real ``TracerProvider`` stands where
Airflow's is. The real pipeline (OTLP to the Collector to Prometheus' exemplar storage, from a real
task) is ``tests/airflow/test_exemplars.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider, ObservableCounter
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import store_metrics
from store_metrics.counting import tracing
from support.stores import DictStore
from support.tags import TAGS


def exemplars(reader: InMemoryMetricReader) -> dict[str, list[tuple[int, list[tuple[int, int]]]]]:
    """One collection: {metric name: [(value, [(trace id, span id) of each exemplar]), ...]}."""
    data = reader.get_metrics_data()
    out: dict[str, list[tuple[int, list[tuple[int, int]]]]] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out[metric.name] = [
                    (int(p.value), [(e.trace_id, e.span_id) for e in p.exemplars])
                    for p in metric.data.data_points
                ]
    return out


@pytest.fixture(
    params=[AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE], ids=["delta", "cumulative"]
)
def reader(request: pytest.FixtureRequest) -> Iterator[tuple[Any, InMemoryMetricReader]]:
    found = InMemoryMetricReader(preferred_temporality={ObservableCounter: request.param})
    provider = MeterProvider(metric_readers=[found], shutdown_on_exit=False)
    emitter = store_metrics.configure("otel", meter_provider=provider)
    assert emitter.flush(5.0)
    yield emitter, found
    store_metrics.shutdown(5.0)


def test_a_retry_that_started_over_links_its_counts_to_its_trace(
    reader: tuple[Any, InMemoryMetricReader],
) -> None:
    emitter, metrics = reader
    provider = TracerProvider()
    task_tracer = provider.get_tracer("airflow.sdk.execution_time.task_runner")
    with task_tracer.start_as_current_span("worker.t") as task:
        store = store_metrics.instrument_task_store(
            DictStore(), emitter, TAGS, retried=True, tracer=tracing.tracer_from(provider), task_span=task
        )
        assert store.get("job_id") is None
        store.set("job_id", "j-1")
    first = exemplars(metrics)
    trace_id = task.get_span_context().trace_id
    # Each point is the one its traced call made: the trace is the task's, the span the call's own.
    assert {name: [(v, [t for t, _ in e]) for v, e in points] for name, points in first.items()} == {
        "airflow.task_state_store.read_absent": [(1, [trace_id])],
        "airflow.task_state_store.retry_not_resumed": [(1, [trace_id])],
        "airflow.task_state_store.write": [(1, [trace_id])],
    }
    read_span = first["airflow.task_state_store.read_absent"][0][1][0][1]
    assert first["airflow.task_state_store.retry_not_resumed"][0][1][0][1] == read_span
    assert first["airflow.task_state_store.write"][0][1][0][1] != read_span
    assert read_span != task.get_span_context().span_id
    # Taken once: the next collection, with no new call, carries no exemplar.
    assert all(not e for points in exemplars(metrics).values() for _, e in points)
    provider.shutdown()


def test_an_untraced_or_unsampled_call_gives_no_exemplar(reader: tuple[Any, InMemoryMetricReader]) -> None:
    emitter, metrics = reader
    unsampled = TracerProvider(sampler=ALWAYS_OFF)
    with unsampled.get_tracer("t").start_as_current_span("worker.t"):
        traced = store_metrics.instrument_task_store(
            DictStore(), emitter, TAGS, tracer=tracing.tracer_from(unsampled)
        )
        traced.set("a", 1)
    sampled = TracerProvider()
    with sampled.get_tracer("t").start_as_current_span("worker.t"):
        # Inside a sampled span, but an untraced wrapper: the counts are the same, no exemplar.
        store_metrics.instrument_task_store(DictStore(), emitter, {**TAGS, "task_id": "other"}).set("a", 1)
    assert {name: [(v, e) for v, e in points] for name, points in exemplars(metrics).items()} == {
        "airflow.task_state_store.write": [(1, []), (1, [])]
    }
    assert trace.get_current_span() is trace.INVALID_SPAN
