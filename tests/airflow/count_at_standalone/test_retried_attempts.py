"""Did each retry resume? ``retry_resumed`` / ``retry_not_resumed`` under ``airflow standalone``, both modes.

One deployment (LocalExecutor: every try of every task its own process; DogStatsD to one real UDP
socket; two API server workers), run twice with the same DAG run (``testbed/dags/retries``):
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
import os
import shutil
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.airflow import Standalone
from support.count_at_runs import restarted
from support.deploy import SERVER_PLUGINS
from support.retries import DAG_FILE, DAG_ID, model
from support.totals import Key, totals
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import poll, wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.peers]

#: Seconds each reading retry pauses (twice) before reading again: more than httpx's 5 s keep-alive.
PAUSE = 5.5
PAUSES = 2
KEEP_ALIVE = 5.0
WORKERS = 2
PHASES = ("tasks", "api_server")


RETRY_NAMES = ("airflow.task_state_store.retry_resumed", "airflow.task_state_store.retry_not_resumed")


@dataclass
class Deployment:
    phases: dict[str, Phase]
    #: The claims folder of the deployment's API server workers (its own TMPDIR).
    claims: Path
    #: The task instance ids of the retried attempts (try 2) of the api_server phase's run.
    retried_attempts: set[str]


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
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("retries")
    tmp = root / "tmp"  # the deployment's own TMPDIR: its worker slots and retry claims
    tmp.mkdir()
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
            "TMPDIR": str(tmp),
        },
    )
    shutil.copy(DAG_FILE, airflow.home.dags)
    out: dict[str, Phase] = {}
    try:
        for n, phase in enumerate(PHASES, start=1):
            if n > 1:
                airflow = restarted(airflow, {**settings, "AIRFLOW__STORE_METRICS__COUNT_AT": phase}, phase)
            out[phase] = run_phase(airflow, receiver, request_log, n)
        yield Deployment(out, tmp / f"store-metrics-retry-claims-{os.getuid()}", retried(airflow))
    finally:
        airflow.stop()
        receiver.close()


def retried(airflow: Standalone) -> set[str]:
    """The retried attempts (try 2) of the DAG's last run, by task instance id."""
    (run_id,) = airflow.home.query(
        "select run_id from dag_run where dag_id = ? order by id desc limit 1", DAG_ID
    )[0]
    rows = airflow.home.query(
        "select id from task_instance where dag_id = ? and run_id = ? and try_number >= 2", DAG_ID, run_id
    )
    return {str(uuid.UUID(str(row[0]))) for row in rows}


@pytest.fixture(scope="module")
def phases(deployment: Deployment) -> dict[str, Phase]:
    return deployment.phases


def logged(request_log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in request_log.read_text().splitlines()] if request_log.exists() else []


def warm_up(airflow: Standalone, request_log: Path, timeout: float = 240) -> None:
    """Ask each API server worker's Execution API once before any task does.

    Measured here (Airflow 3.3.2, two workers, a loaded 2-core machine): a worker's first Execution
    API request holds its event loop for 9 to 36 s (the store-metrics stall monitor says so), and
    the task supervisors whose first requests waited behind it were answered 400 and their tries
    failed before running (which uses up a retry). So the test warms both workers first: a request
    on a new connection at a time, until the request log shows each worker has answered one.
    """
    seen = len(logged(request_log))

    def both_warm() -> bool:
        with httpx.Client(timeout=120) as client:  # a new connection: the kernel picks a worker
            client.get(f"http://127.0.0.1:{airflow.api_port}/execution/health")
        pids = {r["pid"] for r in logged(request_log)[seen:] if r["path"].endswith("/execution/health")}
        return len(pids) >= WORKERS

    wait_until(both_warm, timeout, interval=0.1)


def run_phase(airflow: Standalone, receiver: UdpReceiver, request_log: Path, runs: int) -> Phase:
    """Start, run the DAG once more, wait for its counts, stop: what the socket got and the requests."""
    airflow.start([DAG_ID])
    warm_up(airflow, request_log)
    start = len(receiver.lines_before_marker())
    logged_before = len(logged(request_log))
    airflow.trigger(DAG_ID)
    states = airflow.wait_for_runs(DAG_ID, runs, timeout=300)
    assert states == ["success"] * runs, airflow.log_tail()
    # Wait for the model's number of counts (a short count shows as a difference in the tests).
    wanted = sum(model(PAUSES).values())
    poll(lambda: sum(ours(receiver.lines()[start:]).values()) >= wanted, 30, interval=0.2)
    airflow.stop()  # every process exits, each having sent what it counted; then the marker
    received = ours(receiver.lines_before_marker()[start:])
    requests = logged(request_log)[logged_before:]
    return Phase(received, requests, airflow.log_path.read_text(errors="replace"))


@pytest.mark.parametrize("phase", PHASES)
def test_each_retried_attempt_counts_once_and_every_call_as_it_was(
    phases: dict[str, Phase], phase: str
) -> None:
    received = phases[phase].received
    assert received == model(PAUSES)
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


def reads(served: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An attempt's task store reads that were answered (found or absent), in order."""
    return [
        r for r in served if r["method"] == "GET" and "/store/ti/" in r["path"] and r["status"] in (200, 404)
    ]


def test_each_retry_is_decided_once_by_the_worker_that_served_its_first_read(deployment: Deployment) -> None:
    """With ``count_at = api_server`` the workers of the host claimed each retried attempt that read,
    once: the claim file (in the deployment's ``TMPDIR``) names the worker that served the attempt's
    first answered read and what it found, whichever workers served its later reads."""
    served = attempts(deployment.phases["api_server"].requests)
    claims = {path.name: path.read_text().split() for path in deployment.claims.iterdir()}
    retried = deployment.retried_attempts
    reading = {ti for ti in retried if reads(served.get(ti, []))}
    assert len(retried) == 5 and len(reading) == 4  # never_reads' retry has no read, and no claim
    assert set(claims) == reading
    for ti in reading:
        first = reads(served[ti])[0]
        assert claims[ti] == [str(first["pid"]), "resumed" if first["status"] == 200 else "not_resumed"]


def test_an_attempts_requests_spread_over_connections_and_workers(
    deployment: Deployment, record_property: Any
) -> None:
    """Why the host-wide claim: one attempt's requests are not one connection, nor one worker.

    The supervisor's HTTP client (httpx, keep-alive expiry 5 s) reuses a connection idle for less,
    and heartbeats come about every 5 s (``[workers] min_heartbeat_interval``): measured here, a
    request after an idle gap shorter than 4.5 s always came on the same connection, and one after
    5 s or more on a new one, which the kernel hands to either worker. Which worker is its choice:
    recorded (``record_property``), never required.
    """
    gaps: Counter[str] = Counter()
    spread = {}
    for phase, found in deployment.phases.items():
        for ti, served in attempts(found.requests).items():
            for before, after in itertools.pairwise(served):
                gap, same = after["time"] - before["time"], after["client"] == before["client"]
                if gap < KEEP_ALIVE - 0.5:
                    assert same, (before, after)
                band = (
                    "under 4.5 s"
                    if gap < KEEP_ALIVE - 0.5
                    else "5 s or more"
                    if gap >= KEEP_ALIVE
                    else "between"
                )
                gaps[f"{band}, {'same' if same else 'new'} connection"] += 1
            if len(reads(served)) == 1 + PAUSES:  # a reading retry (first tries read once)
                spread[f"{phase}:{ti}"] = {
                    "reads": len(reads(served)),
                    "connections": len({tuple(r["client"]) for r in served}),
                    "workers serving its reads": len({r["pid"] for r in reads(served)}),
                }
    record_property("gaps", json.dumps(gaps))
    record_property("retry_spread", json.dumps(spread))
    print(f"gaps between an attempt's requests: {dict(gaps)}; reading retries: {spread}")
    assert len(spread) == 4 * len(PHASES), spread  # four reading retries per phase
    assert gaps["under 4.5 s, same connection"] > 0
