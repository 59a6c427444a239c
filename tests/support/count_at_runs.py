"""The ``count_at = api_server`` deployments under ``airflow standalone``: their runs and what they call.

Used by ``tests/airflow/count_at_standalone/``: ``Calls`` (what the DAG runs call, as DogStatsD
totals), a deployment (``deployment``, ``restarted``) and its runs (``run_waves``), the
switching deployment's phases (``run_phase``), the scraped one's Prometheus view
(``held``, ``as_prometheus``), and an Execution API client with a task token.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from store_metrics import catalogue, example_dags
from support import e2e
from support.airflow import Standalone
from support.prometheus import PrometheusServer
from support.totals import Key, totals
from testbed.airflow import AirflowHome
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import poll, wait_until

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
    "store_metrics_async_task_store": ("async_task_store", PYOP),
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
    "store_metrics_async_task_store",
    CONCURRENT,
)
DAG_IDS = sorted({*FIRST_WAVE, *SECOND_WAVE})
#: What testbed/dags/scenarios/store_metrics_async_task_store.py calls, async or not.
ASYNC_TASK_STORE = {"read_absent": 2, "write": 1, "read_found": 1, "delete": 1, "clear": 1}


# -- what the runs call ------------------------------------------------------------------------------


def task_series(dag_id: str, task_id: str, operator: str) -> tuple[tuple[str, str], ...]:
    return (("dag_id", dag_id), ("task_id", task_id), ("run_type", "manual"), ("operator", operator))


class Calls:
    """The calls the DAG runs make, as DogStatsD totals: (name, tags) -> calls. Tracks asset state."""

    def __init__(self) -> None:
        self.totals: Counter[Key] = Counter()
        self.watermark_02 = False  # scenario 2's asset key, which outlives its runs

    def add(self, dag_id: str, store: str, outcome: str, n: int = 1, task_id: str = "") -> None:
        task, operator = TASKS.get(dag_id, (task_id, PYOP))
        self.totals[
            (f"airflow.{store}_state_store.{outcome}", task_series(dag_id, task_id or task, operator))
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
        elif dag_id == "store_metrics_async_task_store":
            for outcome, calls in {
                "read_absent": 2,
                "write": 1,
                "read_found": 1,
                "delete": 1,
                "clear": 1,
            }.items():
                self.add(dag_id, "task", outcome, calls)
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
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise AssertionError(
            f"{method} {path}: {exc.code} {exc.read()[:2000]!r}\n{airflow.log_tail()}"
        ) from exc
    except urllib.error.URLError as exc:
        raise AssertionError(f"{method} {path}: {exc.reason}\n{airflow.log_tail()}") from exc


def trigger(airflow: Standalone, dag_id: str, run_id: str, attempts: int = 6) -> None:
    """Start a run through the REST API. On SQLite the API server can answer 500 ("Database error")
    while the scheduler and task processes hold the database: the request is made again, after a
    growing pause that lets the writers finish (bounded: 6 attempts, 30 s of pauses); a run it did
    make answers 409 the next time."""
    body = {"dag_run_id": run_id, "logical_date": None}
    for attempt in range(1, attempts + 1):
        try:
            api(airflow, "POST", f"/api/v2/dags/{dag_id}/dagRuns", body)
            return
        except AssertionError as exc:
            if attempt == attempts or not re.search(r": (500|409) ", str(exc)):
                raise
            if ": 409 " in str(exc):
                return
        time.sleep(2 * attempt)


def run_dags(airflow: Standalone, dag_ids: tuple[str, ...], tag: str, timeout: float = 300) -> None:
    """Start each run and wait (bounded) until all have finished; all must have succeeded. When
    they have not, the failure shows every task instance of the runs and the end of the log."""
    barrier = Path(airflow.env["STORE_METRICS_TEST_BARRIER"])
    shutil.rmtree(barrier, ignore_errors=True)
    barrier.mkdir()
    run_ids = [f"{tag}-{n}-{dag_id}" for n, dag_id in enumerate(dag_ids)]
    for dag_id, run_id in zip(dag_ids, run_ids, strict=True):
        trigger(airflow, dag_id, run_id)
    marks = ",".join("?" * len(run_ids))

    def states() -> dict[str, str]:
        rows = airflow.home.query(f"select run_id, state from dag_run where run_id in ({marks})", *run_ids)
        return {str(run_id): str(state) for run_id, state in rows}

    def finished() -> bool:
        done = states()
        return len(done) == len(run_ids) and all(s in ("success", "failed") for s in done.values())

    def report() -> str:
        rows = airflow.home.query(
            "select run_id, task_id, map_index, state, try_number from task_instance"
            f" where run_id in ({marks}) order by run_id, task_id, map_index",
            *run_ids,
        )
        tis = "\n".join(" ".join(str(v) for v in row) for row in rows)
        arrived = sorted(p.name for p in barrier.iterdir())
        return f"runs: {states()}\ntask instances:\n{tis}\nat the barrier: {arrived}"

    if not poll(lambda: finished() or airflow._died(), timeout, interval=0.5):
        raise AssertionError(f"runs not finished within {timeout} s\n{report()}\n{airflow.log_tail()}")
    assert not airflow._died(), airflow.log_tail()
    assert set(states().values()) == {"success"}, f"{report()}\n{airflow.log_tail()}"


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


def run_phase(
    airflow: Standalone, receiver: UdpReceiver, calls: Calls, phase: str, dag_ids: tuple[str, ...]
) -> tuple[tuple[Counter[Key], Counter[Key]], str]:
    """Start, run ``dag_ids``, stop: (what the runs call, what the socket received), and the logs."""
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
    # The API server flushes every second: wait for the expected number of calls. Then stop: stop()
    # returns once every process of the deployment has exited, each having sent what it counted
    # (task processes at task end, the API server at lifespan shutdown and at exit); the marker
    # behind them on the socket makes sure all of it is read, anything counted twice included.
    wanted = sum(expected.values())
    wait_until(lambda: sum(ours(receiver.lines()[start:]).values()) >= wanted, 30)
    airflow.stop()
    received = ours(receiver.lines_before_marker()[start:])
    return (expected, received), task_logs(airflow.home, phase) + airflow.log_path.read_text(errors="replace")


def task_store_is_async() -> bool:
    """Whether this Task SDK's task store accessor has aget/aset/adelete/aclear (1.4, Airflow 3.4)."""
    from airflow.sdk.execution_time.context import TaskStateStoreAccessor

    return hasattr(TaskStateStoreAccessor, "aget")


# -- the scraped deployment: OpenTelemetry's Prometheus exporter on each API server worker --------------

WORKERS = 2


Prometheus = PrometheusServer


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports that are free on 127.0.0.1 now."""
    for _ in range(50):
        first = free_port()
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise AssertionError("no free consecutive ports")


STATE_STORE_SERIES = '{__name__=~"airflow_(task|asset)_state_store_[a-z_]+_total"}'
#: Labels Prometheus or the exporter add: the target, and the instrumentation scope.
TARGET_LABELS = ("__name__", "job", "instance")


def series_key(metric: Mapping[str, str]) -> tuple[str, frozenset[tuple[str, str]]]:
    labels = frozenset(
        (k, v) for k, v in metric.items() if v and k not in TARGET_LABELS and not k.startswith("otel_scope_")
    )
    return metric["__name__"], labels


def as_prometheus(counts: Mapping[Key, float]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """DogStatsD totals as Prometheus series: ``airflow.task_state_store.write`` -> ``..._write_total``."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = defaultdict(float)
    for (name, tags), value in counts.items():
        metric = catalogue.get(name.removeprefix("airflow."))
        out[(metric.prometheus_name(), frozenset(tags))] += value
    return dict(out)


def held(prom: Prometheus, at: float | None = None) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """What Prometheus holds now, summed across the workers (instances) that hold each series."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = defaultdict(float)
    for sample in prom.query(STATE_STORE_SERIES, at):
        out[series_key(sample["metric"])] += float(sample["value"][1])
    return dict(out)


@dataclass
class Scraped:
    airflow: Standalone
    prom: Prometheus
    calls: e2e.Model
    end: float
    first_port: int
    exported: Path


# -- any Execution API client with a task token ----------------------------------------------------


def in_deployment(airflow: Standalone, code: str) -> str:
    """Run ``code`` in a fresh interpreter with the deployment's environment; its last line of output."""
    proc = subprocess.run(
        [sys.executable, "-c", code], env=airflow.env, capture_output=True, text=True, timeout=120, check=True
    )
    return proc.stdout.strip().splitlines()[-1]


def mint_token(airflow: Standalone, ti_id: str) -> str:
    """A task token for ``ti_id``, signed by Airflow's own generator with the deployment's secret."""
    return in_deployment(
        airflow,
        "from airflow.api_fastapi.execution_api.app import _jwt_generator\n"
        f"print(_jwt_generator().generate(extras={{'sub': {ti_id!r}}}))\n",
    )


def execution_client(airflow: Standalone, token: str) -> httpx.Client:
    """A raw HTTP client of the deployment's Execution API, with ``token`` as its bearer."""
    return httpx.Client(
        base_url=f"http://127.0.0.1:{airflow.api_port}/execution/",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


Series = tuple[str, frozenset[tuple[str, str]]]


def series_of(store: str, outcome: str, labels: Mapping[str, str]) -> Series:
    return catalogue.get(f"{store}_state_store.{outcome}").prometheus_name(), frozenset(labels.items())


def wait_for_delta(
    prom: Prometheus, before: Mapping[Series, float], wanted: Mapping[Series, float], marker: Series
) -> None:
    """Wait until Prometheus holds ``wanted``'s calls more than ``before`` and one ``marker`` call; then
    what it gained, the marker aside, must be exactly ``wanted``.

    The marker is a raw client's last request: on the same connection (so the same API server worker),
    as the same task instance (so counted after its other requests, even those waiting for its
    metadata query), on a series of its own. A worker's counters are scraped whole: once a scrape
    holds the marker, it holds every count that worker made before it, anything counted twice too.
    """

    def delta() -> dict[Series, float]:
        now = held(prom)
        return {k: v - before.get(k, 0.0) for k, v in now.items() if v != before.get(k, 0.0)}

    def arrived() -> bool:
        got = delta()
        return got.get(marker) == 1 and sum(got.values()) - 1 >= sum(wanted.values())

    e2e.wait_for(arrived, 60, "the calls, up to the marker, in Prometheus")
    got = delta()
    del got[marker]
    assert got == wanted


def airflow_version() -> tuple[int, int]:
    from importlib.metadata import version

    major, minor = version("apache-airflow-core").split(".")[:2]
    return int(major), int(minor)


def uuid_of(value: Any) -> Any:
    import uuid

    return uuid.UUID(str(value))
