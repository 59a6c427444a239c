"""Two clusters under one VictoriaMetrics: the recorded calls and the alerts, through the real programs.

Each cluster (``east``, ``west``) is its own Prometheus 3 (the newest pin) with a ``cluster``
external label, scraping its own statsd_exporter (the Airflow chart's pin, the exported mappings),
fed DogStatsD by a feeder (``support.feeder``: the instrumented wrappers over in-memory stores,
one pass of known calls on command). Each Prometheus remote-writes everything it scrapes to one
VictoriaMetrics (single-node, the pinned 1.151.0) and evaluates no rule: vmalert evaluates the
exported rules (``store-metrics export --target victoriametrics``) against VictoriaMetrics, every
second, writes the recorded series back to it and sends its alerts to the real Alertmanager. The
rules run globally, once, as VictoriaMetrics' vmalert documentation lays it out (one vmalert over
the storage every cluster writes to): the ``cluster`` label each Prometheus adds keeps the clusters
apart, and ``up`` of every cluster is in the same storage.

What holds, as on one Prometheus:

* the recorded calls of each cluster are exactly the calls its feeder made (east two passes, west
  one), per series; summed over the clusters (the global view) exactly the three passes;
* every task-side dashboard query, as Grafana sends it for one cluster, returns on VictoriaMetrics
  what that cluster's own Prometheus returns from its own records;
* StateStoreErrorRateHigh fires for the failing DAG of each cluster at Alertmanager, labelled with
  that cluster, and resolves once its calls leave the error window;
* a cluster gone whole (west's Prometheus and exporter stopped): StateStoreMetricsMissing fires for
  that cluster alone, saying which in its ``cluster`` label. Only a global evaluator can: the
  cluster's own Prometheus, gone with it, cannot alert on itself.

``rule_offset`` is the shipped 30 s here, not the 1 s the one-Prometheus tests use: the rules read
the counters ``rule_offset`` behind, and what they read must already be in VictoriaMetrics then
(remote write sends a batch every second here, every ``batch_send_deadline``, 5 s, by default; on a
loaded machine a batch can take longer). A sample that arrives later than that is never recorded.
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

from support import e2e, global_layers
from support.exported import run_export
from support.global_layers import JOB, WAIT, Cluster
from support.peer_servers import Alertmanager
from support.servers import ServerProcess
from testbed import peers
from testbed.ports import free_port

pytestmark = [pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

CLUSTERS = {"east": 2, "west": 1}  # cluster -> passes its feeder makes
SETTINGS = {
    **e2e.ALERTING_SETTINGS,
    "rule_offset": "30s",
    "error_window": "5m",
    "missing_for": "5m",  # the shortest the settings accept: it fires while the error alerts resolve
}
ALERT = "StateStoreErrorRateHigh"
MISSING = "StateStoreMetricsMissing"
#: What each cluster's Prometheus records and alerts itself, kept out of VictoriaMetrics.
RECORDED_HERE = "task:.+|instance:.+|ALERTS|ALERTS_FOR_STATE"


class VictoriaMetrics(ServerProcess):
    """victoria-metrics (single-node): data visible to queries 1 s after it arrives (30 s by default)."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [
            str(peers.binary("victoria-metrics", "current")),
            f"-storageDataPath={tmp / 'vm-data'}",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            "-retentionPeriod=1d",
            "-search.latencyOffset=1s",
            "-search.disableCache",
            "-loggerLevel=WARN",
        ]
        super().__init__(command, tmp / "victoria-metrics.log", f"{self.url}/health")

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        data = urllib.parse.urlencode(params).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=30) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        assert body["data"]["resultType"] == "vector", body
        return list(body["data"]["result"])


class VmAlert(ServerProcess):
    """vmalert over VictoriaMetrics: the rule files every second, recorded series written back,
    alerts to Alertmanager."""

    def __init__(self, tmp: Path, rules: list[Path], vm: VictoriaMetrics, alertmanager: Alertmanager) -> None:
        self.port = free_port()
        command = [
            str(peers.binary("vmalert", "current")),
            *(f"-rule={path}" for path in rules),
            f"-datasource.url={vm.url}",
            f"-remoteWrite.url={vm.url}",
            "-remoteWrite.flushInterval=1s",
            f"-notifier.url=http://{alertmanager.target}",
            "-evaluationInterval=1s",
            # the rules read rule_offset behind themselves; vmalert's own delay is for the default
            # -search.latencyOffset (30 s), which this VictoriaMetrics does not keep
            "-rule.evalDelay=0s",
            # how long a series whose samples stopped without a staleness marker (a Prometheus that
            # stopped sends none) still answers: 5m by default, which a cluster gone whole waits out
            # before StateStoreMetricsMissing can even be pending; shortened here to keep the test short
            "-datasource.queryStep=10s",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            "-loggerLevel=WARN",
        ]
        super().__init__(command, tmp / "vmalert.log", f"http://127.0.0.1:{self.port}/health")


def cluster(tmp: Path, name: str, exported: Path, prometheus_export: Path, vm: VictoriaMetrics) -> Cluster:
    """One cluster whose Prometheus remote-writes what it scrapes (not what it records: its own rules,
    the Prometheus export's, are the baseline the dashboard's answers on VictoriaMetrics are compared
    with)."""
    remote_write = {
        "url": f"{vm.url}/api/v1/write",
        "queue_config": {"batch_send_deadline": "1s", "max_shards": 1},
        "write_relabel_configs": [{"source_labels": ["__name__"], "regex": RECORDED_HERE, "action": "drop"}],
    }
    rules = prometheus_export / "collector" / "rules.yml"
    return global_layers.cluster(tmp, name, exported, rules, remote_write=[remote_write])


@dataclass
class Topology:
    vm: VictoriaMetrics
    vmalert: VmAlert
    alertmanager: Alertmanager
    clusters: dict[str, Cluster]
    started: float
    exported: Path
    calls_since: float = 0.0


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    tmp = tmp_path_factory.mktemp("vm-topology")
    args = [f"--set={name}={value}" for name, value in SETTINGS.items()]
    done = run_export(tmp / "exported", "--target", "victoriametrics", *args)
    assert done.returncode == 0, done.stderr
    exported = tmp / "exported"
    done = run_export(tmp / "prometheus-export", *args)
    assert done.returncode == 0, done.stderr
    stack = contextlib.ExitStack()
    with stack:
        vm = VictoriaMetrics(tmp)
        stack.callback(vm.stop)
        alertmanager = Alertmanager(tmp, exported)
        stack.callback(alertmanager.stop)
        clusters = {}
        for name in CLUSTERS:
            made = cluster(tmp / name, name, exported, tmp / "prometheus-export", vm)
            stack.callback(made.statsd.stop)
            stack.callback(made.feeder.stop)
            stack.callback(made.prometheus.stop)
            clusters[name] = made
        vmalert = VmAlert(tmp, [exported / "collector" / "rules.yml"], vm, alertmanager)
        stack.callback(vmalert.stop)
        yield Topology(vm, vmalert, alertmanager, clusters, time.time(), exported)


def test_each_cluster_s_calls_are_recorded_exactly(topology: Topology) -> None:
    # every target up in VictoriaMetrics, with its cluster, before the first call
    e2e.wait_for(
        lambda: (
            {s["metric"].get("cluster") for s in topology.vm.query(f'up{{job="{JOB}"}} == 1')}
            == set(CLUSTERS)
        ),
        WAIT,
        "each cluster's up in VictoriaMetrics",
    )
    # ... and long enough before it that the rules, reading 30 s behind, count a first-seen counter
    # in full (its target scraped before: setting counter_lookback)
    e2e.wait_for(
        lambda: (
            len(topology.vm.query(f'max_over_time(up{{job="{JOB}"}}[5s] offset 70s) == 1')) == len(CLUSTERS)
        ),
        WAIT,
        "each cluster's up 70 s back in VictoriaMetrics",
    )
    topology.calls_since = global_layers.make_passes_and_check_them(
        topology.clusters, CLUSTERS, topology.vm.query
    )


def test_every_dashboard_query_returns_what_each_cluster_s_prometheus_returns(topology: Topology) -> None:
    """Every query of the dashboard, as Grafana sends it for one cluster, on VictoriaMetrics (vmalert's
    records) and on that cluster's Prometheus (its own records of the same calls, without the
    ``cluster`` external label, as one Prometheus is read): the same series, the same numbers (to
    VictoriaMetrics' 12 significant digits). Runs after the calls above, before west goes away."""
    newest = f"max(timestamp({e2e.CALLS}))"
    global_layers.compare_dashboard(
        topology.exported,
        topology.clusters,
        topology.vm.query,
        started=topology.started,
        newest=lambda: float(topology.vm.query(newest)[0]["value"][1]),
        rel=1e-9,
        # The per-minute panels average the recorded increments over the window: over one that holds
        # a series' first evaluation, that average depends on how many evaluations each engine made
        # since (142 and 143 in 406 s, once), not on what it recorded. Their sums, which are the
        # calls, are compared instead.
        edit=lambda expr: expr.replace("avg_over_time(", "sum_over_time("),
    )


@pytest.mark.timeout(900)  # two waits of five minutes (the shortest error window and missing_for), at once
def test_alerts_reach_alertmanager_each_saying_its_cluster(topology: Topology) -> None:
    """The failing DAG's error alert fires for each cluster at Alertmanager; then west goes away whole
    (its Prometheus, its exporter): the error alerts resolve once the failed calls leave the 5m error
    window, and vmalert, evaluating globally, fires the missing-counters alert for west alone. Runs
    after the calls above and the dashboard's queries (west's Prometheus is their baseline)."""
    since = topology.calls_since
    wanted = {(name, e2e.ERRORS_DAG) for name in CLUSTERS}
    e2e.wait_for(lambda: topology.alertmanager.holding(ALERT) >= wanted, WAIT, f"{ALERT} at Alertmanager")
    assert topology.alertmanager.holding(ALERT) == wanted

    west = topology.clusters["west"]
    west.prometheus.stop()
    west.statsd.stop()
    e2e.wait_for(
        lambda: not topology.alertmanager.holding(ALERT),
        300 + WAIT,
        f"{ALERT} resolved at Alertmanager",
        interval=2,
    )
    e2e.wait_for(
        lambda: topology.alertmanager.holding(MISSING), 300 + WAIT, f"{MISSING} at Alertmanager", interval=2
    )
    assert topology.alertmanager.holding(MISSING) == {("west", "")}
    (alert,) = [a for a in topology.alertmanager.alerts() if a["labels"]["alertname"] == MISSING]
    assert alert["labels"]["job"] == JOB
    assert "var-cluster=west&" in alert["annotations"]["dashboard_url"]
    # nothing recorded twice meanwhile, and west's calls kept
    for name, n in CLUSTERS.items():
        assert global_layers.recorded(topology.vm.query, since, name) == e2e.feeder_passes(n), name
