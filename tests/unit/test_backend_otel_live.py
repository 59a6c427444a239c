"""The ``otel`` adapter's histograms and gauges: live observations, and what arrives by ``export()``.

The adapter is driven directly (``open``, ``record_histogram``, ``export``), as the emitter drives
it, and read through the SDK's own ``InMemoryMetricReader`` on a ``MeterProvider`` passed in.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

from store_metrics import catalogue
from store_metrics.backends import otel
from store_metrics.backends.airflow_stats import AirflowStatsBackend
from store_metrics.backends.none import NoneBackend
from store_metrics.catalogue import Metric
from store_metrics.counting.runtime import create_emitter
from store_metrics.deltas import Buckets, CounterDelta, GaugeValue, HistogramDelta, TagTuple
from store_metrics.naming import normalize_tags

DURATION = catalogue.SERVER_DURATION
STALL = catalogue.LOOP_STALL
STALL_MAX = catalogue.LOOP_STALL_MAX
TAGS = {"store": "task", "operation": "get", "status_class": "2xx", "value_size": "le_1KiB", "worker": "h-1"}
WIRE_TAGS = normalize_tags(TAGS)
#: On a bound, just above it, below the first bound, above the last.
VALUES = (0.5, 1.0, 1.000001, 2.5, 3.0, 4.0, 250.0, 20_000.0)


class NoTotals:
    """A TotalsSource with nothing counted (these tests are about histograms and gauges)."""

    def totals(self, metric: Metric) -> list[tuple[TagTuple, int]]:
        return []


def in_memory() -> tuple[MeterProvider, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader], shutdown_on_exit=False), reader


def opened(provider: MeterProvider) -> otel.OtelBackend:
    backend = otel.create(meter_provider=provider)
    backend.open(NoTotals())
    return backend


def buckets_of(values: Iterable[float], bounds: tuple[float, ...] = DURATION.buckets) -> Buckets:
    """What the emitter's histogram series holds after observing ``values``."""
    counts = [0] * (len(bounds) + 1)
    sums = [0.0] * (len(bounds) + 1)
    for value in values:
        i = bisect_left(bounds, value)
        counts[i] += 1
        sums[i] += value
    return Buckets(bounds, tuple(counts), tuple(sums))


def points(reader: InMemoryMetricReader) -> dict[str, Any]:
    """One collection: {metric name: the metric}."""
    data = reader.get_metrics_data()
    if data is None:
        return {}
    return {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def test_the_adapters_declare_how_they_are_driven() -> None:
    provider, _ = in_memory()
    backend = otel.create(meter_provider=provider)
    assert (backend.pull, backend.opens_without_io, backend.live_histograms) == (True, True, True)
    assert backend.own.recorder is None  # no OTLP exporter of our own with a provider passed in
    assert (AirflowStatsBackend.pull, AirflowStatsBackend.opens_without_io) == (False, False)
    assert AirflowStatsBackend.live_histograms is True
    none = NoneBackend()
    assert (none.pull, none.opens_without_io, none.live_histograms) == (False, False, False)
    # Every backend says whether it reaches anyone, and under which prefix: no probing.
    assert (none.sends_nowhere, backend.sends_nowhere, backend.prefix, none.prefix) == (
        True,
        False,
        "airflow",
        "",
    )
    # Each factory takes exactly the options it declares: nothing is swallowed.
    with pytest.raises(TypeError):
        otel.create(meter_provider=provider, host="localhost")  # type: ignore[call-arg]


def test_live_observations_give_exact_bucket_counts_and_sum() -> None:
    provider, reader = in_memory()
    backend = opened(provider)
    for value in VALUES:
        backend.record_histogram(DURATION, WIRE_TAGS, value)
    metric = points(reader)[DURATION.full_name()]
    assert (metric.unit, metric.description) == (DURATION.unit, DURATION.description)
    (point,) = metric.data.data_points
    assert dict(point.attributes) == TAGS
    assert tuple(point.explicit_bounds) == DURATION.buckets
    assert tuple(point.bucket_counts) == buckets_of(VALUES).counts
    assert point.count == len(VALUES)
    assert point.sum == sum(VALUES)  # the values themselves, not bucket means
    assert (point.min, point.max) == (min(VALUES), max(VALUES))
    # Cumulative by default with a reader of our own: the next collection adds to it.
    backend.record_histogram(DURATION, WIRE_TAGS, 3.0)
    (point,) = points(reader)[DURATION.full_name()].data.data_points
    assert point.count == len(VALUES) + 1 and point.sum == sum(VALUES) + 3.0
    assert metric.data.aggregation_temporality is AggregationTemporality.CUMULATIVE


def test_each_tag_set_is_its_own_series_and_each_histogram_its_own_metric() -> None:
    provider, reader = in_memory()
    backend = opened(provider)
    other = normalize_tags({**TAGS, "status_class": "5xx"})
    backend.record_histogram(DURATION, WIRE_TAGS, 3.0)
    backend.record_histogram(DURATION, other, 7.0)
    backend.record_histogram(DURATION, other, 8.0)
    backend.record_histogram(STALL, (("worker", "h-1"),), 12.0)
    collected = points(reader)
    series = collected[DURATION.full_name()].data.data_points
    by_status = {p.attributes["status_class"]: (p.count, p.sum) for p in series}
    assert by_status == {"2xx": (1, 3.0), "5xx": (2, 15.0)}
    (stall,) = collected[STALL.full_name()].data.data_points
    assert tuple(stall.explicit_bounds) == STALL.buckets
    assert (dict(stall.attributes), stall.count, stall.sum) == ({"worker": "h-1"}, 1, 12.0)


def test_observations_made_before_open_arrive_by_export_and_add_up_with_live_ones() -> None:
    provider, reader = in_memory()
    backend = otel.create(meter_provider=provider)
    before = HistogramDelta(DURATION, WIRE_TAGS, buckets_of(VALUES))
    # Not open in this process: nothing is sent, so the emitter keeps the delta.
    with pytest.raises(RuntimeError, match="not open"):
        backend.export([before])
    with pytest.raises(RuntimeError, match="not open"):
        backend.record_histogram(DURATION, WIRE_TAGS, 1.0)
    backend.open(NoTotals())
    backend.export([before])
    (point,) = points(reader)[DURATION.full_name()].data.data_points
    # Each bucket's observations as that bucket's mean: counts exact, sum exact (up to rounding).
    assert tuple(point.bucket_counts) == before.buckets.counts
    assert point.count == len(VALUES) and point.sum == pytest.approx(sum(VALUES), rel=1e-12)
    backend.record_histogram(DURATION, WIRE_TAGS, 3.0)
    (point,) = points(reader)[DURATION.full_name()].data.data_points
    assert tuple(point.bucket_counts) == buckets_of((*VALUES, 3.0)).counts
    assert point.sum == pytest.approx(sum(VALUES) + 3.0, rel=1e-12)


def test_gauges_are_pushed_and_counters_are_left_to_their_callbacks() -> None:
    provider, reader = in_memory()
    backend = opened(provider)
    write = catalogue.get("task_state_store.write")
    backend.export([GaugeValue(STALL_MAX, (("worker", "h-1"),), 212.5), CounterDelta(write, (), 3)])
    collected = points(reader)
    (gauge,) = collected[STALL_MAX.full_name()].data.data_points
    assert (dict(gauge.attributes), gauge.value) == ({"worker": "h-1"}, 212.5)
    assert write.full_name() not in collected  # NoTotals counted nothing; the delta is not pushed
    backend.export([GaugeValue(STALL_MAX, (("worker", "h-1"),), 1.5)])
    (gauge,) = points(reader)[STALL_MAX.full_name()].data.data_points
    assert gauge.value == 1.5


def test_backends_on_one_provider_share_its_histogram(caplog: pytest.LogCaptureFixture) -> None:
    provider, reader = in_memory()
    first, second = opened(provider), opened(provider)
    with caplog.at_level(logging.WARNING):
        first.record_histogram(DURATION, WIRE_TAGS, 3.0)
        second.record_histogram(DURATION, WIRE_TAGS, 4.0)
    assert not [r for r in caplog.records if "created already" in r.getMessage()]  # one instrument
    (point,) = points(reader)[DURATION.full_name()].data.data_points
    assert (point.count, point.sum) == (2, 7.0)


def test_through_the_emitter_a_collection_right_after_record_sees_the_observation() -> None:
    """The backend opens at configure time (no I/O), so every observation goes live: no flush needed."""
    provider, reader = in_memory()
    emitter = create_emitter("otel", meter_provider=provider, flush_interval=60)
    try:
        histogram = emitter.histogram(DURATION, TAGS)
        for value in VALUES:
            histogram.record(value)
        (point,) = points(reader)[DURATION.full_name()].data.data_points
        assert tuple(point.bucket_counts) == buckets_of(VALUES).counts
        assert point.count == len(VALUES) and point.sum == sum(VALUES)
        # Nothing is left for export() to replay.
        assert emitter.flush(5)
        (point,) = points(reader)[DURATION.full_name()].data.data_points
        assert point.count == len(VALUES)
    finally:
        emitter.close(2)
