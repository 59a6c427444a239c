"""13. One StatsD flush of a 5,000-DAG deployment into statsd_exporter: paced against unpaced.

What an API server worker with ``count_at = api_server`` and ``backend = statsd`` sends when every
series moved in one flush interval: 150,000 lines (5,000 DAGs x 10 tasks x 3 calls,
``benchmarks.scale``), counted once each on the product's own emitter and handed over by one
``flush()``, into a fresh statsd_exporter (the Airflow chart's pin, the exported mappings) on
127.0.0.1. Arms, one fresh exporter per trial, interleaved:

* **paced**: the default ``max_udp_rate``, statsd_exporter with ``--statsd.read-buffer`` at the
  size the docs recommend (``READ_BUFFER``, capped by the kernel's ``net.core.rmem_max``);
* **unpaced, one burst**: ``max_udp_rate = 0`` and every line formatted before the first is sent
  (``store_metrics.backends.line_backend.CHUNK`` raised past the flush's size): what every release
  before the pace sent, the same buffer;
* **paced, default buffer**: no ``--statsd.read-buffer``, to show what the buffer is for.

Each trial: the lines statsd_exporter counted once a marker sent after the flush was counted (it
reads its socket in order), its own and the kernel's drops, and how long the ``flush()`` took.
Then the task's side (``task_end``): the same 150,000 series flushed with the default
``flush_timeout`` as a task's end does, to show the pace stops at that bound: how long the call
took, what left by then, and that the rest arrived with the following background flushes
(``flush_interval`` 5 s here), each series once; and the same call unpaced, in one burst, as
the baseline of its duration.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path
from typing import TypedDict

from store_metrics.backends import line_backend
from store_metrics.catalogue import Outcome, Store, metric_for
from store_metrics.config.options import default
from store_metrics.counting.runtime import create_emitter
from store_metrics.emitter import AggregatingEmitter
from testbed.waiting import settle

from . import scale
from .common import log
from .scale_statsd import Exporter, ExporterCounts, rmem_max

#: The read buffer docs/how-it-works.md and docs/performance.md recommend for statsd_exporter.
READ_BUFFER = 4_194_304
DAGS, QUICK_DAGS = 5_000, 700
TRIALS, QUICK_TRIALS = 3, 1
MARKER = "store_metrics_bench.marker.flush_done"
#: The background flush interval after the task-end flush (the rest goes with these flushes).
TASK_END_INTERVAL = 5.0
#: The arms: (name, max_udp_rate or None for the default, read buffer or 0 for the kernel's default,
#: whether the flush goes as one burst, formatted whole first, as before the pace).
ARMS: tuple[tuple[str, int | None, int, bool], ...] = (
    ("paced", None, READ_BUFFER, False),
    ("unpaced, one burst", 0, READ_BUFFER, True),
    ("paced, default buffer", None, 0, False),
)


class Trial(TypedDict):
    arm: str
    rate: int
    read_buffer: int
    lines_sent: int
    flush_seconds: float
    flush_ok: bool
    counts: ExporterCounts


class TaskEnd(TypedDict):
    flush_timeout: float
    call_seconds: float  # how long the task's flush() call took
    burst_call_seconds: float  # the same call, unpaced and in one burst (as before): the baseline
    returned: bool  # what it returned (False: not everything left in time)
    lines_first: int  # lines counted by the exporter after that call
    lines_total: int  # after the next flush
    lines_sent: int
    series_once: bool  # every series exactly once over the two flushes


class StatsdFlush(TypedDict):
    quick: bool
    dags: int
    series: int
    bytes_per_flush: int
    default_rate: int
    read_buffer: int  # the one asked for (the kernel caps it at rmem_max)
    rmem_max: int
    trials: list[Trial]
    task_end: TaskEnd
    load_average: list[float]


def _counted_emitter(port: int, dags: int, rate: int | None, interval: float = 3600.0) -> AggregatingEmitter:
    extra = {} if rate is None else {"max_udp_rate": rate}
    emitter = create_emitter(
        "statsd",
        host="127.0.0.1",
        port=port,
        prefix=scale.PREFIX,
        max_series=dags * scale.SERIES_PER_DAG + 1,
        flush_interval=interval,
        **extra,
    )
    metrics = [metric_for(Store.TASK, Outcome(outcome)) for outcome in scale.OUTCOMES]
    for dag in range(dags):
        for task in range(scale.TASKS):
            tags = scale.tags(dag, task)
            for metric in metrics:
                emitter.counter(metric, tags).add(1)
    return emitter


def _after_marker(exporter: Exporter) -> tuple[ExporterCounts, str]:
    """The exporter's counts and text once it has counted a marker sent now (so everything sent
    before it that reached its socket); the marker's own line taken off."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(f"{MARKER}:1|c".encode(), ("127.0.0.1", exporter.udp))
    deadline = time.monotonic() + 120
    while "store_metrics_bench_marker_flush_done" not in (text := exporter.text()):
        if time.monotonic() > deadline:
            raise RuntimeError("statsd_exporter did not count the marker within 120 s")
        time.sleep(0.5)
    counts = exporter.counts()
    counts["lines"] -= 1
    counts["udp_packets"] -= 1
    return counts, text


def trial(
    mappings: Path, logs: Path, dags: int, *, arm: str, rate: int | None, buffer: int, burst: bool
) -> Trial:
    name = arm.replace(" ", "").replace(",", "")
    with Exporter("chart", mappings, logs / f"flush-{name}-{buffer}.log", buffer) as exporter:
        emitter = _counted_emitter(exporter.udp, dags, rate)
        chunk = line_backend.CHUNK
        line_backend.CHUNK = 10**9 if burst else chunk
        try:
            started = time.perf_counter()
            ok = emitter.flush(120.0)
            seconds = time.perf_counter() - started
        finally:
            line_backend.CHUNK = chunk
            emitter.close(5.0)
        counts, _ = _after_marker(exporter)
    return Trial(
        arm=arm,
        rate=default("max_udp_rate") if rate is None else rate,
        read_buffer=buffer,
        lines_sent=dags * scale.SERIES_PER_DAG,
        flush_seconds=round(seconds, 3),
        flush_ok=ok,
        counts=counts,
    )


def task_end(mappings: Path, logs: Path, dags: int) -> TaskEnd:
    """The same flush made as a task's end makes it (``flush()`` with the default ``flush_timeout``),
    then the next one."""
    timeout = float(default("flush_timeout"))
    with Exporter("chart", mappings, logs / "flush-task-end-burst.log", READ_BUFFER) as exporter:
        emitter = _counted_emitter(exporter.udp, dags, 0)
        chunk, line_backend.CHUNK = line_backend.CHUNK, 10**9
        try:
            started = time.perf_counter()
            emitter.flush(timeout)
            burst_seconds = time.perf_counter() - started
        finally:
            line_backend.CHUNK = chunk
            emitter.close(5.0)
    with Exporter("chart", mappings, logs / "flush-task-end.log", READ_BUFFER) as exporter:
        emitter = _counted_emitter(exporter.udp, dags, None, interval=TASK_END_INTERVAL)
        try:
            started = time.perf_counter()
            returned = emitter.flush(timeout)
            seconds = time.perf_counter() - started
            first = exporter.counts()
            # The background flushes send the rest: wait until nothing more arrives (bounded).
            settle(lambda: exporter.counts()["lines"], quiet=TASK_END_INTERVAL + 2, timeout=180.0)
        finally:
            emitter.close(5.0)
        total, text = _after_marker(exporter)
    values = [
        v for labels, v in scale.samples(text, "airflow_task_state_store_write_total").items() if labels
    ]
    return TaskEnd(
        flush_timeout=timeout,
        call_seconds=round(seconds, 3),
        burst_call_seconds=round(burst_seconds, 3),
        returned=returned,
        lines_first=first["lines"],
        lines_total=total["lines"],
        lines_sent=dags * scale.SERIES_PER_DAG,
        series_once=len(values) == dags * scale.TASKS and set(values) == {1.0},
    )


def run(quick: bool) -> StatsdFlush:
    dags = QUICK_DAGS if quick else DAGS
    trials = QUICK_TRIALS if quick else TRIALS
    lines = scale.lines(range(dags))
    with tempfile.TemporaryDirectory(prefix="bench-statsd-flush-") as tmp:
        work = Path(tmp)
        mappings = scale.exported(work / "export") / "statsd-mapping.yml"
        measured: list[Trial] = []
        for n in range(trials):
            for arm, rate, buffer, burst in ARMS:
                t = trial(mappings, work, dags, arm=arm, rate=rate, buffer=buffer, burst=burst)
                log(
                    f"  statsd_flush: {arm} #{n + 1}: {t['counts']['lines']:,} of {t['lines_sent']:,} lines, "
                    f"flush {t['flush_seconds']:.2f} s"
                )
                measured.append(t)
        end = task_end(mappings, work, dags)
        log(f"  statsd_flush: task end: {end['call_seconds']:.2f} s, {end['lines_first']:,} lines, then all")
    return StatsdFlush(
        quick=quick,
        dags=dags,
        series=dags * scale.SERIES_PER_DAG,
        bytes_per_flush=sum(len(line.text) + 1 for line in lines),
        default_rate=default("max_udp_rate"),
        read_buffer=READ_BUFFER,
        rmem_max=rmem_max(),
        trials=measured,
        task_end=end,
        load_average=list(os.getloadavg()),
    )


def lost(t: Trial) -> int:
    """Lines one trial's flush sent that statsd_exporter never counted."""
    return t["lines_sent"] - t["counts"]["lines"]


def of_arm(r: StatsdFlush, arm: str) -> list[Trial]:
    return [t for t in r["trials"] if t["arm"] == arm]


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run("--quick" in sys.argv), indent=1))
