"""Histograms and max gauges: the in-memory series, the exact lines, and each backend end to end.

StatsD and DogStatsD lines go through a real UDP socket; what the receivers make of them is
computed with statsd_exporter's rule (``int(1/rate)`` events per sampled line:
``support.statsd_observations``, held equal to the real exporter in test_collector_inputs.py),
OpenTelemetry through the SDK and its Prometheus exporter, read back with an HTTP GET of the
exporter's ``/metrics`` parsed by prometheus_client (no Prometheus server runs here;
test_prometheus_e2e.py has one), Airflow's path through Airflow's own StatsD logger.
"""

from __future__ import annotations

import math
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from store_metrics import catalogue, deltas, naming
from store_metrics.backends import statsd_lines
from store_metrics.counting.runtime import create_emitter
from store_metrics.deltas import Buckets, GaugeValue
from store_metrics.emitter import GaugeSeries, HistogramSeries
from support.statsd_observations import exporter_buckets
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

DURATION = catalogue.SERVER_DURATION
STALL_MAX = catalogue.LOOP_STALL_MAX
TAGS = {"store": "task", "operation": "get", "status_class": "2xx", "value_size": "le_1KiB", "worker": "h-1"}
WIRE_TAGS = naming.normalize_tags(TAGS)
#: Observations chosen to hit bucket edges: on a bound, just above it, below the first, above the last.
VALUES = (0.5, 1.0, 1.000001, 2.5, 3.0, 4.0, 250.0, 20_000.0)


def recorded(values: tuple[float, ...] = VALUES) -> HistogramSeries:
    series = HistogramSeries(DURATION, WIRE_TAGS)
    for value in values:
        series.record(value)
    return series


def test_a_value_on_a_bound_is_in_that_bound_s_bucket_and_above_the_last_in_overflow() -> None:
    cumulative = recorded().cumulative()
    bounds = catalogue.DURATION_BUCKETS_MS
    assert cumulative.bounds == bounds and len(cumulative.counts) == len(bounds) + 1
    expected = [0] * (len(bounds) + 1)
    for index in (0, 0, 1, 1, 2, 2, bounds.index(250), len(bounds)):
        expected[index] += 1
    assert list(cumulative.counts) == expected
    assert cumulative.observations == len(VALUES) and cumulative.total == sum(VALUES)


def test_take_returns_what_was_observed_since_and_give_back_restores_it() -> None:
    series = recorded()
    delta = series.take()
    assert delta is not None and delta.buckets == series.cumulative()
    assert series.take() is None  # nothing new
    series.give_back(delta)  # the export failed
    again = series.take()
    assert again is not None and again.buckets == delta.buckets
    series.record(7.0)
    (only,) = [n for n in series.take().buckets.counts if n]  # type: ignore[union-attr]
    assert only == 1 and series.cumulative().observations == len(VALUES) + 1


def test_memory_per_histogram_series_is_fixed() -> None:
    series = recorded(())
    for i in range(100_000):
        series.record(float(i % 30_000))
    assert len(series.counts) == len(series.total_counts) == len(catalogue.DURATION_BUCKETS_MS) + 1
    assert series.cumulative().observations == 100_000


def test_gauge_keeps_the_largest_value_of_each_interval() -> None:
    gauge = GaugeSeries(STALL_MAX, (("worker", "h-1"),))
    assert gauge.take() is None
    for value in (0.2, 212.5, 3.0):
        gauge.observe(value)
    first = gauge.take()
    assert first is not None and first.value == 212.5
    gauge.observe(0.1)
    second = gauge.take()
    assert second is not None and second.value == 0.1  # a new interval starts from nothing
    gauge.give_back(GaugeValue(STALL_MAX, WIRE_TAGS, 9.0))
    gauge.observe(4.0)
    third = gauge.take()
    assert third is not None and third.value == 9.0


def test_the_emitter_refuses_the_wrong_kind() -> None:
    emitter = create_emitter("none", flush_interval=60)
    try:
        with pytest.raises(ValueError, match="is a histogram, not a counter"):
            emitter.counter(DURATION, TAGS)
        with pytest.raises(ValueError, match="is a counter, not a histogram"):
            emitter.histogram(catalogue.SERVER_REQUESTS, TAGS)
        assert emitter.histogram(DURATION, TAGS) is emitter.histogram(DURATION, dict(reversed(TAGS.items())))
    finally:
        emitter.close(1)


# -- the lines, to the byte ------------------------------------------------------------------------


BUCKETS = Buckets((1.0, 2.5, 5.0), (2, 3, 0, 1), (1.5, 6.0, 0.0, 12.25))


def test_dogstatsd_histogram_lines_exactly() -> None:
    assert statsd_lines.dogstatsd_histogram_lines(
        "airflow", "a.b", (("store", "task"), ("worker", "h-1")), BUCKETS
    ) == [
        "airflow.a.b:0.75|d|@0.5|#store:task,worker:h-1",
        "airflow.a.b:2|d|@0.3333333333333333|#store:task,worker:h-1",
        "airflow.a.b:12.25|d|#store:task,worker:h-1",
    ]


def test_influx_histogram_lines_exactly() -> None:
    assert statsd_lines.influx_histogram_lines(
        "airflow", "a.b", (("store", "task"), ("worker", "h-1")), BUCKETS
    ) == [
        "airflow.a.b,store=task,worker=h-1:0.75|h|@0.5",
        "airflow.a.b,store=task,worker=h-1:2|h|@0.3333333333333333",
        "airflow.a.b,store=task,worker=h-1:12.25|h",
    ]


def test_gauge_lines_exactly() -> None:
    tags = (("worker", "h-1"),)
    assert (
        statsd_lines.dogstatsd_gauge_line("airflow", "x.max", tags, 212.5)
        == "airflow.x.max:212.5|g|#worker:h-1"
    )
    assert (
        statsd_lines.influx_gauge_line("airflow", "x.max", tags, 212.5) == "airflow.x.max,worker=h-1:212.5|g"
    )
    assert statsd_lines.dogstatsd_gauge_line("", "x", (), 3.0) == "x:3|g"


def test_numbers_are_sent_exactly() -> None:
    assert [statsd_lines.format_value(v) for v in (0.0, 3.0, 688_909.0, 0.1, 1e-05, 1 / 3)] == [
        "0",
        "3",
        "688909",
        "0.1",
        "1e-05",
        "0.3333333333333333",
    ]
    for value in (0.1, 1 / 3, 2.5000000000000004, 123456.789):
        assert float(statsd_lines.format_value(value)) == value


def test_every_sample_rate_counts_back_to_its_observations() -> None:
    """statsd_exporter takes int(1/rate) events, the Collector uint64(1/rate): both must give n."""
    for n in [*range(1, 200_001), 10**6, 10**7 + 3, 2**31 - 1]:
        rate = float(statsd_lines.sample_rate(n))
        assert math.floor(1 / rate) == n, n
    with pytest.raises(ValueError, match="n must be >= 1"):
        statsd_lines.sample_rate(0)


def test_a_bucket_s_mean_stays_inside_the_bucket() -> None:
    # Three values exactly on the upper bound, whose float sum / 3 might round above it.
    for bound in (0.1, 2.5, 1e-3, 1 / 3):
        buckets = Buckets((bound,), (3, 0), (bound + bound + bound, 0.0))
        assert deltas.bucket_mean(buckets, 0) <= bound
    above = Buckets((1.0,), (0, 2), (0.0, 2.0 + 1e-16))
    assert deltas.bucket_mean(above, 1) > 1.0


def test_datagrams_are_packed_up_to_the_limit() -> None:
    def carried(text: str) -> statsd_lines.Line:
        return statsd_lines.Line(text, GaugeValue(STALL_MAX, (("worker", text[0]),), 1.0))

    def payloads(lines: list[str], size: int, end: bytes = b"") -> list[bytes]:
        return [d.payload for d in statsd_lines.pack_lines([carried(line) for line in lines], size, end)]

    lines = ["a" * 10, "b" * 10, "c" * 10]
    assert payloads(lines, 21) == [b"aaaaaaaaaa\nbbbbbbbbbb", b"cccccccccc"]
    assert payloads(lines, 20) == [b"aaaaaaaaaa", b"bbbbbbbbbb", b"cccccccccc"]
    assert payloads(["x" * 50], 20) == [b"x" * 50]  # a line is never split
    assert payloads([], 20) == []
    # A datagram's end counts against its size (DogStatsD ends each with a newline).
    assert payloads(lines, 22, b"\n") == [b"aaaaaaaaaa\nbbbbbbbbbb\n", b"cccccccccc\n"]
    assert payloads(lines, 21, b"\n") == [b"aaaaaaaaaa\n", b"bbbbbbbbbb\n", b"cccccccccc\n"]
    # Each datagram says what its lines carry, in order: what is kept if its send fails.
    packed = statsd_lines.pack_lines([carried(line) for line in lines], 21)
    assert [[dict(d.tags)["worker"] for d in datagram.carries] for datagram in packed] == [["a", "b"], ["c"]]


# -- what the receivers make of the lines ---------------------------------------------------------


@pytest.mark.parametrize("style", ["dogstatsd", "statsd"])
def test_a_receiver_sees_exactly_the_observations(style: str, udp_receiver: UdpReceiver) -> None:
    emitter = create_emitter(style, host="127.0.0.1", port=udp_receiver.port, flush_interval=60)
    try:
        histogram = emitter.histogram(DURATION, TAGS)
        values = [0.3 * i for i in range(1, 2_000)]  # spread over the buckets, many per bucket
        for value in values:
            histogram.record(value)
        emitter.gauge(STALL_MAX, {"worker": "h-1"}).observe(212.5)
        route = {k: v for k, v in TAGS.items() if k != "value_size"}
        emitter.counter(catalogue.SERVER_REQUESTS, {**route, "outcome": "read_found"}).add(3)
        assert emitter.flush(5)
        name = DURATION.full_name()
        wait_until(
            lambda: any(line.startswith("airflow.api_server.event_loop") for line in udp_receiver.lines())
        )
        wait_until(lambda: any("requests" in line for line in udp_receiver.lines()))
        lines = udp_receiver.lines()
        ours = [line for line in lines if line.startswith(name + (":" if style == "dogstatsd" else ","))]
        assert len(ours) == sum(1 for n in histogram.cumulative().counts if n) <= len(DURATION.buckets) + 1
        counts, total = exporter_buckets(ours, DURATION.buckets)
        assert counts == list(histogram.cumulative().counts)
        assert total == pytest.approx(sum(values), rel=1e-12)
        if style == "dogstatsd":
            assert all(
                line.endswith("|#" + ",".join(statsd_lines.dogstatsd_tag_list(WIRE_TAGS))) for line in ours
            )
            assert "airflow.api_server.event_loop.stall.max:212.5|g|#worker:h-1" in lines
            assert (
                "airflow.api_server.state_store.requests:3|c|#store:task,operation:get,status_class:2xx,"
                "outcome:read_found,worker:h-1" in lines
            )
        else:
            assert all(
                line.startswith(statsd_lines.influx_stat("airflow", DURATION.name, WIRE_TAGS) + ":")
                for line in ours
            )
            assert "airflow.api_server.event_loop.stall.max,worker=h-1:212.5|g" in lines
            assert (
                "airflow.api_server.state_store.requests,store=task,operation=get,status_class=2xx,"
                "outcome=read_found,worker=h-1:3|c" in lines
            )
        # A second flush sends only what is new.
        udp_receiver.clear()
        histogram.record(7.0)
        assert emitter.flush(5)
        wait_until(udp_receiver.lines)
        assert [line for line in udp_receiver.lines() if "duration" in line] == [
            (
                f"{name}:7|d|#" + ",".join(statsd_lines.dogstatsd_tag_list(WIRE_TAGS))
                if style == "dogstatsd"
                else statsd_lines.influx_stat("airflow", DURATION.name, WIRE_TAGS) + ":7|h"
            )
        ]
    finally:
        emitter.close(2)


# -- OpenTelemetry -----------------------------------------------------------------------------------


def test_otel_histograms_are_exact_cumulative_and_gauges_per_interval() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    emitter = create_emitter("otel", meter_provider=MeterProvider(metric_readers=[reader]), flush_interval=60)
    try:
        histogram = emitter.histogram(DURATION, TAGS)
        gauge = emitter.gauge(STALL_MAX, {"worker": "h-1"})
        for value in VALUES:
            histogram.record(value)
        gauge.observe(212.5)
        assert emitter.flush(5)
        histogram.record(3.0)
        gauge.observe(1.5)
        assert emitter.flush(5)
        data = reader.get_metrics_data()
        assert data is not None
        points = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        (point,) = points[DURATION.full_name()].data.data_points
        assert points[DURATION.full_name()].unit == "ms"
        assert dict(point.attributes) == TAGS
        assert tuple(point.explicit_bounds) == DURATION.buckets
        cumulative = histogram.cumulative()
        assert tuple(point.bucket_counts) == cumulative.counts  # both flushes: cumulative
        assert point.count == len(VALUES) + 1 and point.sum == pytest.approx(cumulative.total, rel=1e-12)
        (last,) = points[STALL_MAX.full_name()].data.data_points
        assert last.value == 1.5  # the largest of the last interval, not of all time
    finally:
        emitter.close(2)


def test_otel_prometheus_names_are_the_catalogue_s_and_each_worker_gets_a_port() -> None:
    port = free_port()
    emitters = [
        create_emitter(
            "otel",
            exporter="prometheus",
            prometheus_host="127.0.0.1",
            prometheus_port=port,
            prometheus_port_tries=4,
            temporality="cumulative",
            instance_id=f"h-{i}",
            flush_interval=60,
        )
        for i in (1, 2)
    ]
    try:
        for emitter in emitters:
            emitter.histogram(DURATION, TAGS).record(3.0)
            emitter.gauge(STALL_MAX, {"worker": "h-1"}).observe(12.0)
            emitter.counter(catalogue.SERVER_REQUESTS, {**TAGS, "outcome": "read_found"}).add(1)
            assert emitter.flush(5)
        ports = [e.backend.prometheus_port for e in emitters]  # type: ignore[attr-defined]
        assert ports[0] == port and ports[1] > port  # the second worker took the next free port

        def scrape(p: int) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=5) as response:
                return str(response.read().decode())

        for p in ports:
            names = {s.name for f in text_string_to_metric_families(scrape(p)) for s in f.samples}
            base = DURATION.prometheus_name()
            assert base == "airflow_api_server_state_store_request_duration_milliseconds"
            assert {f"{base}_bucket", f"{base}_sum", f"{base}_count"} <= names
            assert STALL_MAX.prometheus_name() in names
            assert catalogue.SERVER_REQUESTS.prometheus_name() in names
        text = scrape(ports[0])
        assert f"{DURATION.prometheus_name()}_bucket{{" in text and 'le="2.5"' in text
    finally:
        for emitter in emitters:
            emitter.close(2)
