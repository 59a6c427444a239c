"""``count_at = api_server`` under a real ``airflow standalone``: the API server counts what tasks counted.

Two deployments, each a real ``airflow standalone`` (LocalExecutor: every task its own short-lived
process) running the same DAG runs: the upstream proposal's four scenarios (scenario 2 twice),
three mapped instances of one task, an async task on its asset's store, and six tasks using the
task store at once (at least four in parallel):

* **Switching** (one deployment, one metadata database, one UDP socket, DogStatsD): the runs with
  ``count_at = tasks``, then the same deployment restarted with ``count_at = api_server`` and the
  runs again, then restarted with ``count_at = tasks`` for a few more. The API server and the task
  processes share the configuration and the socket, so a call counted on both sides would show up
  twice: each phase must add exactly its calls, once, with the task side's names and tags.
* **Scraped** (``count_at = api_server``, the OpenTelemetry backend with its Prometheus exporter,
  two API server workers each serving its own endpoint, a real Prometheus scraping both workers
  directly: no Collector, no StatsD): the series Prometheus holds, summed across workers, are
  exactly those the task side sent in the switching deployment's first phase; every dashboard
  query returns what the calls say; and calls made by a raw HTTP client with a task token minted
  by Airflow's own JWT generator are counted with that task instance's tags.

Under ``dag.test()`` there is no API server: with ``count_at = api_server`` nothing is counted.
"""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import test_prometheus_e2e as e2e
from store_metrics import catalogue, example_dags
from support.airflow import AirflowHome, Standalone, make_home
from support.ports import free_port
from support.totals import Key, totals
from support.udp import UdpReceiver
from support.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

PYOP = "_PythonDecoratedOperator"
MOCK = "MockBatchOperator"
EXAMPLES = Path(example_dags.__file__).parent
JOB = "store-metrics-api-server"

#: dag_id -> (task_id, operator) of every DAG the runs use.
TASKS = {
    "state_store_metrics_01": ("touch_store", PYOP),
    "state_store_metrics_02": ("touch_asset_store", PYOP),
    "state_store_metrics_03": ("delete_and_clear", PYOP),
    "example_resumable_job": ("run_batch_job", MOCK),
    "store_metrics_mapped": ("resume_or_start", PYOP),
    "store_metrics_async_assets": ("async_watermark", PYOP),
}
CONCURRENT = "store_metrics_concurrent"
#: The DAG runs, in two waves: scenario 2's second run must find what its first one wrote.
FIRST_WAVE = ("state_store_metrics_02",)
SECOND_WAVE = (
    "state_store_metrics_01",
    "state_store_metrics_02",
    "state_store_metrics_03",
    "example_resumable_job",
    "store_metrics_mapped",
    "store_metrics_async_assets",
    CONCURRENT,
)
DAG_IDS = sorted({*FIRST_WAVE, *SECOND_WAVE})


# -- what the runs call ------------------------------------------------------------------------------


def _series(dag_id: str, task_id: str, operator: str) -> tuple[tuple[str, str], ...]:
    return (("dag_id", dag_id), ("task_id", task_id), ("run_type", "manual"), ("operator", operator))


class Calls:
    """The calls the DAG runs make, as DogStatsD totals: (name, tags) -> calls. Tracks asset state."""

    def __init__(self) -> None:
        self.totals: Counter[Key] = Counter()
        self.watermark_02 = False  # scenario 2's asset key, which outlives its runs

    def add(self, dag_id: str, store: str, outcome: str, n: int = 1, task_id: str = "") -> None:
        task, operator = TASKS.get(dag_id, (task_id, PYOP))
        self.totals[
            (f"airflow.{store}_state_store.{outcome}", _series(dag_id, task_id or task, operator))
        ] += n

    def run(self, dag_id: str) -> None:
        if dag_id == "state_store_metrics_01":
            self.add(dag_id, "task", "read_absent")
            self.add(dag_id, "task", "write")
            self.add(dag_id, "task", "read_found")
        elif dag_id == "state_store_metrics_02":
            self.add(dag_id, "asset", "read_found" if self.watermark_02 else "read_absent")
            self.watermark_02 = True
            self.add(dag_id, "asset", "write")
            self.add(dag_id, "task", "read_absent")
        elif dag_id == "state_store_metrics_03":
            self.add(dag_id, "task", "write", 2)
            self.add(dag_id, "task", "delete")
            self.add(dag_id, "task", "clear")
            self.add(dag_id, "asset", "write")
            self.add(dag_id, "asset", "delete")
        elif dag_id == "example_resumable_job":
            self.add(dag_id, "task", "read_absent")
            self.add(dag_id, "task", "write")
        elif dag_id == "store_metrics_mapped":  # three mapped instances, one series
            self.add(dag_id, "task", "read_absent", 3)
            self.add(dag_id, "task", "write", 3)
        elif dag_id == "store_metrics_async_assets":
            for outcome in ("write", "read_found", "delete", "read_absent", "clear"):
                self.add(dag_id, "asset", outcome)
        elif dag_id == CONCURRENT:
            for n in range(6):
                for outcome, calls in {
                    "write": 20,
                    "read_found": 20,
                    "read_absent": 5,
                    "delete": 3,
                    "clear": 1,
                }.items():
                    self.add(dag_id, "task", outcome, calls, task_id=f"worker_{n}")
        else:  # pragma: no cover
            raise AssertionError(dag_id)

    def runs(self, dag_ids: tuple[str, ...]) -> Counter[Key]:
        """The totals of these runs alone (the asset state carries on)."""
        before = Counter(self.totals)
        for dag_id in dag_ids:
            self.run(dag_id)
        return self.totals - before


# -- a deployment -----------------------------------------------------------------------------------


def deployment(root: Path, settings: dict[str, str]) -> Standalone:
    """``airflow standalone`` with the scenarios' DAGs, REST triggering and a known JWT secret."""
    barrier = root / "barrier"
    airflow = Standalone(
        root,
        free_port(),
        {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__API_AUTH__JWT_SECRET": "store-metrics-count-at-" + root.name,
            "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "1",
            "STORE_METRICS_TEST_BARRIER": str(barrier),
            **settings,
        },
    )
    for module in example_dags.SCENARIOS:
        shutil.copy(EXAMPLES / f"{module}.py", airflow.home.dags)
    return airflow


def restarted(previous: Standalone, settings: dict[str, str], phase: str) -> Standalone:
    """The same deployment (home, metadata database, DAGs, port) with other ``[store_metrics]`` settings."""
    again = copy.copy(previous)
    env = {k: v for k, v in previous.env.items() if not k.startswith("AIRFLOW__STORE_METRICS__")}
    again.env = {**env, "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "1", **settings}
    again.log_path = previous.home.path / f"standalone-{phase}.log"
    again.proc = None
    return again


def api(airflow: Standalone, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{airflow.api_port}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def run_dags(airflow: Standalone, dag_ids: tuple[str, ...], tag: str) -> None:
    """Trigger each run (through the REST API) and wait until all have succeeded."""
    barrier = Path(airflow.env["STORE_METRICS_TEST_BARRIER"])
    shutil.rmtree(barrier, ignore_errors=True)
    barrier.mkdir()
    run_ids = []
    for n, dag_id in enumerate(dag_ids):
        run_id = f"{tag}-{n}-{dag_id}"
        api(airflow, "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None})
        run_ids.append(run_id)

    def states() -> dict[str, str]:
        marks = ",".join("?" * len(run_ids))
        return dict(airflow._query(f"select run_id, state from dag_run where run_id in ({marks})", *run_ids))  # type: ignore[arg-type]

    wait_until(
        lambda: (
            all(s in ("success", "failed") for s in states().values())
            and len(states()) == len(run_ids)
            or airflow._died()
        ),
        300,
        interval=0.5,
    )
    assert not airflow._died(), airflow.log_tail()
    assert set(states().values()) == {"success"}, (states(), airflow.log_tail())


def run_waves(airflow: Standalone, tag: str) -> None:
    run_dags(airflow, FIRST_WAVE, f"{tag}-a")
    run_dags(airflow, SECOND_WAVE, f"{tag}-b")


def ours(lines: list[str]) -> Counter[Key]:
    """The state store counters among the lines, by series."""
    return Counter(
        {
            k: v
            for k, v in totals(lines, "dogstatsd").items()
            if k[0].startswith(("airflow.task_state_store.", "airflow.asset_state_store."))
        }
    )


def task_logs(home: AirflowHome, phase: str) -> str:
    """The logs of the task instances of one phase's runs."""
    files = (home.path / "logs").rglob("*.log")
    return "\n".join(p.read_text(errors="replace") for p in files if f"run_id={phase}-" in str(p))


# -- the switching deployment ------------------------------------------------------------------------


@dataclass
class Switching:
    home: AirflowHome
    #: phase -> (what the phase's runs call, what the socket received during the phase)
    phases: dict[str, tuple[Counter[Key], Counter[Key]]]
    logs: dict[str, str]


PHASES = (
    ("tasks", {"AIRFLOW__STORE_METRICS__COUNT_AT": "tasks"}, SECOND_WAVE),
    ("api_server", {"AIRFLOW__STORE_METRICS__COUNT_AT": "api_server"}, SECOND_WAVE),
    (
        "tasks_again",
        {"AIRFLOW__STORE_METRICS__COUNT_AT": "tasks"},
        ("state_store_metrics_01", "store_metrics_mapped"),
    ),
)


@pytest.fixture(scope="module")
def switching(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Switching]:
    root = tmp_path_factory.mktemp("count-at-switching")
    receiver = UdpReceiver()
    dogstatsd = {
        "AIRFLOW__STORE_METRICS__BACKEND": "dogstatsd",
        "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
        "AIRFLOW__STORE_METRICS__PORT": str(receiver.port),
    }
    calls = Calls()
    phases: dict[str, tuple[Counter[Key], Counter[Key]]] = {}
    logs: dict[str, str] = {}
    airflow: Standalone | None = None
    try:
        for phase, settings, dag_ids in PHASES:
            settings = {**dogstatsd, **settings}
            airflow = deployment(root, settings) if airflow is None else restarted(airflow, settings, phase)
            airflow.start(DAG_IDS)
            start = len(receiver.lines_before_marker())
            if dag_ids is SECOND_WAVE:
                expected = calls.runs(FIRST_WAVE)
                run_dags(airflow, FIRST_WAVE, f"{phase}-a")
                expected += calls.runs(dag_ids)
                run_dags(airflow, dag_ids, f"{phase}-b")
            else:
                expected = calls.runs(dag_ids)
                run_dags(airflow, dag_ids, phase)
            # The tasks have exited; the API server flushes every second: wait for the expected
            # number of calls, then a little more for anything counted twice to arrive too.
            wanted = sum(expected.values())
            wait_until(lambda: sum(ours(receiver.lines()[start:]).values()) >= wanted, 30)
            time.sleep(3)
            airflow.stop()  # the API server's last flush happens at its shutdown
            received = ours(receiver.lines_before_marker()[start:])
            phases[phase] = (expected, received)
            logs[phase] = task_logs(airflow.home, phase) + airflow.log_path.read_text(errors="replace")
        yield Switching(airflow.home if airflow else AirflowHome(root), phases, logs)
    finally:
        if airflow is not None:
            airflow.stop()
        receiver.close()


def test_count_at_tasks_counts_each_call_once_on_the_task_side(switching: Switching) -> None:
    expected, received = switching.phases["tasks"]
    assert received == expected
    assert "count_at = api_server" not in switching.logs["tasks"]


def test_switching_to_api_server_counts_each_call_once_on_the_api_server(switching: Switching) -> None:
    expected, received = switching.phases["api_server"]
    # Scenario 2's asset key was written in the first phase: both its reads find it now.
    assert (
        expected[
            (
                "airflow.asset_state_store.read_found",
                _series("state_store_metrics_02", "touch_asset_store", PYOP),
            )
        ]
        == 2
    )
    assert received == expected
    log = switching.logs["api_server"]
    assert "count_at = api_server: this task's state store calls are counted by the API server" in log
    assert "count_at = api_server: API server worker" in log


def test_switching_back_to_tasks_counts_each_call_once_on_the_task_side(switching: Switching) -> None:
    expected, received = switching.phases["tasks_again"]
    assert received == expected
