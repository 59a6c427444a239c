"""Every topology end to end through the real peers (``tests/airflow/test_through_the_peers.py``).

One topology is one ``airflow standalone`` (LocalExecutor: every task its own process, six at once in
``store_metrics_concurrent``) whose every component sends through one backend, and the real programs
that carry what it sends to Prometheus:

* ``statsd``: InfluxDB-tagged StatsD to statsd_exporter, at the Airflow chart's pin (the chart's own
  mappings first where ``STORE_METRICS_AIRFLOW_CHART`` gives them, then the Helm values'
  ``statsd.extraMappings``, as the chart renders them) and at the minimum (the exported mapping
  files);
* ``dogstatsd``: DogStatsD to the Collector's StatsD receiver, at the newest and the minimum release;
* ``otlp``: OTLP/HTTP, delta temporality, to the Collector's OTLP receiver and ``deltatocumulative``,
  at both releases; the newest also exports with the UTF-8 translation strategies.

A fan-out (``support.peer_servers``) hands every datagram or request, unchanged, to each peer, so
one Airflow run reaches every pinned version at once. Each peer is one scrape target of every
Prometheus (the 3.x newest and LTS pins; 2.42 too for ``otlp``), in the exported ``prometheus.yml``'s
job for it, with a ``cluster`` label naming the peer: the rules keep ``cluster``, so each peer's calls
are recorded apart. The runs: the upstream proposal's scenarios and the parallel, mapped and async
DAGs (``support.count_at_runs``), a DAG whose calls raise, the retried tasks' DAG
(``support.retries``: retried attempts that resume and that start over), the asset watchers' DAG
(``support.watchers``, in the triggerer), the API server's route metrics (its middleware, same
backend), then ``store-metrics inventory --serve`` once with ``inventory_export = backend``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from support import e2e
from support.airflow import Standalone
from support.count_at_runs import (
    DAG_IDS,
    FIRST_WAVE,
    PYOP,
    SECOND_WAVE,
    Calls,
    as_prometheus,
    deployment,
    run_dags,
    task_series,
    trigger,
)
from support.deploy import MODULES
from support.helm_chart import CHART_ENV
from support.peer_servers import Alertmanager, Collector, OtlpFanout, StatsdExporter, UdpFanout
from support.prometheus import PrometheusServer
from support.retries import DAG_FILE as RETRIES_DAG_FILE
from support.retries import DAG_ID as RETRIES_DAG
from support.retries import model as retried_attempts
from support.totals import Key
from support.watchers import CONSUMERS, DAG_FILE, TASKS, WATCHERS
from testbed.processes import stop
from testbed.repository import python_path
from testbed.waiting import wait_until

TOPOLOGIES = ("statsd", "dogstatsd", "otlp")
#: The Prometheus pins every topology is read on (``otlp`` adds the 2.42 minimum, for what a
#: scraper without UTF-8 names makes of the Collector's translation strategies).
PROMETHEUS_ROLES = ("newest", "lts")
#: The export the topologies load: the e2e settings (rules every second), and alerts that fire as
#: soon as their condition holds.
EXPORT_SETTINGS = e2e.ALERTING_SETTINGS
ERRORS_DAG = "store_metrics_errors"
#: The errors DAG's calls, all refused before any request: (task_id, store, operation).
ERRORS = (("refuse", "task", "set"), ("refuse", "asset", "get"), ("fail_on_none", "task", "set"))
#: The Collector's translation strategies tried besides its default (UnderscoreEscapingWithSuffixes).
UTF8_STRATEGIES = ("NoUTF8EscapingWithSuffixes", "NoTranslation")
STATSD_JOB = "store-metrics-statsd-exporter"
COLLECTOR_JOB = "store-metrics-otel-collector"
STATE_STORE = (
    '__name__=~"airflow_(task|asset)_state_store_'
    '(read_found|read_absent|write|delete|clear|error|retry_resumed|retry_not_resumed)_total"'
)
#: The recorded calls and retried attempts, as the rules record them.
RECORDED = f'__name__=~"{e2e.CALLS}|{e2e.RETRIES}"'

SERVER_REQUESTS = "airflow_api_server_state_store_requests_total"
TASK_ENTRIES = "airflow_task_state_store_footprint_entries"
ASSET_ENTRIES = "airflow_asset_state_store_footprint_entries"


@dataclass(frozen=True)
class Pipeline:
    """One peer as Prometheus scrapes it: its ``cluster`` label, its scrape job and target."""

    cluster: str
    scrape_job: str
    target: str
    peer: str
    strategy: str | None = None
    #: How Prometheus 3 is told to escape UTF-8 names for this target (``metric_name_escaping_scheme``).
    escaping: str | None = None

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"


@dataclass
class Topology:
    """One topology after its runs: the peers still serving, Prometheus still evaluating."""

    name: str
    pipelines: list[Pipeline]
    proms: dict[str, PrometheusServer]
    alertmanager: Alertmanager
    airflow: Standalone
    exported: Path
    #: What the runs called (tasks and watchers), as DogStatsD totals: (name, tags) -> calls.
    calls: Counter[Key]
    #: The StatsD lines the components put on the wire (empty for ``otlp``).
    lines: list[str] = field(default_factory=list)
    #: What the peers other than Prometheus left in their logs, by cluster.
    logs: dict[str, str] = field(default_factory=dict)
    end: float = 0.0

    @property
    def carrying(self) -> list[Pipeline]:
        """The pipelines as shipped (the Collector's default translation)."""
        return [p for p in self.pipelines if p.strategy is None]

    def model(self) -> e2e.Model:
        out = e2e.Model()
        for key, value in as_prometheus(self.calls).items():
            out.counts[key] = value
        return out

    def requests(self) -> dict[tuple[str, str], float]:
        """What the API server served, by (store, outcome): every task's call (the watchers' go
        through the triggerer's in-process API; the errors DAG's calls are refused before any request)."""
        out: dict[tuple[str, str], float] = defaultdict(float)
        for (name, tags), value in self.calls.items():
            labels = dict(tags)
            if ".retry_" in name:
                continue  # a retried attempt is counted at a read, not a request of its own
            if labels["run_type"] == "asset_watcher" or labels["dag_id"] == ERRORS_DAG:
                continue
            store, outcome = name.removeprefix("airflow.").split("_state_store.")
            out[(store, outcome)] += value
        return dict(out)


# -- what the runs call ----------------------------------------------------------------------------


def with_retries(name: str) -> bool:
    """Whether ``name``'s runs include the retried tasks' DAG (``support.retries``). Not over OTLP:
    its mapped task's three instances write one series at once, the OTLP path's documented limit
    (see ``second_wave``)."""
    return name != "otlp"


def second_wave(name: str) -> tuple[str, ...]:
    """The second wave of ``name``'s runs. Over OTLP, without the mapped DAG: its three instances write
    one series, and task processes that write the same series at the same moment are the OTLP path's
    documented limit (deltatocumulative drops a point that overlaps the stream's last one; see
    collector/otel-collector.yaml), so whether its counts are whole depends on how the executor
    happened to schedule them. Six processes at once, each its own series, stay."""
    return tuple(d for d in SECOND_WAVE if d != "store_metrics_mapped") if name == "otlp" else SECOND_WAVE


def expected_calls(wave: tuple[str, ...], retries: bool) -> Counter[Key]:
    """The waves (proposal scenarios, mapped, async, concurrent), the errors DAG, the watchers, and
    the retried tasks' calls and retried attempts (``retries``)."""
    calls = Calls()
    calls.runs(FIRST_WAVE)
    calls.runs(wave)
    totals = Counter(calls.totals)
    if retries:
        totals.update(retried_attempts(pauses=0))
    for task_id, store, operation in ERRORS:
        tags = (*task_series(ERRORS_DAG, task_id, PYOP), ("operation", operation))
        totals[(f"airflow.{store}_state_store.error", tags)] += 1
    totals.update(WATCHERS)
    totals.update(TASKS)
    return totals


# -- the peers of each topology ---------------------------------------------------------------------


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def chart_mappings() -> list[dict[str, Any]]:
    """The Airflow chart's own statsd_exporter mappings, where a checkout names them (else none)."""
    where = os.environ.get(CHART_ENV)
    if not where:
        return []
    mappings: list[dict[str, Any]] = _load(Path(where) / "files" / "statsd-mappings.yml")["mappings"]
    return mappings


@dataclass
class Peers:
    """What a topology's sender is aimed at, and what to close."""

    pipelines: list[Pipeline]
    settings: dict[str, str]
    closers: list[Any]
    fanout: UdpFanout | None = None


def statsd_peers(tmp: Path, exported: Path) -> Peers:
    collector = exported / "collector"
    helm_values = _load(exported / "helm" / "values-store-metrics.yaml")
    chart = StatsdExporter(tmp, "chart", [*chart_mappings(), *helm_values["statsd"]["extraMappings"]])
    files = ("statsd-mapping.yml", "statsd-mapping-server.yml", "statsd-mapping-inventory.yml")
    minimum = StatsdExporter(tmp, "minimum", [m for f in files for m in _load(collector / f)["mappings"]])
    fanout = UdpFanout([chart.udp_port, minimum.udp_port])
    with_chart = "the chart's mappings, then " if chart_mappings() else ""
    pipelines = [
        Pipeline(chart.pin.key, STATSD_JOB, chart.target, f"{chart.pin.key} ({with_chart}the Helm values')"),
        Pipeline(minimum.pin.key, STATSD_JOB, minimum.target, f"{minimum.pin.key} (the exported mappings)"),
    ]
    settings = {"BACKEND": "statsd", "HOST": "127.0.0.1", "PORT": str(fanout.port)}
    return Peers(pipelines, settings, [fanout, chart, minimum], fanout)


def collector_pipelines(collector: Collector) -> list[Pipeline]:
    return [
        Pipeline(
            collector.pin.key + (f"-{strategy}" if strategy else ""),
            COLLECTOR_JOB,
            collector.target(strategy),
            collector.pin.key,
            strategy,
        )
        for strategy in collector.ports
    ]


def dogstatsd_peers(tmp: Path, exported: Path) -> Peers:
    shipped = exported / "collector" / "otel-collector.yaml"
    collectors = [Collector(tmp, role, shipped) for role in ("newest", "minimum")]
    fanout = UdpFanout([c.statsd_port for c in collectors])
    settings = {"BACKEND": "dogstatsd", "HOST": "127.0.0.1", "PORT": str(fanout.port)}
    pipelines = [p for c in collectors for p in collector_pipelines(c)]
    return Peers(pipelines, settings, [fanout, *collectors], fanout)


def otlp_peers(tmp: Path, exported: Path) -> Peers:
    shipped = exported / "collector" / "otel-collector.yaml"
    newest = Collector(tmp, "newest", shipped, (None, *UTF8_STRATEGIES))
    minimum = Collector(tmp, "minimum", shipped)
    fanout = OtlpFanout([newest.otlp_endpoint, minimum.otlp_endpoint])
    settings = {
        "BACKEND": "otel",
        "OTEL_EXPORTER": "otlp",
        "OTEL_TEMPORALITY": "delta",
        "=OTEL_EXPORTER_OTLP_ENDPOINT": fanout.endpoint,
        "=OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    utf8 = UTF8_STRATEGIES[0]
    escaped = Pipeline(
        f"{newest.pin.key}-{utf8}-underscores",
        COLLECTOR_JOB,
        newest.target(utf8),
        newest.pin.key,
        utf8,
        "underscores",
    )
    pipelines = [*collector_pipelines(newest), escaped, *collector_pipelines(minimum)]
    return Peers(pipelines, settings, [fanout, newest, minimum])


PEERS = {"statsd": statsd_peers, "dogstatsd": dogstatsd_peers, "otlp": otlp_peers}


def airflow_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """``[store_metrics]`` keys as environment variables; keys starting with ``=`` are set as they are."""
    return {
        key[1:] if key.startswith("=") else f"AIRFLOW__STORE_METRICS__{key}": value
        for key, value in settings.items()
    }


# -- Prometheus and Alertmanager ------------------------------------------------------------------


def prometheus_config(
    exported: Path, pipelines: list[Pipeline], alertmanager: Alertmanager, role: str
) -> dict[str, Any]:
    """The exported prometheus.yml's job of each peer, aimed at the peers (a ``cluster`` label
    each), every rule file, scraping and evaluating every second, alerting to ``alertmanager``. A
    pipeline scraped with a ``metric_name_escaping_scheme`` gets a job of its own (not on 2.42,
    which has no such setting)."""
    collector = exported / "collector"
    base = _load(collector / "prometheus.yml")
    jobs = {job["job_name"]: job for job in base["scrape_configs"]}
    scraped = [p for p in pipelines if scraped_by(p, role)]
    scrape_configs = []
    for name, escaping in dict.fromkeys((p.scrape_job, p.escaping) for p in scraped):
        targets = [
            {"targets": [p.target], "labels": {"cluster": p.cluster}}
            for p in scraped
            if (p.scrape_job, p.escaping) == (name, escaping)
        ]
        job = {**jobs[name], "static_configs": targets}
        if escaping:
            job.update(job_name=f"{name}-{escaping}", metric_name_escaping_scheme=escaping)
        scrape_configs.append(job)
    return {
        "global": {
            **base["global"],
            "scrape_interval": "1s",
            "scrape_timeout": "900ms",
            "evaluation_interval": "1s",
        },
        "rule_files": [str(collector / name) for name in base["rule_files"]],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager.target]}]}]},
        "scrape_configs": scrape_configs,
    }


def read_by_the_rules(pipeline: Pipeline, role: str) -> bool:
    """Whether Prometheus ``role`` stores ``pipeline``'s series under the names the rules read: the
    Collector's default strategy; NoUTF8EscapingWithSuffixes only where the scraper escapes names to
    underscores (2.42 always; 3.x with ``metric_name_escaping_scheme: underscores``); NoTranslation
    never (no ``_total`` suffix). Nor, of course, where it is not scraped."""
    if not scraped_by(pipeline, role):
        return False
    if pipeline.strategy is None:
        return True
    return pipeline.strategy == UTF8_STRATEGIES[0] and (bool(pipeline.escaping) or role == "minimum")


def scraped_by(pipeline: Pipeline, role: str) -> bool:
    """2.42 has no ``metric_name_escaping_scheme``: a pipeline that needs one is not scraped there."""
    return not (pipeline.escaping and role == "minimum")


def held(
    prom: PrometheusServer, cluster: str, selector: str = STATE_STORE, at: float | None = None
) -> e2e.Model:
    """The state store counters ``prom`` holds for ``cluster``, keyed as the model is."""
    out = e2e.Model()
    for sample in prom.query(f'{{{selector},cluster="{cluster}"}}', at):
        labels = sample["metric"]
        tags = frozenset(
            (k, v)
            for k, v in labels.items()
            if v and k not in ("__name__", "job", "instance", "cluster") and not k.startswith("otel_scope_")
        )
        out.counts[(labels["__name__"], tags)] += float(sample["value"][1])
    return out


def recorded_calls(prom: PrometheusServer, cluster: str) -> float:
    """The calls and retried attempts the rules recorded for ``cluster``, over the last hour."""
    return prom.scalar(f'sum(sum_over_time({{{RECORDED},cluster="{cluster}"}}[1h]))') or 0.0


# -- one topology, run -------------------------------------------------------------------------------------


def start_airflow(root: Path, peers: Peers) -> Standalone:
    """``airflow standalone`` with the scenario DAGs, the errors DAG and the watchers' DAG, every
    component sending through the topology's backend."""
    settings = {
        **airflow_settings(peers.settings),
        "PYTHONPATH": python_path(MODULES),
        "STORE_METRICS_TEST_OUT": str(root / "caught.json"),
    }
    airflow = deployment(root, settings)
    shutil.copy(DAG_FILE, airflow.home.dags)
    shutil.copy(RETRIES_DAG_FILE, airflow.home.dags)
    airflow.start([*DAG_IDS, ERRORS_DAG, RETRIES_DAG, *CONSUMERS])
    return airflow


def run_everything(airflow: Standalone, wave: tuple[str, ...], retries: bool) -> None:
    """The waves, the errors DAG (it fails: its calls raise), the retried tasks (``retries``), and
    the watchers' consumers."""
    run_dags(airflow, FIRST_WAVE, "a")
    trigger(airflow, ERRORS_DAG, "errors")
    if retries:
        trigger(airflow, RETRIES_DAG, "retries")
    run_dags(airflow, wave, "b")
    assert airflow.wait_for_runs(ERRORS_DAG, 1) == ["failed"], airflow.log_tail()
    if retries:
        assert airflow.wait_for_runs(RETRIES_DAG, 1) == ["success"], airflow.log_tail()
    for dag_id in CONSUMERS:
        assert airflow.wait_for_runs(dag_id, 1) == ["success"], airflow.log_tail()


@contextlib.contextmanager
def inventory(airflow: Standalone) -> Iterator[None]:
    """``store-metrics inventory --serve`` publishing through the deployment's backend, every second."""
    env = {
        **airflow.env,
        "AIRFLOW__STORE_METRICS__INVENTORY_EXPORT": "backend",
        "AIRFLOW__STORE_METRICS__INVENTORY_INTERVAL": "1",
    }
    command = [str(Path(sys.executable).with_name("store-metrics")), "inventory", "--serve"]
    log = (airflow.home.path / "inventory.log").open("w")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        stop(proc, 30)
        log.close()


def settled(topology: Topology) -> bool:
    """Every Prometheus holds every call of every carrying peer, has recorded them all, and holds the
    API server's requests and the inventory's gauges."""
    total = sum(topology.calls.values())
    requests = sum(topology.requests().values())
    for prom in topology.proms.values():
        for pipeline in topology.carrying:
            where = f'cluster="{pipeline.cluster}"'
            if sum(held(prom, pipeline.cluster).counts.values()) < total:
                return False
            if recorded_calls(prom, pipeline.cluster) < total:
                return False
            if (prom.scalar(f"sum({SERVER_REQUESTS}{{{where}}})") or 0) < requests:
                return False
            # the inventory's gauges, and what the footprint rules recorded of them
            if not prom.query(f"{TASK_ENTRIES}{{{where}}}"):
                return False
            if not prom.query(f"dag_id:airflow_store_metrics_footprint_entries:sum{{{where}}}"):
                return False
    return True


@contextlib.contextmanager
def running(name: str, tmp: Path, exported: Path) -> Iterator[Topology]:
    """Start the peers, Prometheus and Alertmanager; run everything through ``name``'s backend; wait
    (bounded) until every Prometheus has it all; yield the ``Topology``; stop everything."""
    closers: list[Any] = []
    try:
        peers = PEERS[name](tmp, exported)
        closers += peers.closers
        alertmanager = Alertmanager(tmp, exported)
        closers.append(alertmanager)
        proms = {}
        for role in (*PROMETHEUS_ROLES, *(("minimum",) if name == "otlp" else ())):
            folder = tmp / f"prometheus-{role}"
            folder.mkdir()
            config = prometheus_config(exported, peers.pipelines, alertmanager, role)
            proms[role] = PrometheusServer(folder, config, "--storage.tsdb.retention.time=1h", role=role)
            closers.append(proms[role])
        airflow = start_airflow(tmp / "airflow", peers)
        closers.append(airflow)
        wave = second_wave(name)
        topology = Topology(
            name,
            peers.pipelines,
            proms,
            alertmanager,
            airflow,
            exported,
            expected_calls(wave, with_retries(name)),
        )
        run_everything(airflow, wave, with_retries(name))
        airflow.stop()  # every component has sent what it counted
        with inventory(airflow):
            e2e.wait_for(
                lambda: settled(topology), 90, f"{name}: every call, request and gauge in Prometheus"
            )
        topology.lines = peers.fanout.lines() if peers.fanout else []
        topology.end = _after_a_rule_evaluation(list(proms.values()))
        yield topology
    finally:
        for closer in reversed(closers):
            with contextlib.suppress(Exception):
                closer.stop() if hasattr(closer, "stop") else closer.close()


def _after_a_rule_evaluation(proms: list[PrometheusServer]) -> float:
    """A time after which every Prometheus has scraped and evaluated the rules at least once."""
    now = time.time()

    def evaluated() -> bool:
        return all((p.scalar(f"min(timestamp({e2e.CALLS}))") or 0) > now for p in proms)

    wait_until(evaluated, 30, interval=0.2)
    return now
