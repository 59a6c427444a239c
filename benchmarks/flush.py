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
from typing import Any

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


def run(quick: bool) -> dict[str, Any]:
    from store_metrics.catalogue import Outcome, Store, metric_for

    tag_sets = 200 if quick else SERIES_TAG_SETS
    reps = 2 if quick else 7
    outcomes = (Outcome.READ_FOUND, Outcome.READ_ABSENT, Outcome.WRITE, Outcome.DELETE, Outcome.CLEAR)
    sink = UdpSink()
    out: dict[str, Any] = {"series": tag_sets * len(outcomes), "reps": reps, "backends": {}}
    try:
        for backend in BACKENDS:
            log(f"  flush: {backend}")
            # A long interval: only the explicit flushes below export.
            setup = BackendSetup(backend, sink, flush_interval=3600.0, flush_timeout=60.0)
            try:
                counters = [
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
                        raise RuntimeError(f"flush on {backend} did not finish")
                    if backend in ("statsd", "dogstatsd", "airflow"):
                        got = sink.wait_for_lines(expected)
                    elif backend == "otel":
                        got = _points(setup.reader)
                    else:
                        got = 0
                    if rep:  # the first flush also opened things; not timed
                        times.append(elapsed)
                        delivered.append(got)
                out["backends"][backend] = {
                    "median_ms": median(times) * 1000,
                    "max_ms": max(times) * 1000,
                    "per_series_us": median(times) * 1e6 / expected,
                    "delivered": min(delivered),
                    "expected": expected if backend != "none" else 0,
                    "series_held": setup.emitter.series_count,
                }
            finally:
                setup.close()
    finally:
        sink.close()
    return out
