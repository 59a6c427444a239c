"""3b. Cost of one flush of 10,000 series, per backend.

10,000 series = 2,000 tag sets (DAG x task) x the 5 task-store counters, each bumped once
before every flush, so every series has a delta to send. Timed: ``emitter.flush()`` from the
caller's side, i.e. the request to the worker thread, the whole export, and the wake-up. The
first flush (which opens the backend) is not timed. Checked after each timed flush, untimed:
the UDP sink received 10,000 lines (StatsD, DogStatsD, Airflow's StatsD logger), or the OTel
reader collected 10,000 data points.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from .common import BACKENDS, BackendSetup, UdpSink, log, median

SERIES_TAG_SETS = 2_000


def _points(reader: Any) -> int:
    data = reader.get_metrics_data()
    if data is None:
        return 0
    return sum(
        len(metric.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name.startswith("airflow.task_state_store.")
    )


class FlushFigures(TypedDict):
    median_ms: float
    max_ms: float
    per_series_us: float
    delivered: int  # the fewest lines or data points received after one flush
    expected: int  # 0: the backend sends nothing (none)


class Flush(TypedDict):
    series: int
    reps: int
    backends: dict[str, FlushFigures]


def _counters(setup: BackendSetup, tag_sets: int) -> list[Any]:
    from store_metrics.catalogue import Outcome, Store, metric_for

    outcomes = (Outcome.READ_FOUND, Outcome.READ_ABSENT, Outcome.WRITE, Outcome.DELETE, Outcome.CLEAR)
    return [
        setup.emitter.counter(
            metric_for(Store.TASK, outcome),
            {
                "dag_id": f"dag_{i // 20:03d}",
                "task_id": f"task_{i % 20:02d}",
                "run_type": "scheduled",
                "operator": "PythonOperator",
            },
        )
        for i in range(tag_sets)
        for outcome in outcomes
    ]


def _delivered(setup: BackendSetup, sink: UdpSink, expected: int) -> int:
    """What arrived after a flush: lines at the UDP sink, or data points the OTel reader collected."""
    if setup.backend in ("statsd", "dogstatsd", "airflow"):
        return sink.wait_for_lines(expected)
    if setup.backend == "otel":
        return _points(setup.reader)
    return 0


def _measure(setup: BackendSetup, sink: UdpSink, tag_sets: int, reps: int) -> FlushFigures:
    counters = _counters(setup, tag_sets)
    expected = len(counters)
    times: list[float] = []
    delivered: list[int] = []
    for rep in range(reps + 1):
        for c in counters:
            c.add(1)
        sink.reset()
        t0 = time.perf_counter()
        ok = setup.emitter.flush(timeout=60.0)
        elapsed = time.perf_counter() - t0
        if not ok:
            raise RuntimeError(f"flush on {setup.backend} did not finish")
        got = _delivered(setup, sink, expected)
        if rep:  # the first flush also opened things; not timed
            times.append(elapsed)
            delivered.append(got)
    return FlushFigures(
        median_ms=median(times) * 1000,
        max_ms=max(times) * 1000,
        per_series_us=median(times) * 1e6 / expected,
        delivered=min(delivered),
        expected=expected if setup.backend != "none" else 0,
    )


def run(quick: bool) -> Flush:
    tag_sets = 200 if quick else SERIES_TAG_SETS
    reps = 2 if quick else 7
    sink = UdpSink()
    backends: dict[str, FlushFigures] = {}
    try:
        for backend in BACKENDS:
            log(f"  flush: {backend}")
            # A long interval: only the explicit flushes below export.
            setup = BackendSetup(backend, sink, flush_interval=3600.0, flush_timeout=60.0)
            try:
                backends[backend] = _measure(setup, sink, tag_sets, reps)
            finally:
                setup.close()
    finally:
        sink.close()
    return Flush(series=tag_sets * 5, reps=reps, backends=backends)
