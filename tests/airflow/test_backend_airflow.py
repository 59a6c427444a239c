"""The ``airflow`` adapter: the sums go through Airflow's own ``stats`` module.

Run in a fresh process with Airflow's ``[metrics]`` pointing its StatsD client (InfluxDB tags)
at a real UDP socket: one ``stats.incr(name, count=N, tags=...)`` per series per flush.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from support.airflow import run_with_airflow_statsd
from support.lines import parse_influx
from testbed.udp import UdpReceiver

_TASK = textwrap.dedent(
    """
    import store_metrics
    from store_metrics import catalogue
    emitter = store_metrics.configure("airflow", flush_interval=60)
    tags = catalogue.task_tags(dag_id="x\\nairflow.evil:1|c", task_id="t", run_type="manual", operator="X")
    for _ in range(3):
        emitter.counter(catalogue.get("task_state_store.write"), tags).add(1)
    emitter.counter(catalogue.get("task_state_store.read_absent"), tags).add(1)
    assert emitter.flush(10.0)
    print(emitter.backend.describe())
    """
)


def test_sums_go_through_airflows_statsd_client(udp_receiver: UdpReceiver, tmp_path: Path) -> None:
    pytest.importorskip("airflow.sdk.observability")
    printed = run_with_airflow_statsd(_TASK, tmp_path, udp_receiver.port)
    assert printed.strip().endswith("airflow: Airflow's StatsD client ([metrics] statsd_on)")

    # Airflow sends metrics of its own (e.g. serde timings) to the same socket.
    ours = udp_receiver.wait_for_lines(2, containing="state_store")
    # Airflow's StatsD client drops a tagged stat with any character beyond ASCII letters, digits,
    # _ . - (the value's percent-encoded newline, colon and bar included): those go as "_".
    tags = {"dag_id": "x_0Aairflow.evil_3A1_7Cc", "task_id": "t", "run_type": "manual", "operator": "X"}
    assert sorted(parse_influx(line) for line in ours) == [
        ("airflow.task_state_store.read_absent", tags, 1),
        ("airflow.task_state_store.write", tags, 3),
    ]


# -- histograms and gauges (the API server side) ------------------------------------------------

_SERVER = textwrap.dedent(
    """
    from store_metrics import catalogue
    from store_metrics.backends.airflow_stats import create
    from store_metrics.deltas import Buckets, GaugeValue, HistogramDelta

    class NoTotals:
        def totals(self, metric):
            return []

    duration = catalogue.SERVER_DURATION
    tags = (("store", "task"), ("worker", "h-1"))
    bounds = duration.buckets
    counts, sums = [0] * (len(bounds) + 1), [0.0] * (len(bounds) + 1)
    for value, i in ((3.0, 2), (4.0, 2), (700.0, bounds.index(1000.0))):
        assert bounds[i - 1] < value <= bounds[i]
        counts[i] += 1
        sums[i] += value
    backend = create()
    backend.open(NoTotals())
    # Observed before the backend was open in this process: pushed as a delta.
    backend.export([
        HistogramDelta(duration, tags, Buckets(bounds, tuple(counts), tuple(sums))),
        GaugeValue(catalogue.LOOP_STALL_MAX, (("worker", "h-1"),), 212.5),
    ])
    # Observed once it is open: live, as it happens.
    backend.record_histogram(duration, tags, 6.0)
    """
)


def test_histograms_go_live_through_stats_timing_and_pushed_ones_as_bucket_means(
    udp_receiver: UdpReceiver, tmp_path: Path
) -> None:
    pytest.importorskip("airflow.sdk.observability")
    run_with_airflow_statsd(_SERVER, tmp_path, udp_receiver.port)
    ours = udp_receiver.wait_for_lines(5, containing="api_server")
    stat = "airflow.api_server.state_store.request.duration,store=task,worker=h-1"
    assert sorted(ours) == sorted(
        [
            # Pushed: two observations in (2.5, 5] as their mean twice, so count and sum are exact.
            f"{stat}:3.500000|ms",
            f"{stat}:3.500000|ms",
            f"{stat}:700.000000|ms",
            "airflow.api_server.event_loop.stall.max,worker=h-1:212.5|g",
            # Live: the exact value.
            f"{stat}:6.000000|ms",
        ]
    )


class _FailingStats:
    """Stands in for Airflow's ``stats`` to make the ``fail_at``-th call raise (a client that breaks)."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.calls: list[tuple[str, str, float]] = []

    def _call(self, kind: str, name: str, value: float) -> None:
        if len(self.calls) + 1 == self.fail_at:
            raise OSError("send failed")
        self.calls.append((kind, name, value))

    def timing(self, name: str, value: float, *, tags: dict[str, str]) -> None:
        self._call("timing", name, value)

    def gauge(self, name: str, value: float, *, tags: dict[str, str]) -> None:
        self._call("gauge", name, value)

    def incr(self, name: str, *, count: int, tags: dict[str, str]) -> None:
        self._call("incr", name, count)


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4])
def test_an_export_that_fails_part_way_keeps_exactly_what_was_not_sent(
    monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    pytest.importorskip("airflow.sdk.observability")
    from store_metrics import catalogue
    from store_metrics.backends import airflow_stats
    from store_metrics.deltas import Buckets, CounterDelta, HistogramDelta
    from store_metrics.errors import PartialExport

    duration = catalogue.SERVER_DURATION
    bounds = duration.buckets
    counts, sums = [0] * (len(bounds) + 1), [0.0] * (len(bounds) + 1)
    counts[2], sums[2] = 3, 3.0 + 4.0 + 5.0  # three observations in (2.5, 5]
    histogram = HistogramDelta(duration, (("worker", "h-1"),), Buckets(bounds, tuple(counts), tuple(sums)))
    counter = CounterDelta(catalogue.SERVER_REQUESTS, (("worker", "h-1"),), 7)
    stats = _FailingStats(fail_at)
    monkeypatch.setattr(airflow_stats, "stats", stats)
    backend = airflow_stats.create()
    if fail_at == 1:
        with pytest.raises(OSError, match="send failed"):  # nothing was sent: the emitter keeps all
            backend.export([histogram, counter])
        assert stats.calls == []
        return
    with pytest.raises(PartialExport) as caught:
        backend.export([histogram, counter])
    sent = stats.calls
    unsent = caught.value.unsent
    assert "send failed" in caught.value.reason
    timings = [value for kind, _, value in sent if kind == "timing"]
    assert timings == [4.0] * min(fail_at - 1, 3)  # each bucket's observations as its mean
    if fail_at <= 3:  # the histogram broke off after fail_at - 1 of its 3 observations
        rest, rest_counter = unsent
        assert rest_counter == counter
        left = 3 - (fail_at - 1)
        assert rest.buckets.counts[2] == left and sum(rest.buckets.counts) == left
        assert rest.buckets.sums[2] == pytest.approx(4.0 * left)
        assert sum(rest.buckets.sums) == rest.buckets.sums[2]
        assert (rest.metric, rest.tags) == (histogram.metric, histogram.tags)
    else:  # the histogram went whole; the counter did not
        assert unsent == [counter]
        assert timings == [4.0, 4.0, 4.0]


# -- the API server's histograms and gauges -------------------------------------------------------

_AIRFLOW = textwrap.dedent(
    """
    from store_metrics import catalogue
    from store_metrics.counting.runtime import create_emitter
    emitter = create_emitter("airflow", flush_interval=60)
    assert emitter.flush(10.0)  # the worker has opened the backend: observations now go live
    histogram = emitter.histogram(catalogue.SERVER_DURATION, {"store": "task", "worker": "h-1"})
    for value in (3.0, 4.0, 700.0):
        histogram.record(value)
    emitter.gauge(catalogue.LOOP_STALL_MAX, {"worker": "h-1"}).observe(212.5)
    assert emitter.flush(10.0)
    """
)


def test_airflow_backend_uses_stats_timing_per_observation_and_stats_gauge(
    udp_receiver: UdpReceiver, tmp_path: Path
) -> None:
    run_with_airflow_statsd(_AIRFLOW, tmp_path, udp_receiver.port)
    ours = udp_receiver.wait_for_lines(4, containing="api_server")
    stat = "airflow.api_server.state_store.request.duration,store=task,worker=h-1"
    # Live: one stats.timing per observation as it happens, with its exact value (observations
    # made before the backend is open go as bucket means: the second test of this file).
    assert sorted(ours) == sorted(
        [
            f"{stat}:3.000000|ms",
            f"{stat}:4.000000|ms",
            f"{stat}:700.000000|ms",
            "airflow.api_server.event_loop.stall.max,worker=h-1:212.5|g",
        ]
    )


_UNICODE = textwrap.dedent(
    """
    import store_metrics
    from store_metrics import catalogue
    emitter = store_metrics.configure("airflow", flush_interval=60)
    tags = catalogue.task_tags(
        dag_id="données_2024", task_id="tâche", run_type="manual", operator="X", team_name="équipe-ü"
    )
    emitter.counter(catalogue.get("task_state_store.write"), tags).add(2)
    assert emitter.flush(10.0)
    """
)


def test_an_id_airflows_statsd_client_would_drop_still_arrives(
    udp_receiver: UdpReceiver, tmp_path: Path
) -> None:
    """Airflow's StatsD client refuses a tagged stat with a non-ASCII character (it logs an error and
    sends nothing): through backend = airflow the count arrives, its values (team_name's too) as Airflow
    takes them."""
    pytest.importorskip("airflow.sdk.observability")
    run_with_airflow_statsd(_UNICODE, tmp_path, udp_receiver.port)
    (line,) = udp_receiver.wait_for_lines(1, containing="state_store")
    tags = {
        "dag_id": "donn_es_2024",
        "task_id": "t_che",
        "run_type": "manual",
        "operator": "X",
        "team_name": "_quipe-_",
    }
    assert parse_influx(line) == ("airflow.task_state_store.write", tags, 2)
