"""Two clusters under a global layer (VictoriaMetrics, Thanos): what the topology tests share.

Each cluster is its own statsd_exporter (the Airflow chart's pin, the exported mappings), fed
DogStatsD by a feeder (one pass of known calls on command), and its own scraper with a ``cluster``
external label, scraping it every second: a Prometheus 3 (the newest pin), or an agent (Prometheus
in agent mode, vmagent: tests/shipped/test_victoriametrics_restarts.py). A global layer reads every
cluster; the tests ask it the same questions: the calls recorded per cluster and summed over them,
and every task-side dashboard query as Grafana sends it for one cluster, against that cluster's own
Prometheus.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml

from support import e2e
from support.feeder import Feeder
from support.peer_servers import StatsdExporter
from support.prometheus import PrometheusServer

JOB = "store-metrics-statsd-exporter"
WAIT = 90.0
#: An instant query of the global layer: expression, instant (None: now) -> its vector's samples.
Query = Callable[[str, "float | None"], list[dict[str, Any]]]


@dataclass
class Cluster:
    name: str
    statsd: StatsdExporter
    feeder: Feeder
    prometheus: PrometheusServer


def fed_exporter(tmp: Path, exported: Path) -> tuple[StatsdExporter, Feeder]:
    """A cluster's statsd_exporter (the chart's pin, the exported mappings) and its feeder."""
    mappings = yaml.safe_load((exported / "collector" / "statsd-mapping.yml").read_text())["mappings"]
    statsd = StatsdExporter(tmp, "chart", mappings)
    return statsd, Feeder(statsd.udp_port, tmp, dogstatsd=True)


def scraping(name: str, exported: Path, statsd: StatsdExporter) -> dict[str, Any]:
    """The exported job scraping ``statsd`` every second, with the external label ``cluster``: the
    scrape configuration a cluster's Prometheus, Prometheus agent or vmagent is given."""
    base = yaml.safe_load((exported / "collector" / "prometheus.yml").read_text())
    (scrape,) = [j for j in base["scrape_configs"] if j["job_name"] == JOB]
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "external_labels": {"cluster": name}},
        "scrape_configs": [{**scrape, "static_configs": [{"targets": [statsd.target]}]}],
    }


def cluster(tmp: Path, name: str, exported: Path, rules: Path, **config: Any) -> Cluster:
    """One cluster: its statsd_exporter and feeder, and its Prometheus (external label ``cluster``,
    scraping and evaluating ``rules`` every second; ``config``: more of its configuration)."""
    tmp.mkdir()
    statsd, feeder = fed_exporter(tmp, exported)
    settings = scraping(name, exported, statsd)
    settings["global"]["evaluation_interval"] = "1s"
    settings = {**settings, "rule_files": [str(rules)], **config}
    prometheus = PrometheusServer(tmp, settings, "--storage.tsdb.retention.time=1h", role="newest")
    return Cluster(name, statsd, feeder, prometheus)


def wait_until_scraped(query: Query, clusters: set[str]) -> None:
    """Each cluster's target up in the global layer, and long enough before now that the rules,
    reading 30 s behind, count a first-seen counter in full (its target scraped before: setting
    counter_lookback)."""
    e2e.wait_for(
        lambda: {s["metric"].get("cluster") for s in query(f'up{{job="{JOB}"}} == 1', None)} == clusters,
        WAIT,
        "each cluster's up in the global layer",
    )
    e2e.wait_for(
        lambda: len(query(f'max_over_time(up{{job="{JOB}"}}[5s] offset 70s) == 1', None)) == len(clusters),
        WAIT,
        "each cluster's up 70 s back in the global layer",
    )


def recorded(query: Query, since: float, cluster: str | None) -> dict[Any, float]:
    """The calls the rules recorded since ``since`` per series, read from the global layer (one
    cluster's, or summed over the clusters: the global view), keyed as the model is."""
    rng = f"{int(time.time() - since) + 2}s"
    where = f'{{cluster="{cluster}"}}' if cluster else ""
    by = ",".join(("store", "outcome", "dag_id", "task_id", "run_type", "operator", "team_name", "operation"))
    out: dict[Any, float] = {}
    for sample in query(f"sum by ({by}) (sum_over_time({e2e.CALLS}{where}[{rng}]))", None):
        value = float(sample["value"][1])
        if value:
            out[e2e.model_key(sample["metric"])] = value
    return out


class Fed(Protocol):
    """A cluster, whatever scrapes it: what its feeder is."""

    @property
    def feeder(self) -> Feeder: ...


def make_passes_and_check_them(clusters: Mapping[str, Fed], passes: Mapping[str, int], query: Query) -> float:
    """Each cluster's feeder makes its ``passes``; the calls read from the global layer are then
    exactly those, per cluster and summed over them. Returns when the passes began."""
    since = time.time()
    for name, n in passes.items():
        for _ in range(n):
            assert clusters[name].feeder.command("pass") == "done"
    total = {name: sum(e2e.feeder_passes(n).values()) for name, n in passes.items()}
    for name in passes:
        with contextlib.suppress(AssertionError):  # compared exactly below, whatever was recorded
            e2e.wait_for(
                lambda name=name: sum(recorded(query, since, name).values()) >= total[name],
                WAIT,
                f"the calls of {name} in the global layer",
            )
    for name, n in passes.items():
        assert recorded(query, since, name) == e2e.feeder_passes(n), name
    assert recorded(query, since, None) == e2e.feeder_passes(sum(passes.values()))
    return since


def compare_dashboard(
    exported: Path,
    clusters: Mapping[str, Cluster],
    query: Query,
    *,
    started: float,
    newest: Callable[[], float],
    rel: float = 0.0,
    edit: Callable[[str], str] = lambda expr: expr,
) -> None:
    """Every task-side query of the dashboard, as Grafana sends it for one cluster, on the global
    layer and on that cluster's own Prometheus (its records without the ``cluster`` external label,
    as one Prometheus is read): the same series, the same numbers (to ``rel``). Asked at an instant
    both sides have recorded past (``newest``: the global layer's newest recorded sample), each
    query first ``edit``-ed."""
    at = time.time()
    rng = f"{int(at - started) + 2}s"
    latest = f"max(timestamp({e2e.CALLS}))"
    e2e.wait_for(
        lambda: (
            all((c.prometheus.scalar(latest) or 0) > at + 1 for c in clusters.values()) and newest() > at + 1
        ),
        WAIT,
        "a rule evaluation after the instant asked, on both sides",
    )
    exprs = sorted(
        {
            t["expr"]
            for p in e2e.dashboard(exported)["panels"]
            for t in p.get("targets", [])
            if "$server_job" not in t["expr"]
        }
    )
    assert exprs
    compared = nonempty = 0
    for name, member in clusters.items():
        for panel_expr in exprs:
            expr = edit(panel_expr)
            sent = e2e.interpolate(expr.replace("$cluster", name), {}, rng=rng, interval=rng, job=JOB)
            local = e2e.interpolate(expr, {}, rng=rng, interval=rng, job=JOB)
            theirs = {_key(s): float(s["value"][1]) for s in member.prometheus.query(local, at)}
            ours = {_key(s): float(s["value"][1]) for s in query(sent, at)}
            assert set(ours) == set(theirs), (name, sent, ours, theirs)
            for key, value in theirs.items():
                assert ours[key] == pytest.approx(value, rel=rel, abs=rel and 1e-12), (name, sent, key)
            compared += 1
            nonempty += bool(theirs)
    assert compared == len(exprs) * len(clusters)
    assert nonempty >= len(clusters)  # the task panels answer with the calls made


def _key(sample: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(sample["metric"].items()))
