"""3c. Exporting one histogram series: replayed at flush (the old way) vs recorded live (the new way).

One series of ``api_server.state_store.request.duration`` with 10 and 100,000 observations
spread over every bucket, per backend, each repetition on a fresh backend:

* **replay** (baseline): the caller's thread only counts into the emitter's buckets (measured
  on an emitter with backend ``none``); at flush the backend gets a ``HistogramDelta`` and makes
  one call per observation (OTel ``Histogram.record``, Airflow ``stats.timing``), as the old
  ``otel.py`` export did. Also measured: how late a 1 ms ticker on an event loop wakes up while
  that replay runs on another thread (the emitter's worker, in an API server).
* **live**: ``record_histogram`` per observation on the caller's thread (the emitter keeps its
  cumulative bucket count too, the replay column's cost); at flush nothing is left to replay.

"flush" is ``export()`` plus, for OTel, one collection by an ``InMemoryMetricReader``; Airflow's
path is its StatsD logger (InfluxDB tags) to a UDP sink in another process, whose received
lines are counted. Ratios are against the replay baseline of the same run and process.
"""

from __future__ import annotations

import asyncio
import threading
import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any, TypedDict

from .common import UdpSink, airflow_stats_factory, log, median, otel_in_memory_provider

COUNTS: tuple[int, ...] = (10, 100_000)
QUICK_COUNTS: tuple[int, ...] = (10, 2_000)
TAGS = {"store": "task", "operation": "get", "status_class": "2xx", "value_size": "le_1KiB", "worker": "h-1"}


class _NoTotals:
    def totals(self, metric: Any) -> list[Any]:
        return []


def _values(n: int) -> list[float]:
    from store_metrics.catalogue import SERVER_DURATION

    bounds = SERVER_DURATION.buckets
    return [bounds[i % len(bounds)] * 0.9 for i in range(n)]


def _delta(values: list[float]) -> Any:
    from store_metrics.catalogue import SERVER_DURATION
    from store_metrics.deltas import Buckets, HistogramDelta
    from store_metrics.naming import normalize_tags

    bounds = SERVER_DURATION.buckets
    counts, sums = [0] * (len(bounds) + 1), [0.0] * (len(bounds) + 1)
    for value in values:
        i = bisect_left(bounds, value)
        counts[i] += 1
        sums[i] += value
    return HistogramDelta(SERVER_DURATION, normalize_tags(TAGS), Buckets(bounds, tuple(counts), tuple(sums)))


def _otel() -> tuple[Any, Callable[[], Any]]:
    from store_metrics.backends import otel

    provider, reader = otel_in_memory_provider()
    backend = otel.create(meter_provider=provider)
    backend.open(_NoTotals())
    return backend, reader.get_metrics_data


def _airflow() -> tuple[Any, Callable[[], Any]]:
    from store_metrics.backends import airflow_stats

    backend = airflow_stats.create()
    backend.open(_NoTotals())
    return backend, lambda: None  # every stats call has sent its datagram already


def _caller_bucket_ns(values: list[float]) -> float:
    """The old way's cost on the caller's thread: the emitter's in-memory bucket count."""
    from store_metrics.catalogue import SERVER_DURATION
    from store_metrics.counting.runtime import create_emitter

    emitter = create_emitter("none", flush_interval=3600)
    try:
        histogram = emitter.histogram(SERVER_DURATION, TAGS)
        t0 = time.perf_counter()
        for value in values:
            histogram.record(value)
        return (time.perf_counter() - t0) * 1e9 / len(values)
    finally:
        emitter.close(2)


def _one(
    make: Callable[[], tuple[Any, Callable[[], Any]]], values: list[float], live: bool
) -> tuple[float, float]:
    """(caller ns per observation, flush ms) on a fresh backend."""
    from store_metrics.catalogue import SERVER_DURATION
    from store_metrics.naming import normalize_tags

    backend, collect = make()
    caller_ns, deltas = 0.0, [_delta(values)]
    if live:
        tags, record = normalize_tags(TAGS), backend.record_histogram
        t0 = time.perf_counter()
        for value in values:
            record(SERVER_DURATION, tags, value)
        caller_ns, deltas = (time.perf_counter() - t0) * 1e9 / len(values), []
    t0 = time.perf_counter()
    backend.export(deltas)
    collect()
    return caller_ns, (time.perf_counter() - t0) * 1000


def _lateness_ms(work: Callable[[], None]) -> tuple[float, float]:
    """(longest, median) lateness of a 1 ms ticker on an event loop while ``work`` runs on a thread."""

    async def tick() -> list[float]:
        done = threading.Event()

        def replay() -> None:
            work()
            done.set()

        thread = threading.Thread(target=replay, name="bench-replay")
        late: list[float] = []
        thread.start()
        while not done.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            late.append((time.perf_counter() - t0 - 0.001) * 1000)
        thread.join()
        return late

    late = asyncio.run(tick())
    return max(late), median(late)


class HistogramRow(TypedDict):
    backend: str
    observations: int
    replay_caller_ns: float  # per observation, on the caller's thread
    live_caller_ns: float
    replay_flush_ms: float
    live_flush_ms: float
    replay_late_ms: list[float]  # [max, median] lateness of a 1 ms ticker during the replay; [] if not run
    replay_received: int | None  # UDP lines received (Airflow's path), None for OTel
    live_received: int | None


class HistogramExport(TypedDict):
    reps: int
    airflow_path: str
    rows: list[HistogramRow]


Make = Callable[[], tuple[Any, Callable[[], Any]]]


def _way(
    make: Make, values: list[float], live: bool, reps: int, sink: UdpSink | None
) -> tuple[float, float, int | None]:
    """(caller ns, flush ms, UDP lines received) of one way, medians over fresh backends."""
    measured, received = [], []
    for _ in range(reps):
        if sink:
            sink.reset()
        measured.append(_one(make, values, live=live))
        if sink:
            received.append(sink.wait_for_lines(len(values), timeout=10))
    caller = median(c for c, _ in measured)
    return caller, median(f for _, f in measured), min(received) if received else None


def _replay_lateness(make: Make, values: list[float]) -> list[float]:
    backend, collect = make()
    deltas = [_delta(values)]

    def replay() -> None:
        backend.export(deltas)
        collect()

    return list(_lateness_ms(replay))


def _row(name: str, make: Make, n: int, reps: int, sink: UdpSink | None, *, largest: bool) -> HistogramRow:
    log(f"  histogram_export: {name}, {n:,} observations")
    values = _values(n)
    replay_caller = median(_caller_bucket_ns(values) for _ in range(reps))
    _, replay_flush, replay_received = _way(make, values, False, reps, sink)
    live_caller, live_flush, live_received = _way(make, values, True, reps, sink)
    return HistogramRow(
        backend=name,
        observations=n,
        replay_caller_ns=replay_caller,
        live_caller_ns=live_caller,
        replay_flush_ms=replay_flush,
        live_flush_ms=live_flush,
        replay_late_ms=_replay_lateness(make, values) if largest else [],
        replay_received=replay_received,
        live_received=live_received,
    )


def run(quick: bool) -> HistogramExport:
    from airflow.sdk.observability import stats

    counts = QUICK_COUNTS if quick else COUNTS
    reps = 1 if quick else 3
    sink = UdpSink()
    rows = []
    try:
        factory, airflow_path = airflow_stats_factory("airflow", sink.port)
        stats.initialize(factory=factory, export_legacy_names=True)
        for name, make in (("otel", _otel), ("airflow", _airflow)):
            for n in counts:
                sink_if_airflow = sink if name == "airflow" else None
                rows.append(_row(name, make, n, reps, sink_if_airflow, largest=n == max(counts)))
    finally:
        sink.close()
    return HistogramExport(reps=reps, airflow_path=airflow_path, rows=rows)
