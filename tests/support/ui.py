"""The UI tests' deployment: Airflow with per-DAG permissions, DAGs writing task and asset state, the
API server counting their calls, and a real Prometheus scraping it.

* Components: ``api-server``, ``scheduler`` (LocalExecutor: each task its own process) and
  ``dag-processor``, started one by one (``support.cluster.Cluster``): what ``airflow
  standalone`` starts, but ``standalone`` replaces any configured auth manager by the Simple one
  (``calculate_env`` in ``airflow/cli/commands/standalone_command.py``), and these tests need one
  with per-DAG permissions.
* Auth: Airflow's Simple auth manager with known passwords, extended with per-DAG refusals
  (``tests/deploy/modules/per_dag_auth.py``): ``admin`` reads everything, ``viewer`` every DAG but
  ``SECRET``.
* DAGs (``testbed/dags/ui``): ``ORDERS`` (tasks, a mapped task, two assets),
  ``SECRET`` (the largest state; shares an asset with ORDERS), ``SMALL``; and the names:
  ``DONNEES`` (which the viewer may not read) and ``DONN_ES``, one series under the old tag
  rule, and ``UNKNOWN_DAG``, named like the value of the calls nobody could attribute (one such
  call is made: ``UiDeployment.run_dags``).
* Calls: ``count_at = api_server`` with the OpenTelemetry backend's Prometheus exporter on the API
  server's worker, scraped every second by a real Prometheus (``collector/prometheus.yml``'s
  ``store-metrics-api-server`` job), which the UI queries (``ui_prometheus_url``).

Used by tests/airflow/test_ui_deployment.py and scripts/screenshots.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.cluster import Cluster
from support.deploy import MODULES, UI_DAGS
from support.e2e import CALLS as RECORDED
from support.e2e import export_for_e2e, wait_for
from support.prometheus import PrometheusServer, scraping_job
from testbed.ports import free_port
from testbed.repository import python_path

ORDERS = "store_metrics_ui_orders"
SECRET = "store_metrics_ui_secret"
SMALL = "store_metrics_ui_small"
#: Two ids Airflow accepts that the old tag rule (``[^A-Za-z0-9_.-]`` to ``_``) made one.
DONNEES = "donn\u00e9es_2024"
DONN_ES = "donn_es_2024"
#: A DAG named like the value the plugin gives the calls nobody could attribute, before ``<unknown>``.
UNKNOWN_DAG = "unknown"
DAG_IDS = (ORDERS, SECRET, SMALL, DONNEES, DONN_ES, UNKNOWN_DAG)
#: The assets each DAG uses (its tasks' outlets), from the DAG files.
DAG_ASSETS = {
    ORDERS: {"ui/orders", "ui/customers"},
    SECRET: {"ui/customers"},
    SMALL: set(),
    DONNEES: set(),
    DONN_ES: set(),
    UNKNOWN_DAG: set(),
}

#: The calls each task makes in one run, from the DAG files: (dag, task) -> "store.outcome" -> calls.
CALLS: dict[tuple[str, str], dict[str, int]] = {
    (ORDERS, "extract"): {
        "task_state_store.read_absent": 1,
        "task_state_store.write": 3,
        "task_state_store.read_found": 1,
    },
    (ORDERS, "transform"): {"task_state_store.read_absent": 3, "task_state_store.write": 3},
    (ORDERS, "load"): {"asset_state_store.read_absent": 1, "asset_state_store.write": 2},
    (ORDERS, "enrich"): {
        "asset_state_store.read_absent": 1,
        "asset_state_store.write": 1,
        "task_state_store.write": 1,
        "task_state_store.delete": 1,
    },
    (SECRET, "stash"): {"task_state_store.write": 3, "asset_state_store.write": 1},
    (SMALL, "note"): {"task_state_store.write": 1, "task_state_store.read_found": 1},
    (DONNEES, "t\u00e2che"): {"task_state_store.read_absent": 1, "task_state_store.write": 3},
    (DONN_ES, "t_che"): {"task_state_store.write": 1},
    (UNKNOWN_DAG, "note"): {"task_state_store.write": 1},
}
#: The calls nobody could attribute (``UiDeployment.run_dags`` makes one, without a token):
#: the API server counts them under ``<unknown>``, never under the DAG named ``unknown``.
UNATTRIBUTED = {"task_state_store.error": 1}
PASSWORDS = {"admin": "admin-password", "viewer": "viewer-password"}
ROLES = {"admin": "admin", "viewer": "viewer"}
DENIED = {"viewer": (SECRET, DONNEES)}
API_SERVER_JOB = "store-metrics-api-server"
GRAFANA = "http://grafana.example:3000"
#: Every state store counter series, whatever its labels.
STATE_STORE_SERIES = '{__name__=~"airflow_(task|asset)_state_store_[a-z_]+_total"}'


@dataclass
class UiDeployment:
    airflow: Cluster
    prom: PrometheusServer
    #: The exported files the Prometheus loads its rules from.
    exported: Path
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.airflow.api_port}"

    def token(self, user: str) -> str:
        """A JWT from Airflow's own login endpoint (``POST /auth/token``)."""
        if user not in self.tokens:
            status, body = self.request(
                "POST", "/auth/token", body={"username": user, "password": PASSWORDS[user]}
            )
            assert status == 201, (status, body)
            self.tokens[user] = body["access_token"]
        return self.tokens[user]

    def request(self, method: str, path: str, user: str | None = None, body: Any = None) -> tuple[int, Any]:
        """(status, parsed JSON or text) of one request, as ``user`` (a Bearer token) or anonymous."""
        headers = {"Content-Type": "application/json"}
        if user is not None:
            headers["Authorization"] = f"Bearer {self.token(user)}"
        request = urllib.request.Request(
            self.base + urllib.parse.quote(path, safe="/?&=:"),
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers=headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw, kind = response.status, response.read(), response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            status, raw, kind = exc.code, exc.read(), exc.headers.get("Content-Type", "")
        return status, json.loads(raw) if "json" in kind else raw.decode(errors="replace")

    def get(self, path: str, user: str | None = None) -> tuple[int, Any]:
        return self.request("GET", path, user)

    def run_dags(self, dag_ids: tuple[str, ...] = DAG_IDS) -> None:
        """One run of each DAG through the REST API (as admin); waits until all have succeeded. Then
        one state store call without a token, which the API server refuses and counts
        (``UNATTRIBUTED``)."""
        run_ids = []
        for n, dag_id in enumerate(dag_ids):
            run_id = f"ui-{n}-{dag_id.encode('ascii', 'replace').decode().replace('?', '_')}"
            status, body = self.request(
                "POST",
                f"/api/v2/dags/{dag_id}/dagRuns",
                "admin",
                {"dag_run_id": run_id, "logical_date": None},
            )
            assert status == 200, (status, body, self.airflow.tails())
            run_ids.append(run_id)

        def states() -> dict[str, str]:
            marks = ",".join("?" * len(run_ids))
            rows = self.airflow.query(
                f"select run_id, state from dag_run where run_id in ({marks})", *run_ids
            )
            return {str(r[0]): str(r[1]) for r in rows}

        self.airflow.wait(
            lambda: len(states()) == len(run_ids) and set(states().values()) <= {"success", "failed"},
            300,
            f"runs {run_ids} finished",
        )
        assert set(states().values()) == {"success"}, (states(), self.airflow.tails())
        status, _ = self.get(f"/execution/store/ti/{uuid.uuid4()}/progress")
        assert status in (401, 403), status

    def wait_for_calls(self) -> None:
        """Until Prometheus holds every call of ``CALLS`` (the API server counts each as it answers),
        and the rules have recorded them all (what the tab reads)."""
        total = sum(sum(counts.values()) for counts in CALLS.values()) + sum(UNATTRIBUTED.values())
        wait_for(
            lambda: self.prom.scalar(f"sum({STATE_STORE_SERIES})") == total,
            60,
            f"Prometheus to hold all {total} calls",
        )
        wait_for(
            lambda: self.prom.scalar(f"sum(sum_over_time({RECORDED}[1h]))") == total,
            60,
            f"the rules to record all {total} calls",
        )

    def stop(self) -> None:
        self.airflow.stop()
        self.prom.stop()


def start_deployment(root: Path, cache_ttl: float = 2) -> UiDeployment:
    """Prometheus first (the UI is pointed at it), then Airflow with the UI DAGs; the UI's answers are
    cached for ``cache_ttl`` seconds (``ui_cache_ttl``: short, so a test sees what the runs wrote)."""
    worker_port = free_port()
    # The tab reads the recorded calls of the shipped rules (rules.yml): they are loaded, and
    # evaluated every second.
    exported = export_for_e2e(root / "exported")
    prom = scraping_job(root, exported, API_SERVER_JOB, [f"127.0.0.1:{worker_port}"])
    airflow: Cluster | None = None
    try:
        passwords = root / "passwords.json"
        passwords.write_text(json.dumps(PASSWORDS))
        airflow = Cluster(
            root,
            [],
            {
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in ROLES.items()),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
                "STORE_METRICS_TEST_DENIED_DAGS": ";".join(f"{u}:{','.join(d)}" for u, d in DENIED.items()),
                "AIRFLOW__STORE_METRICS__COUNT_AT": "api_server",
                "AIRFLOW__STORE_METRICS__BACKEND": "otel",
                "AIRFLOW__STORE_METRICS__OTEL_EXPORTER": "prometheus",
                "AIRFLOW__STORE_METRICS__PROMETHEUS_HOST": "127.0.0.1",
                "AIRFLOW__STORE_METRICS__PROMETHEUS_PORT": str(free_port()),
                "AIRFLOW__STORE_METRICS__SERVER_PROMETHEUS_PORT": str(worker_port),
                "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "1",
                "AIRFLOW__STORE_METRICS__UI_CACHE_TTL": str(cache_ttl),
                "AIRFLOW__STORE_METRICS__UI_PROMETHEUS_URL": prom.url,
                "AIRFLOW__STORE_METRICS__UI_GRAFANA_URL": GRAFANA,
            },
        )
        # Instead of the Cluster's Simple auth manager with everyone an admin: per-DAG permissions, from
        # tests/deploy/modules (on the path of every component).
        airflow.env.update(
            AIRFLOW__CORE__AUTH_MANAGER="per_dag_auth.PerDagAuthManager",
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="False",
            PYTHONPATH=python_path(MODULES),
        )
        for dag_file in UI_DAGS.glob("*.py"):
            shutil.copy(dag_file, airflow.home.dags)
        airflow.start(list(DAG_IDS))
    except BaseException:
        if airflow is not None:
            airflow.stop()
        prom.stop()
        raise
    return UiDeployment(airflow, prom, exported)
