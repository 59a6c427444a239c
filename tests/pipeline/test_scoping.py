"""Two jobs, or two deployments, carrying the same DAG's calls: per job and per deployment, never added up.

A real Prometheus scrapes one endpoint three times: as job statsd, as job otel (a StatsD to
OpenTelemetry migration, both paths live at once), and as job statsd of a second deployment
(``cluster="east"``). The rules (exported with 1 s intervals) record each apart; the dashboard's
queries, with one deployment and one job chosen, return the endpoint's own counts, and the error
alert fires once per job and deployment with the endpoint's own ratio: never a doubled sum.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.dashboard import interpolate
from support.exported import Exported
from support.prometheus import PrometheusServer
from testbed.waiting import wait_until

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

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


class _Handler(BaseHTTPRequestHandler):
    #: Set once Prometheus has scraped every job empty: the counts are then calls made while it
    #: watched (what a counter holds at a target's first scrape is history, never recorded).
    serving = threading.Event()

    def do_GET(self) -> None:
        body = EXPOSITION.encode() if self.serving.is_set() else b""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        del format, args


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
