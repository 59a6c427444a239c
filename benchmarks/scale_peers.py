"""11. Scale through the real peers: statsd_exporter, then Prometheus 3 and the exported rules.

A deployment of 500 to 5,000 DAGs x 10 tasks x 3 calls (``benchmarks.scale``), through what
Airflow's Helm chart deploys and what reads it:

* statsd_exporter at the chart's pinned version with the exported mappings, fed the deployment's
  exact StatsD lines over UDP at a bounded rate, growing DAG range by DAG range
  (``benchmarks.scale_statsd.grow``), and one flush of every series from the product's emitter
  into a fresh exporter, with and without a larger socket buffer (``benchmarks.scale_statsd.burst``);
* Prometheus 3 (newest pin) scraping that exporter's output at each size with the exported rules,
  the rules' hour filled first (``benchmarks.scale_prometheus``).

``--quick``: 20 and 50 DAGs, rules exported with ``rule_interval=5s`` so the evaluations come
quickly (a smoke run; its figures are not the shipped rules' cost).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TypedDict

from testbed.peers import pin_for

from . import scale, scale_prometheus, scale_statsd
from .common import log
from .scale_prometheus import Evaluated
from .scale_statsd import Burst, Exporter, Paced


class ScalePeers(TypedDict):
    quick: bool
    sizes: list[int]
    tasks: int
    outcomes: list[str]
    statsd_exporter: str
    prometheus: str
    rate: float
    datagram: int
    rmem_default: int
    rmem_max: int
    exporter_idle_rss: int
    paced: list[Paced]
    paced_repeat: list[Paced]  # the same feed to a second fresh exporter: the run's own spread
    bursts: list[Burst]
    evaluated: list[Evaluated]
    evaluated_load: list[float]  # the 1-min load average as each size's evaluations were read
    rule_interval_s: float
    load_average: list[float]


def _exporter_part(
    collector: Path, work: Path, sizes: tuple[int, ...]
) -> tuple[int, list[Paced], list[Paced], dict[int, str], list[Burst]]:
    with Exporter("chart", collector / "statsd-mapping.yml", work / "exporter.log") as exporter:
        idle = scale.rss_of(exporter.pid)
        paced, bodies = scale_statsd.grow(exporter, sizes)
    with Exporter("chart", collector / "statsd-mapping.yml", work / "exporter-2.log") as exporter:
        repeat, _ = scale_statsd.grow(exporter, sizes)
    for entry in paced:
        counts = entry["counts"]
        log(
            f"  scale: paced {entry['dags']:,} DAGs: {counts['lines']:,} of {entry['lines_sent']:,} lines, "
            f"RSS {entry['rss'] / 2**20:.0f} MiB, /metrics {entry['metrics_bytes'] / 2**20:.1f} MiB"
        )
    bursts = []
    for dags in sizes:
        for buffer in (0, scale_statsd.rmem_max()):
            burst = scale_statsd.burst(collector / "statsd-mapping.yml", work, dags, buffer)
            log(
                f"  scale: one flush of {dags:,} DAGs, read buffer {buffer or 'default'}: "
                f"{burst['counts']['lines']:,} of {burst['lines_sent']:,} lines"
            )
            bursts.append(burst)
    return idle, paced, repeat, bodies, bursts


def run(quick: bool) -> ScalePeers:
    sizes = scale.QUICK_SIZES if quick else scale.SIZES
    interval = 5.0 if quick else 60.0
    with tempfile.TemporaryDirectory(prefix="store-metrics-bench-scale-") as tmp:
        work = Path(tmp)
        settings = {"rule_interval": "5s"} if quick else {}
        collector = scale.exported(work / "export", **settings)
        log(f"  scale: statsd_exporter, {', '.join(f'{s:,}' for s in sizes)} DAGs")
        idle, paced, repeat, bodies, bursts = _exporter_part(collector, work, sizes)
        evaluated, loads = [], []
        for dags in sizes:
            log(f"  scale: Prometheus 3 over {dags * scale.SERIES_PER_DAG:,} series: filling the rules' hour")
            result = scale_prometheus.evaluate(collector, bodies[dags], dags, work, interval)
            recording = result["durations"].get(scale_prometheus.RECORDING_GROUP)
            log(
                f"  scale: {dags:,} DAGs: recording group {recording} s, "
                f"{result['samples_in_window']} samples in the window, head {result['head_series']:,} series"
            )
            evaluated.append(result)
            loads.append(round(os.getloadavg()[0], 2))
    return ScalePeers(
        quick=quick,
        sizes=list(sizes),
        tasks=scale.TASKS,
        outcomes=list(scale.OUTCOMES),
        statsd_exporter=pin_for("statsd_exporter", "chart").version,
        prometheus=pin_for("prometheus", "newest").version,
        rate=scale_statsd.RATE,
        datagram=scale_statsd.DATAGRAM,
        rmem_default=scale_statsd.rmem_default(),
        rmem_max=scale_statsd.rmem_max(),
        exporter_idle_rss=idle,
        paced=paced,
        paced_repeat=repeat,
        bursts=bursts,
        evaluated=evaluated,
        evaluated_load=loads,
        rule_interval_s=interval,
        load_average=list(os.getloadavg()),
    )
