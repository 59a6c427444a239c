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

    python -m benchmarks.histogram_export [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from .common import UdpSink, airflow_stats_factory, log, md_table, median, otel_in_memory_provider

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
    from store_metrics.wire import normalize_tags

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
    from store_metrics.runtime import create_emitter

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
    from store_metrics.wire import normalize_tags

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
        thread = threading.Thread(target=lambda: (work(), done.set()), name="bench-replay")
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


def run(quick: bool) -> dict[str, Any]:
    from airflow.sdk.observability import stats

    counts = QUICK_COUNTS if quick else COUNTS
    reps = 1 if quick else 3
    sink = UdpSink()
    out: dict[str, Any] = {"reps": reps, "rows": []}
    try:
        factory, out["airflow_path"] = airflow_stats_factory("airflow", sink.port)
        stats.initialize(factory=factory, export_legacy_names=True)
        for name, make in (("otel", _otel), ("airflow", _airflow)):
            for n in counts:
                log(f"  histogram_export: {name}, {n:,} observations")
                values = _values(n)
                row: dict[str, Any] = {"backend": name, "observations": n}
                row["replay_caller_ns"] = median(_caller_bucket_ns(values) for _ in range(reps))
                for way in ("replay", "live"):
                    measured, received = [], []
                    for _ in range(reps):
                        sink.reset()
                        measured.append(_one(make, values, live=way == "live"))
                        if name == "airflow":
                            received.append(sink.wait_for_lines(n, timeout=10))
                    if way == "live":
                        row["live_caller_ns"] = median(c for c, _ in measured)
                    row[f"{way}_flush_ms"] = median(f for _, f in measured)
                    if received:
                        row[f"{way}_received"] = min(received)
                if n == max(counts):
                    backend, collect = make()
                    deltas = [_delta(values)]

                    def replay(backend: Any = backend, deltas: Any = deltas, collect: Any = collect) -> None:
                        backend.export(deltas)
                        collect()

                    row["replay_late_ms"] = _lateness_ms(replay)
                out["rows"].append(row)
    finally:
        sink.close()
    return out


def _ratio(x: float) -> str:
    return f"{x:.2f}x" if x >= 0.01 else f"1/{1 / x:,.0f}"


def render(result: dict[str, Any]) -> str:
    rows = []
    for r in result["rows"]:
        late = r.get("replay_late_ms")
        rows.append(
            [
                r["backend"],
                f"{r['observations']:,}",
                f"{r['replay_caller_ns']:,.0f}",
                f"{r['live_caller_ns']:,.0f}",
                _ratio(r["live_caller_ns"] / r["replay_caller_ns"]),
                f"{r['replay_flush_ms']:.3f}",
                f"{r['live_flush_ms']:.3f}",
                _ratio(r["live_flush_ms"] / r["replay_flush_ms"]),
                f"{late[0]:.1f} / {late[1]:.2f}" if late else "",
                f"{r['replay_received']:,} / {r['live_received']:,}" if "live_received" in r else "",
            ]
        )
    header = [
        "backend",
        "observations",
        "replay: caller ns/obs",
        "live: caller ns/obs",
        "caller ratio",
        "replay: flush ms",
        "live: flush ms",
        "flush ratio",
        "loop late during replay, max / median ms",
        "UDP lines received, replay / live",
    ]
    return (
        "### Exporting one histogram series\n\n"
        f"Median of {result['reps']} fresh backends each; Airflow's path: {result['airflow_path']}.\n\n"
        + md_table(header, rows, "lr" + "r" * 8)
    )


def main() -> None:
    from .common import prepare_airflow_home

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    args = parser.parse_args()
    prepare_airflow_home()
    print(render(run(args.quick)))


if __name__ == "__main__":
    main()
