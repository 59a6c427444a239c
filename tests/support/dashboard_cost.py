"""What a Grafana dashboard's load costs Prometheus: the samples its queries read (``stats=all``).

Builds a Prometheus with a day of synthetic state store counters (``promtool tsdb create-blocks-from
openmetrics``) and, given rule files, their recorded series backfilled (``create-blocks-from
rules``), then runs every query of the panels a dashboard shows when it opens (collapsed rows are
not loaded) over its default range, as Grafana sends them, and sums Prometheus' own
``totalQueryableSamples``. The tests use it on a small data set; docs/alerts.md reports it for the
shipped dashboard and the previous one:

    PYTHONPATH=.:tests .venv/bin/python -m support.dashboard_cost \\
        --dashboard dashboards/store-metrics.json --rules collector/rules.yml
    git show <before>:dashboards/store-metrics.json > /tmp/before.json
    PYTHONPATH=.:tests .venv/bin/python -m support.dashboard_cost --dashboard /tmp/before.json
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store
from support.dashboard import interpolate
from support.prometheus import PrometheusServer

__all__ = ["Cost", "Data", "load_queries", "measure", "prometheus_with"]

#: Grafana's Prometheus data source default "scrape interval" ($__rate_interval's floor is 4 of it).
GRAFANA_SCRAPE_SECONDS = 15
#: Per task: the counters a resumable task and an asset-updating one touch (and one failing method).
_COUNTERS: tuple[tuple[Store, Outcome, str | None], ...] = (
    (Store.TASK, Outcome.READ_FOUND, None),
    (Store.TASK, Outcome.READ_ABSENT, None),
    (Store.TASK, Outcome.WRITE, None),
    (Store.TASK, Outcome.ERROR, "get"),
    (Store.ASSET, Outcome.READ_FOUND, None),
    (Store.ASSET, Outcome.WRITE, None),
)


@dataclass(frozen=True)
class Data:
    """The synthetic data set: ``dags`` x ``tasks`` tasks, each counter scraped every ``scrape`` s."""

    hours: float = 25
    dags: int = 20
    tasks: int = 5
    scrape: int = 60
    job: str = "airflow"

    @property
    def series(self) -> int:
        return self.dags * self.tasks * len(_COUNTERS)


def _openmetrics(data: Data, end: int) -> Iterator[str]:
    rng = random.Random(0)
    start = end - int(data.hours * 3600)
    for store, outcome, operation in _COUNTERS:
        name = catalogue.metric_for(store, outcome).prometheus_name()
        yield f"# TYPE {name.removesuffix('_total')} counter\n"
        for dag in range(data.dags):
            for task in range(data.tasks):
                labels = (
                    f'job="{data.job}",instance="x",dag_id="dag_{dag}",task_id="t{task}",run_type="scheduled"'
                )
                labels += ',operator="PythonOperator"' + (f',operation="{operation}"' if operation else "")
                value = 0
                for at in range(start, end + 1, data.scrape):
                    value += rng.randint(0, 3)
                    yield f"{name}{{{labels}}} {value} {at}\n"
    yield "# EOF\n"


def _promtool(*args: str) -> None:
    done = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def prometheus_with(tmp: Path, data: Data, rule_files: Sequence[Path] = ()) -> tuple[PrometheusServer, int]:
    """A Prometheus holding ``data`` (and the rules' recorded series over it), and the data's end."""
    end = int(time.time()) - 600
    source = tmp / "data.om"
    with source.open("w") as out:
        out.writelines(_openmetrics(data, end))
    tsdb = tmp / "tsdb"
    _promtool("tsdb", "create-blocks-from", "openmetrics", "--quiet", str(source), str(tsdb))
    source.unlink()
    config: dict[str, Any] = {"global": {"scrape_interval": f"{data.scrape}s"}, "scrape_configs": []}
    prom = PrometheusServer(tmp, config, "--storage.tsdb.retention.time=30d")
    if not rule_files:
        return prom, end
    recorded = tmp / "recorded"
    start = end - int(data.hours * 3600)
    _promtool(
        "tsdb", "create-blocks-from", "rules", "--quiet", f"--url={prom.url}", f"--start={start}",
        f"--end={end}", f"--output-dir={recorded}", *map(str, rule_files),
    )  # fmt: skip
    prom.stop()
    for block in recorded.iterdir():
        shutil.move(str(block), tsdb / block.name)
    return PrometheusServer(tmp, config, "--storage.tsdb.retention.time=30d"), end


@dataclass(frozen=True)
class Query:
    panel: str
    ref: str
    expr: str
    instant: bool


def load_queries(dashboard: dict[str, Any], collapsed: bool = False) -> list[Query]:
    """The queries Grafana runs when the dashboard opens: every panel outside the collapsed rows (and
    with ``collapsed``, those inside them too)."""
    panels = [p for row in dashboard["panels"] for p in (row, *(row.get("panels", []) if collapsed else []))]
    return [
        Query(panel["title"], target["refId"], target["expr"], bool(target.get("instant")))
        for panel in panels
        if panel["type"] != "row"
        for target in panel.get("targets", [])
    ]


@dataclass(frozen=True)
class Cost:
    query: Query
    samples: int
    series: int


def _range_seconds(dashboard: dict[str, Any]) -> int:
    start = dashboard["time"]["from"]
    assert start.startswith("now-") and start.endswith("h"), start
    return int(start[4:-1]) * 3600


def measure(
    prom: PrometheusServer, dashboard: dict[str, Any], end: int, step: int = 120, collapsed: bool = False
) -> list[Cost]:
    """Every load query (with ``collapsed``, every query) over the dashboard's default range ending at
    ``end``, ``step`` s per point, as Grafana sends it (All filters, no cluster label, job airflow)."""
    rng = _range_seconds(dashboard)
    rate_interval = max(step + GRAFANA_SCRAPE_SECONDS, 4 * GRAFANA_SCRAPE_SECONDS)
    costs = []
    for query in load_queries(dashboard, collapsed):
        expr = interpolate(
            query.expr, {}, interval=f"{step}s", rate_interval=f"{rate_interval}s", rng=f"{rng}s"
        )
        if query.instant:
            data = prom.api("query", query=expr, time=end, stats="all")
        else:
            data = prom.api("query_range", query=expr, start=end - rng, end=end, step=step, stats="all")
        samples = int(data["stats"]["samples"]["totalQueryableSamples"])
        costs.append(Cost(query, samples, len(data["result"])))
    return costs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Samples a dashboard's load reads, from Prometheus' stats.")
    parser.add_argument("--dashboard", type=Path, required=True)
    parser.add_argument("--rules", type=Path, nargs="*", default=[], help="rule files to backfill")
    parser.add_argument("--hours", type=float, default=25)
    parser.add_argument("--dags", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--scrape", type=int, default=60)
    parser.add_argument("--work", type=Path, default=Path("/tmp/store-metrics-dashboard-cost"))
    args = parser.parse_args(argv)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    data = Data(args.hours, args.dags, args.tasks, args.scrape)
    prom, end = prometheus_with(args.work, data, args.rules)
    try:
        costs = measure(prom, json.loads(args.dashboard.read_text()), end)
    finally:
        prom.stop()
    for cost in sorted(costs, key=lambda c: -c.samples):
        print(f"{cost.samples:>12,} {cost.query.panel} [{cost.query.ref}]")
    total = sum(c.samples for c in costs)
    setup = f"{data.series} raw series, {data.hours} h, scrape {data.scrape} s"
    print(f"{total:>12,} samples, {len(costs)} queries, {setup}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
