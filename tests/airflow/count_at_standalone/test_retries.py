"""Did each retry resume? ``retry_resumed`` / ``retry_not_resumed`` under ``airflow standalone``, both modes.

One deployment (LocalExecutor: every try of every task its own process; DogStatsD to one real UDP
socket; two API server workers), run twice with the same DAG run (``tests/deploy/dags/retries``):
``count_at = tasks``, then restarted with ``count_at = api_server``. Each phase must give exactly the
model's totals: a task that saves then fails resumes on its retry (``retry_resumed = 1``), a task
whose first try fails before saving starts over (``retry_not_resumed = 1``), a retry that never reads
and a first-try success count neither, each map index is an attempt of its own, and every call
counter is what the calls were, the same in both modes.

The retries that read pause twice for longer than the Task SDK's HTTP keep-alive (5 s) and read
again: each pause makes the supervisor open a new connection, which the kernel hands to either
worker. A test-only plugin logs which worker served each Execution API request; the measurement
(connections and workers per attempt) is checked where it is deterministic (a connection idle for
more than the keep-alive is never reused) and reported where it is not (which worker a new
connection reaches): the counts must be exact either way.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.airflow import Standalone
from support.count_at_runs import restarted
from support.deploy import DEPLOY, SERVER_PLUGINS
from support.totals import Key, totals
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import poll

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG_ID = "store_metrics_retries"
PYOP = "_PythonDecoratedOperator"
#: Seconds each reading retry pauses (twice) before reading again: more than httpx's 5 s keep-alive.
PAUSE = 5.5
PAUSES = 2
KEEP_ALIVE = 5.0
WORKERS = 2
PHASES = ("tasks", "api_server")


def model() -> Counter[Key]:
    """What one run of ``store_metrics_retries`` counts, by series: its calls and its retried attempts."""
    out: Counter[Key] = Counter()

    def add(task_id: str, name: str, n: int = 1) -> None:
        tags = (("dag_id", DAG_ID), ("task_id", task_id), ("run_type", "manual"), ("operator", PYOP))
        out[(f"airflow.task_state_store.{name}", tags)] += n

    # saves_then_fails: try 1 reads (absent), saves, fails; try 2 reads (found), then reads again.
    add("saves_then_fails", "read_absent")
    add("saves_then_fails", "write")
    add("saves_then_fails", "read_found", 1 + PAUSES)
    add("saves_then_fails", "retry_resumed")
    # fails_before_saving: both tries read nothing; try 2 saves, then reads again.
    add("fails_before_saving", "read_absent", 2)
    add("fails_before_saving", "write")
    add("fails_before_saving", "read_found", PAUSES)
    add("fails_before_saving", "retry_not_resumed")
    # never_reads: try 2 writes and deletes; no read, no retry counter.
    add("never_reads", "write")
    add("never_reads", "delete")
    # first_try_success: one try, no retry counter.
    add("first_try_success", "read_absent")
    add("first_try_success", "write")
    # mapped: 0 reads once (absent); 1 reads (absent), saves and fails, its retry reads (found);
    # 2 reads (absent) and fails, its retry reads (absent) and reads again (absent).
    add("mapped", "read_absent", 1 + 1 + 1 + 1 + PAUSES)
    add("mapped", "write")
    add("mapped", "read_found", 1 + PAUSES)
    add("mapped", "retry_resumed")
    add("mapped", "retry_not_resumed")
    return out


RETRY_NAMES = ("airflow.task_state_store.retry_resumed", "airflow.task_state_store.retry_not_resumed")


@dataclass
class Phase:
    received: Counter[Key]
    #: The Execution API requests the test plugin logged during the phase.
    requests: list[dict[str, Any]]
    log: str


def ours(lines: list[str]) -> Counter[Key]:
    return Counter(
        {k: v for k, v in totals(lines, "dogstatsd").items() if dict(k[1]).get("dag_id") == DAG_ID}
    )


@pytest.fixture(scope="module")
def phases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Phase]]:
    root = tmp_path_factory.mktemp("retries")
    receiver = UdpReceiver()
    plugins = root / "plugins"
    plugins.mkdir()
    shutil.copy(SERVER_PLUGINS / "store_metrics_test_request_log.py", plugins)
    request_log = root / "requests.jsonl"
    settings = {
        "AIRFLOW__STORE_METRICS__BACKEND": "dogstatsd",
        "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
        "AIRFLOW__STORE_METRICS__PORT": str(receiver.port),
        "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "1",
    }
    airflow = Standalone(
        root,
        free_port(),
        {
            **settings,
            "AIRFLOW__STORE_METRICS__COUNT_AT": "tasks",
            "AIRFLOW__API__WORKERS": str(WORKERS),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
            "STORE_METRICS_TEST_REQUEST_LOG": str(request_log),
            "STORE_METRICS_TEST_PAUSE": str(PAUSE),
        },
    )
    shutil.copy(DEPLOY / "dags" / "retries" / f"{DAG_ID}.py", airflow.home.dags)
    out: dict[str, Phase] = {}
    try:
        for n, phase in enumerate(PHASES, start=1):
            if n > 1:
                airflow = restarted(airflow, {**settings, "AIRFLOW__STORE_METRICS__COUNT_AT": phase}, phase)
            out[phase] = run_phase(airflow, receiver, request_log, n)
        yield out
    finally:
        airflow.stop()
        receiver.close()


def run_phase(airflow: Standalone, receiver: UdpReceiver, request_log: Path, runs: int) -> Phase:
    """Start, run the DAG once more, wait for its counts, stop: what the socket got and the requests."""
    airflow.start([DAG_ID])
    start = len(receiver.lines_before_marker())
    logged = len(request_log.read_text().splitlines()) if request_log.exists() else 0
    airflow.trigger(DAG_ID)
    states = airflow.wait_for_runs(DAG_ID, runs, timeout=300)
    assert states == ["success"] * runs, airflow.log_tail()
    # Wait for the model's number of counts (a short count shows as a difference in the tests).
    wanted = sum(model().values())
    poll(lambda: sum(ours(receiver.lines()[start:]).values()) >= wanted, 30, interval=0.2)
    airflow.stop()  # every process exits, each having sent what it counted; then the marker
    received = ours(receiver.lines_before_marker()[start:])
    requests = [json.loads(line) for line in request_log.read_text().splitlines()[logged:]]
    return Phase(received, requests, airflow.log_path.read_text(errors="replace"))


@pytest.mark.parametrize("phase", PHASES)
def test_each_retried_attempt_counts_once_and_every_call_as_it_was(
    phases: dict[str, Phase], phase: str
) -> None:
    received = phases[phase].received
    assert received == model()
    retries = {
        (name, dict(tags)["task_id"]): n for (name, tags), n in received.items() if name in RETRY_NAMES
    }
    assert retries == {
        (RETRY_NAMES[0], "saves_then_fails"): 1,
        (RETRY_NAMES[1], "fails_before_saving"): 1,
        (RETRY_NAMES[0], "mapped"): 1,
        (RETRY_NAMES[1], "mapped"): 1,
    }


def test_the_call_counters_are_the_same_in_both_modes(phases: dict[str, Phase]) -> None:
    calls = {
        mode: Counter({k: v for k, v in p.received.items() if k[0] not in RETRY_NAMES})
        for mode, p in phases.items()
    }
    assert calls["tasks"] == calls["api_server"] and sum(calls["tasks"].values()) > 0


def attempts(requests: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each attempt's requests (by the task instance the Execution API verified), in the order served."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in sorted(requests, key=lambda r: r["time"]):
        if request["ti"]:
            out[request["ti"]].append(request)
    return out


def test_a_connection_idle_longer_than_the_keep_alive_is_not_reused(phases: dict[str, Phase]) -> None:
    """Why one attempt's requests reach several workers: the supervisor's client (httpx, keep-alive
    expiry 5 s) opens a new connection after every idle gap of 5 s or more, and heartbeats come about
    every 5 s. A gap clearly shorter reuses the connection."""
    checked = Counter[str]()
    for phase in phases.values():
        for served in attempts(phase.requests).values():
            for before, after in itertools.pairwise(served):
                gap = after["time"] - before["time"]
                same = after["client"] == before["client"]
                if gap > KEEP_ALIVE + 0.5:
                    assert not same, (before, after)
                    checked["new after idle"] += 1
                elif gap < KEEP_ALIVE - 0.5:
                    assert same, (before, after)
                    checked["reused"] += 1
    assert checked["new after idle"] >= 2 * len(PHASES) and checked["reused"] > 0, checked


def test_the_retries_reads_reached_the_workers_as_measured(
    phases: dict[str, Phase], record_property: Any
) -> None:
    """The reads of each reading retry, over its connections and the workers that served them.

    Which worker a new connection reaches is the kernel's choice: reported (``record_property``,
    and in the message of a failure), never required. The counts above are exact either way.
    """
    spread: dict[str, tuple[int, int, int]] = {}
    for phase, found in phases.items():
        for ti, served in attempts(found.requests).items():
            reads = [r for r in served if r["method"] == "GET" and "/execution/store/ti/" in r["path"]]
            if len(reads) == 1 + PAUSES:  # a reading retry (first tries read once)
                workers = {r["pid"] for r in served}
                spread[f"{phase}:{ti}"] = (
                    len(reads),
                    len({tuple(r["client"]) for r in served}),
                    len(workers),
                )
    record_property("retry_spread", json.dumps(spread))
    assert len(spread) >= 4 * len(PHASES), spread  # four reading retries per phase
    assert all(connections >= 1 + PAUSES for _, connections, _ in spread.values()), spread
    assert all(1 <= workers <= WORKERS for *_, workers in spread.values()), spread


def test_the_api_server_phase_was_counted_by_the_api_server(phases: dict[str, Phase]) -> None:
    log = phases["api_server"].log
    assert "count_at = api_server: API server worker" in log
    assert "count_at = api_server" not in phases["tasks"].log
