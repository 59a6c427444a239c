"""Two jobs, or two deployments, carrying the same DAG's calls: per job and per deployment, never added up.

A real Prometheus scrapes one endpoint three times: as job statsd, as job otel (a StatsD to
OpenTelemetry migration, both paths live at once), and as job statsd of a second deployment
(``cluster="east"``). The rules (exported with 1 s intervals) record each apart; the dashboard's
queries, with one deployment and one job chosen, return the endpoint's own counts, and the error
alert fires once per job and deployment with the endpoint's own ratio: never a doubled sum.

Then every shipped topology's jobs, read from the shipped PodMonitor, ServiceMonitor and
``prometheus.yml`` (and the layout issue 28 found, a PodMonitor per pod): the DAG tasks', the asset
watchers' and the API server's series under the jobs that topology gives them, and every row of the
dashboard has data with the variables as Grafana sets them on opening it (each single-valued job
variable on the first of its ``label_values()``, sorted).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import component_series
from support.dashboard import interpolate
from support.e2e import dashboard_rows
from support.exported import Exported
from support.operator import scrape_jobs
from support.prometheus import PrometheusServer
from testbed.waiting import wait_until

pytestmark = [pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

SETTINGS = {"rule_interval": "1s", "rule_offset": "1s", "hygiene_interval": "1s", "error_min_calls": "1"}
TAGS = 'dag_id="etl",task_id="extract",run_type="scheduled",operator="PythonOperator"'
#: One DAG's calls as one endpoint serves them: 40 writes, 10 failed reads (20%).
EXPOSITION = f"""\
# TYPE airflow_task_state_store_write_total counter
airflow_task_state_store_write_total{{{TAGS}}} 40
# TYPE airflow_task_state_store_error_total counter
airflow_task_state_store_error_total{{{TAGS},operation="get"}} 10
"""
CALLS = 50


class _Exposition(BaseHTTPRequestHandler):
    """Serves ``body`` as Prometheus' text exposition, quietly."""

    def body(self) -> bytes:
        raise NotImplementedError

    def do_GET(self) -> None:
        body = self.body()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        del format, args


class _Handler(_Exposition):
    #: Set once Prometheus has scraped every job empty: the counts are then calls made while it
    #: watched (what a counter holds at a target's first scrape is history, never recorded).
    serving = threading.Event()

    def body(self) -> bytes:
        return EXPOSITION.encode() if self.serving.is_set() else b""


def scrape(job: str, target: str, **labels: str) -> dict[str, Any]:
    config: dict[str, Any] = {"job_name": job, "static_configs": [{"targets": [target], "labels": labels}]}
    return config


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, exported: Exported
) -> Iterator[tuple[PrometheusServer, Path]]:
    tmp = tmp_path_factory.mktemp("scoping")
    files = exported(**SETTINGS)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{server.server_address[1]}"
    east = scrape("statsd-east", target, cluster="east")
    east["relabel_configs"] = [{"target_label": "job", "replacement": "statsd"}]  # the same job name there
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
        "rule_files": [str(files / "collector" / name) for name in ("rules.yml", "watcher-rules.yml")],
        "scrape_configs": [scrape("statsd", target), scrape("otel", target), east],
    }
    _Handler.serving.clear()
    prom = PrometheusServer(tmp, config)
    try:
        wait_until(lambda: len(prom.query("up == 1")) == 3, timeout=30, interval=0.2)
        _Handler.serving.set()
        total = "sum(sum_over_time(task:airflow_store_metrics_calls:increase[1h]))"
        wait_until(lambda: prom.scalar(total) == 3 * CALLS, timeout=30, interval=0.2)
        yield prom, files
    finally:
        prom.stop()
        server.shutdown()


def panel_query(exported: Path, title: str) -> str:
    doc = json.loads((exported / "dashboards" / "store-metrics.json").read_text())
    (panel,) = [p for p in doc["panels"] if p.get("title") == title]
    (target,) = panel["targets"]
    return str(target["expr"])


SCOPES = [
    pytest.param({"cluster": "", "job": "statsd"}, id="statsd"),
    pytest.param({"cluster": "", "job": "otel"}, id="otel-migration"),
    pytest.param({"cluster": "east", "job": "statsd"}, id="second-deployment"),
]


@pytest.mark.parametrize("scope", SCOPES)
def test_the_dashboard_shows_one_job_of_one_deployment(
    prometheus: tuple[PrometheusServer, Path], scope: dict[str, str]
) -> None:
    prom, exported = prometheus
    calls = prom.query(interpolate(panel_query(exported, "State store calls"), scope))
    assert [float(s["value"][1]) for s in calls] == [CALLS]  # not 100, not 150
    errors = prom.query(interpolate(panel_query(exported, "Error ratio"), scope))
    assert [float(s["value"][1]) for s in errors] == [0.2]


def test_the_variables_offer_each_deployment_and_job(prometheus: tuple[PrometheusServer, Path]) -> None:
    prom, _ = prometheus
    calls = "task:airflow_store_metrics_calls:increase"
    assert set(prom.api("label/cluster/values", **{"match[]": calls})) == {"east"}
    jobs = prom.api("label/job/values", **{"match[]": calls + '{cluster=""}'})
    assert set(jobs) == {"statsd", "otel"}


def test_the_error_alert_fires_per_job_and_deployment_with_the_endpoint_s_own_ratio(
    prometheus: tuple[PrometheusServer, Path],
) -> None:
    prom, exported = prometheus
    rules = yaml.safe_load((exported / "collector" / "rules.yml").read_text())
    (rule,) = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "StateStoreErrorRateHigh"]
    fired = {
        (s["metric"].get("cluster", ""), s["metric"]["job"], s["metric"]["dag_id"]): float(s["value"][1])
        for s in prom.query(rule["expr"])
    }
    assert fired == {("", "statsd", "etl"): 0.2, ("", "otel", "etl"): 0.2, ("east", "statsd", "etl"): 0.2}
    prom.rules_healthy()


# -- every shipped topology's jobs: each row has data ---------------------------------------------------

#: The namespace the Kubernetes topologies run in, and the chart's statsd_exporter Service there
#: (``<release>-statsd``): a ServiceMonitor's job is the Service's name.
NAMESPACE, STATSD_SERVICE = "airflow", "airflow-statsd"
COMPONENTS = ("tasks", "watchers", "server")
#: Rows with no data here, and why: the inventory is a component of its own (its row takes no job).
DARK_ROWS = {
    "Footprint: what the state store holds (store-metrics inventory; deployment and DAG filters only)"
}


def _operator_job(monitor_path: Path) -> str:
    """The ``job`` the Prometheus Operator gives the targets of a PodMonitor in ``NAMESPACE``."""
    monitor = yaml.safe_load(monitor_path.read_text())
    jobs = scrape_jobs(monitor, NAMESPACE, Path("targets.json"), "1s")
    (job,) = {r["replacement"] for j in jobs for r in j["relabel_configs"] if r.get("target_label") == "job"}
    return str(job)


def shipped_topologies(exported: Path) -> dict[str, dict[str, str]]:
    """Topology -> the job of each component (tasks, watchers, server), from the exported files."""
    pod_job = _operator_job(exported / "kubernetes" / "api-server" / "podmonitor.yaml")
    service_monitor = yaml.safe_load((exported / "kubernetes" / "statsd" / "servicemonitor.yaml").read_text())
    (service_rule,) = [
        r
        for r in scrape_jobs(service_monitor, NAMESPACE, Path("targets.json"), "1s")[0]["relabel_configs"]
        if r.get("target_label") == "job"
    ]
    assert service_rule["source_labels"] == ["__meta_kubernetes_service_name"]
    vm = {
        j["job_name"]
        for j in yaml.safe_load((exported / "collector" / "prometheus.yml").read_text())["scrape_configs"]
    }
    statsd_exporter, api_server = "store-metrics-statsd-exporter", "store-metrics-api-server"
    assert {statsd_exporter, api_server} <= vm
    return {
        # count_at = api_server: one PodMonitor for the API server's workers and the triggerer.
        "kubernetes-api-server": dict.fromkeys(COMPONENTS, pod_job),
        # StatsD: everything through the chart's statsd_exporter.
        "kubernetes-statsd": dict.fromkeys(COMPONENTS, STATSD_SERVICE),
        # A VM counting in the tasks through statsd_exporter, the API server's own metrics on its
        # own endpoint (backend otel, otel_exporter prometheus): prometheus.yml's two jobs.
        "vm-statsd-exporter-and-api-server": {
            "tasks": statsd_exporter,
            "watchers": statsd_exporter,
            "server": api_server,
        },
        # Issue 28's layout: a PodMonitor per pod, the triggerer's apart.
        "kubernetes-podmonitor-per-pod": {
            "tasks": pod_job,
            "watchers": pod_job.replace("api-server", "triggerer"),
            "server": pod_job,
        },
    }


class _Components(_Exposition):
    """/<component>: its series, grown by a minute's calls every second since ``started``."""

    started = 0.0

    def body(self) -> bytes:
        component = self.path.strip("/")
        if self.started and component in COMPONENTS:
            return component_series.exposition(component, time.time() - self.started).encode()
        return b""


@pytest.fixture(scope="module")
def topologies(
    tmp_path_factory: pytest.TempPathFactory, exported: Exported
) -> Iterator[tuple[PrometheusServer, Path, dict[str, dict[str, str]]]]:
    """One Prometheus scraping each topology's components as that topology's jobs, the topology's
    name as the cluster label; the task-side, watcher and API server rules loaded."""
    tmp = tmp_path_factory.mktemp("topologies")
    files = exported(**SETTINGS)
    jobs = shipped_topologies(files)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Components)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{server.server_address[1]}"
    scrapes = []
    for topology, components in jobs.items():
        for component, job in components.items():
            config = scrape(f"{topology}-{component}", target, cluster=topology)
            config["metrics_path"] = f"/{component}"
            # Each component its own target (pod, host), as in the topology.
            config["relabel_configs"] = [
                {"target_label": "job", "replacement": job},
                {"target_label": "instance", "replacement": f"{component}:9090"},
            ]
            scrapes.append(config)
    rule_files = ("rules.yml", "watcher-rules.yml", "server-rules.yml")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
        "rule_files": [str(files / "collector" / name) for name in rule_files],
        "scrape_configs": scrapes,
    }
    _Components.started = 0.0
    prom = PrometheusServer(tmp, config)
    try:
        wait_until(lambda: len(prom.query("up == 1")) == len(scrapes), timeout=30, interval=0.2)
        _Components.started = time.time()
        yield prom, files, jobs
    finally:
        prom.stop()
        server.shutdown()


def grafana_scope(prom: PrometheusServer, exported: Path, cluster: str) -> dict[str, str]:
    """The single-valued variables as Grafana sets them on opening the dashboard on ``cluster``: each
    on the first value its ``label_values(<series>{<matchers>}, <label>)`` returns, sorted (sort 1)."""
    doc = json.loads((exported / "dashboards" / "store-metrics.json").read_text())
    scope = {"cluster": cluster}
    for variable in doc["templating"]["list"]:
        if variable["type"] != "query" or variable["multi"] or variable["name"] == "cluster":
            continue
        series, label = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]).groups()  # type: ignore[union-attr]
        for name, value in scope.items():
            series = series.replace(f"${name}", value)
        values = sorted(prom.api(f"label/{label}/values", **{"match[]": series}))
        scope[variable["name"]] = values[0] if values else ""
    return scope


def dark_rows(prom: PrometheusServer, exported: Path, cluster: str) -> set[str]:
    """The dashboard's rows none of whose panels returns data, opened on ``cluster``."""
    scope = grafana_scope(prom, exported, cluster)
    rng = f"{int(time.time() - _Components.started) + 60}s"

    def has_data(panel: dict[str, Any]) -> bool:
        return any(
            prom.query(interpolate(t["expr"], scope, interval="5s", rng=rng)) for t in panel["targets"]
        )

    return {row for row, panels in dashboard_rows(exported).items() if not any(has_data(p) for p in panels)}


@pytest.mark.parametrize(
    "topology",
    [
        "kubernetes-api-server",
        "kubernetes-statsd",
        "vm-statsd-exporter-and-api-server",
        "kubernetes-podmonitor-per-pod",
    ],
)
def test_every_row_has_data_under_each_shipped_topology_s_jobs(
    topologies: tuple[PrometheusServer, Path, dict[str, dict[str, str]]], topology: str
) -> None:
    prom, exported, _ = topologies
    try:  # the rate5m rules need two scrapes of a grown counter: bounded
        wait_until(lambda: dark_rows(prom, exported, topology) == DARK_ROWS, timeout=30, interval=1)
    except AssertionError:
        assert dark_rows(prom, exported, topology) == DARK_ROWS, grafana_scope(prom, exported, topology)
