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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import e2e, global_layers
from support.exported import run_export
from support.global_layers import JOB, WAIT, Cluster
from support.peer_servers import Alertmanager
from support.victoriametrics import VictoriaMetrics, VmAlert

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


def cluster(tmp: Path, name: str, exported: Path, prometheus_export: Path, vm: VictoriaMetrics) -> Cluster:
    """One cluster whose Prometheus remote-writes what it scrapes (not what it records: its own rules,
    the Prometheus export's, are the baseline the dashboard's answers on VictoriaMetrics are compared
    with)."""
    remote_write = {
        "url": vm.write_url,
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
        # how long a series whose samples stopped without a staleness marker (a Prometheus that
        # stopped sends none) still answers: 5m by default, which a cluster gone whole waits out
        # before StateStoreMetricsMissing can even be pending; shortened here to keep the test short
        rules = [exported / "collector" / "rules.yml"]
        vmalert = VmAlert(tmp, rules, vm, "-datasource.queryStep=10s", notifier=alertmanager.target)
        stack.callback(vmalert.stop)
        yield Topology(vm, vmalert, alertmanager, clusters, time.time(), exported)


def test_each_cluster_s_calls_are_recorded_exactly(topology: Topology) -> None:
    global_layers.wait_until_scraped(topology.vm.query, set(CLUSTERS))
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
