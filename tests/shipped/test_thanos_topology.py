"""Two clusters under one Thanos Querier: the recorded calls, the alerts and the dashboard, through the
real programs.

Each cluster (``east``, ``west``) is its own Prometheus 3 (the newest pin) with a ``cluster``
external label, scraping its own statsd_exporter (the Airflow chart's pin, the exported mappings),
fed DogStatsD by a feeder (``support.feeder``: the instrumented wrappers over in-memory stores, one
pass of known calls on command). Each Prometheus evaluates the exported rules itself, every second,
and sends its alerts to the one real Alertmanager: Thanos' own guidance (its Ruler page: "keep
deploying rules inside the relevant Prometheus servers locally"), and the rules need nothing from
another cluster. A Thanos sidecar (the pinned 0.42.4) beside each Prometheus serves it to one Thanos
Querier, the global view Grafana reads; both sidecars are ``strict`` endpoints of the Querier, so a
cluster that stops answering is a warning on every answer, never a silent gap.

What holds, as on one Prometheus:

* the recorded calls of each cluster, read through the Querier (which adds each cluster's external
  label), are exactly the calls its feeder made (east two passes, west one), per series; summed over
  the clusters exactly the three passes;
* every task-side dashboard query, as Grafana sends it for one cluster, returns through the Querier
  the series and numbers that cluster's own Prometheus returns;
* the Airflow UI's tab, reading the Querier, shows a DAG's calls of its own cluster only when
  ``ui_prometheus_selector`` names that cluster (the same DAG id runs in both);
* StateStoreErrorRateHigh fires for the failing DAG of each cluster at Alertmanager, labelled with that
  cluster (Prometheus adds its external labels to the alerts it sends);
* east's Prometheus going away (the whole cluster): the Querier's answers hold west's calls, exactly,
  and a warning that one store did not answer, which Grafana shows on the panel.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics.catalogue import metric_for
from store_metrics.config.reader import OptionValues
from store_metrics.ui.calls import COUNTERS
from store_metrics.ui.sources import Sources
from store_metrics.ui.status import check_lines
from support import e2e, global_layers
from support.exported import run_export
from support.global_layers import JOB, WAIT
from support.peer_servers import Alertmanager
from support.servers import ServerProcess
from testbed import peers
from testbed.ports import free_port

pytestmark = [pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

CLUSTERS = {"east": 2, "west": 1}  # cluster -> passes its feeder makes
SETTINGS = e2e.ALERTING_SETTINGS
ERRORS = "StateStoreErrorRateHigh"


class Thanos(ServerProcess):
    """One ``thanos`` component on free ports, ready when ``/-/ready`` answers."""

    def __init__(self, tmp: Path, component: str, *flags: str) -> None:
        self.http = free_port()
        self.grpc = free_port()
        self.url = f"http://127.0.0.1:{self.http}"
        command = [
            str(peers.binary("thanos", "current")),
            component,
            f"--http-address=127.0.0.1:{self.http}",
            f"--grpc-address=127.0.0.1:{self.grpc}",
            "--log.level=warn",
            *flags,
        ]
        super().__init__(command, tmp / f"thanos-{component}.log", f"{self.url}/-/ready")

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc}"


class Querier(Thanos):
    """``thanos query`` over the sidecars, each a strict endpoint (always asked, never dropped)."""

    def __init__(self, tmp: Path, sidecars: list[Thanos]) -> None:
        endpoints = {"endpoints": [{"address": s.endpoint, "strict": True} for s in sidecars]}
        super().__init__(tmp, "query", f"--endpoint.sd-config={yaml.safe_dump(endpoints)}")

    def answer(self, expr: str, at: float | None = None) -> dict[str, Any]:
        """The whole answer to an instant query, as Grafana asks it (no ``partial_response``: the
        Querier's default, which answers what the stores that did answer hold, with warnings)."""
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        data = urllib.parse.urlencode(params).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=30) as response:
            body: dict[str, Any] = json.loads(response.read())
        assert body["status"] == "success", body
        assert body["data"]["resultType"] == "vector", body
        return body

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        body = self.answer(expr, at)
        assert not body.get("warnings"), body["warnings"]
        return list(body["data"]["result"])


@dataclass
class Cluster(global_layers.Cluster):
    sidecar: Thanos


def cluster(tmp: Path, name: str, exported: Path, alertmanager: Alertmanager) -> Cluster:
    """One cluster whose Prometheus evaluates the exported rules and alerts to ``alertmanager``, and
    the sidecar that serves it to the Querier."""
    alerting = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager.target]}]}]}
    made = global_layers.cluster(tmp, name, exported, exported / "collector" / "rules.yml", alerting=alerting)
    sidecar = Thanos(tmp, "sidecar", f"--prometheus.url={made.prometheus.url}", f"--tsdb.path={tmp / 'tsdb'}")
    return Cluster(made.name, made.statsd, made.feeder, made.prometheus, sidecar)


@dataclass
class Topology:
    querier: Querier
    alertmanager: Alertmanager
    clusters: dict[str, Cluster]
    started: float
    exported: Path


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    tmp = tmp_path_factory.mktemp("thanos-topology")
    done = run_export(tmp / "exported", *(f"--set={name}={value}" for name, value in SETTINGS.items()))
    assert done.returncode == 0, done.stderr
    exported = tmp / "exported"
    with contextlib.ExitStack() as stack:
        alertmanager = Alertmanager(tmp, exported)
        stack.callback(alertmanager.stop)
        clusters = {}
        for name in CLUSTERS:
            made = cluster(tmp / name, name, exported, alertmanager)
            for server in (made.statsd, made.feeder, made.prometheus, made.sidecar):
                stack.callback(server.stop)
            clusters[name] = made
        querier = Querier(tmp, [c.sidecar for c in clusters.values()])
        stack.callback(querier.stop)
        yield Topology(querier, alertmanager, clusters, time.time(), exported)


def test_each_cluster_s_calls_are_recorded_exactly_in_the_global_view(topology: Topology) -> None:
    # every target up, with its cluster, a few scrapes before the first call: the rules (reading 1 s
    # behind) count a first-seen counter in full only when its target was scraped before
    e2e.wait_for(
        lambda: (
            {
                s["metric"].get("cluster")
                for s in topology.querier.query(f'min_over_time(up{{job="{JOB}"}}[3s] offset 3s) == 1')
            }
            == set(CLUSTERS)
        ),
        WAIT,
        "each cluster's up through the Querier",
    )
    global_layers.make_passes_and_check_them(topology.clusters, CLUSTERS, topology.querier.query)


def test_every_dashboard_query_returns_what_each_cluster_s_prometheus_returns(topology: Topology) -> None:
    """Every task-side query of the dashboard, as Grafana sends it for one cluster, through the Querier
    and on that cluster's Prometheus (its records without the ``cluster`` external label, as one
    Prometheus is read): the same series, the same numbers. Runs after the calls above."""
    newest = f"max(timestamp({e2e.CALLS}))"
    global_layers.compare_dashboard(
        topology.exported,
        topology.clusters,
        topology.querier.query,
        started=topology.started,
        newest=lambda: float(topology.querier.query(newest)[0]["value"][1]),
    )


def _per_task(calls: dict[Any, float], dag_id: str) -> dict[str, float]:
    """The model's calls of ``dag_id`` per task, as the UI tab shows them (asset watchers apart)."""
    out: dict[str, float] = {}
    for (_, tags), value in calls.items():
        labels = dict(tags)
        if labels.get("dag_id") == dag_id and labels.get("run_type") != "asset_watcher":
            out[labels["task_id"]] = out.get(labels["task_id"], 0.0) + value
    return out


def test_the_ui_tab_on_the_querier_shows_its_own_cluster_s_calls_of_a_dag(topology: Topology) -> None:
    """The Airflow UI's tab (its sources, as an API server worker reads them, with
    ``ui_prometheus_url`` at the Querier): the same DAG id runs in both clusters; with
    ``ui_prometheus_selector`` naming its cluster, each deployment's tab shows its own calls, and
    without it the calls of both. ``store-metrics check`` says how many counters the matchers find."""
    dag_id = e2e.ERRORS_DAG
    shown = {}
    for selector in ('cluster="east"', 'cluster="west"', ""):
        options = OptionValues(ui_prometheus_url=topology.querier.url, ui_prometheus_selector=selector)
        answer = Sources(options).calls(dag_id, "1d")
        assert answer is not None and answer.value is not None, answer
        shown[selector] = {task: sum(counters.values()) for task, counters in answer.value.tasks.items()}
    assert shown['cluster="east"'] == _per_task(e2e.feeder_passes(CLUSTERS["east"]), dag_id)
    assert shown['cluster="west"'] == _per_task(e2e.feeder_passes(CLUSTERS["west"]), dag_id)
    assert shown[""] == _per_task(e2e.feeder_passes(sum(CLUSTERS.values())), dag_id)
    assert shown['cluster="west"']  # the DAG made calls

    url = topology.querier.url
    east = check_lines(OptionValues(ui_prometheus_url=url, ui_prometheus_selector='cluster="east"'))
    # the counters east's exporter serves, asked of east's own Prometheus (no cluster label there)
    names = {metric_for(store, outcome).prometheus_name("airflow") for store, outcome in COUNTERS}
    served = {
        sample["metric"]["__name__"] for sample in topology.clusters["east"].prometheus.query("{job!=''}")
    }
    held = len(names & served)
    assert held
    assert f'ui: Prometheus at {url} answers; it holds {held} of the 12 counters with cluster="east"' in east
    nowhere = check_lines(OptionValues(ui_prometheus_url=url, ui_prometheus_selector='cluster="nowhere"'))
    assert f'ui: Prometheus at {url} answers; it holds 0 of the 12 counters with cluster="nowhere"' in nowhere


def test_alerts_reach_alertmanager_each_saying_its_cluster(topology: Topology) -> None:
    """The failing DAG's error alert fires for each cluster at Alertmanager, labelled with that
    cluster and linking to its dashboard. Under Thanos the alerts take one Prometheus' own path
    (each cluster's Prometheus evaluates and sends them; the Querier is not on it), so how they
    resolve, and the missing-counters alert, are what the one-Prometheus tests hold; what differs
    here is only the ``cluster`` label, which each Prometheus adds from its external labels."""
    wanted = {(name, e2e.ERRORS_DAG) for name in CLUSTERS}
    e2e.wait_for(lambda: topology.alertmanager.holding(ERRORS) >= wanted, WAIT, f"{ERRORS} at Alertmanager")
    assert topology.alertmanager.holding(ERRORS) == wanted
    for alert in topology.alertmanager.alerts():
        if alert["labels"]["alertname"] == ERRORS:
            assert alert["labels"]["job"] == JOB
            assert f"var-cluster={alert['labels']['cluster']}&" in alert["annotations"]["dashboard_url"]


def test_a_restart_of_each_part_loses_no_call(topology: Topology) -> None:
    """East's sidecar, the Querier and east's Prometheus stopped, east's feeder making a pass
    meanwhile, then each started again: every call of the pass is read through the Querier. Each
    cluster's Prometheus records its own calls (the rules bridge its restart's scrape gap, as on one
    Prometheus) and the sidecar and Querier only read what it recorded."""
    east = topology.clusters["east"]
    since = time.time()
    for server in (east.sidecar, topology.querier, east.prometheus):
        server.stop()
    assert east.feeder.command("pass") == "done"
    for server in (east.prometheus, east.sidecar, topology.querier):
        server.start()
    with contextlib.suppress(AssertionError):  # compared exactly below, whatever was recorded
        e2e.wait_for(
            lambda: global_layers.recorded(topology.querier.query, since, "east") == e2e.feeder_passes(1),
            WAIT,
            "east's pass through the Querier",
        )
    assert global_layers.recorded(topology.querier.query, since, "east") == e2e.feeder_passes(1)
    assert global_layers.recorded(topology.querier.query, since, "west") == {}


def test_a_cluster_gone_whole_is_a_warning_beside_the_other_s_exact_calls(topology: Topology) -> None:
    east = topology.clusters["east"]
    east.prometheus.stop()
    # the sidecar stays up but cannot read its Prometheus: the Querier asks it (strict) and says so
    rng = f"{int(time.time() - topology.started) + 2}s"
    expr = f"sum(sum_over_time({e2e.CALLS}[{rng}]))"
    answer = e2e.wait_for(
        lambda: (body := topology.querier.answer(expr)).get("warnings") and body, WAIT, "a warning"
    )
    (total,) = answer["data"]["result"]
    assert float(total["value"][1]) == sum(e2e.feeder_passes(CLUSTERS["west"]).values())
    assert answer["warnings"]
    east.sidecar.stop()
    answer = e2e.wait_for(
        lambda: (body := topology.querier.answer(expr)).get("warnings") and body, WAIT, "a warning"
    )
    (total,) = answer["data"]["result"]
    assert float(total["value"][1]) == sum(e2e.feeder_passes(CLUSTERS["west"]).values())
