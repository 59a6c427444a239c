"""End to end under ``airflow standalone``: LocalExecutor, every task a short-lived process.

Six tasks use the task store at the same time (a file barrier proves at least four ran at
once); the DogStatsD or InfluxDB-StatsD lines received on a real UDP socket must add up to
exactly the calls they made: nothing lost when a task process exits right after its last call.
The async accessors (aget/aset/adelete/aclear) are exercised here, where the task runs with
real supervisor comms.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.airflow import Standalone
from support.totals import totals
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

PYOP = "_PythonDecoratedOperator"
WORKERS = 6
PER_WORKER = {"write": 20, "read_found": 20, "read_absent": 5, "delete": 3, "clear": 1}


def series(dag_id: str, task_id: str) -> tuple[tuple[str, str], ...]:
    return (("dag_id", dag_id), ("task_id", task_id), ("run_type", "manual"), ("operator", PYOP))


@pytest.fixture(params=["dogstatsd", "statsd"], scope="module")
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Standalone, UdpReceiver, Path]]:
    backend = request.param
    root = tmp_path_factory.mktemp(f"standalone-{backend}")
    barrier = root / "barrier"
    barrier.mkdir()
    receiver = UdpReceiver()
    airflow = Standalone(
        root,
        free_port(),
        {
            "AIRFLOW__STORE_METRICS__BACKEND": backend,
            "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
            "AIRFLOW__STORE_METRICS__PORT": str(receiver.port),
            "STORE_METRICS_TEST_BARRIER": str(barrier),
        },
    )
    try:
        airflow.start(["store_metrics_concurrent", "store_metrics_async_assets"])
        yield backend, airflow, receiver, barrier
    finally:
        airflow.stop()
        receiver.close()


def test_concurrent_task_processes_lose_nothing(
    deployment: tuple[str, Standalone, UdpReceiver, Path],
) -> None:
    backend, airflow, receiver, barrier = deployment
    airflow.trigger("store_metrics_concurrent")
    assert airflow.wait_for_runs("store_metrics_concurrent", 1) == ["success"], airflow.log_tail()
    assert len(list(barrier.iterdir())) == WORKERS  # every worker passed the 4-at-once barrier

    expected = {
        (f"airflow.task_state_store.{outcome}", series("store_metrics_concurrent", f"worker_{n}")): calls
        for n in range(WORKERS)
        for outcome, calls in PER_WORKER.items()
    }
    style = "dogstatsd" if backend == "dogstatsd" else "influx"

    def ours() -> dict:
        got = totals(receiver.lines(), style)
        return {k: v for k, v in got.items() if dict(k[1]).get("dag_id") == "store_metrics_concurrent"}

    # The task processes have exited; their lines are on the socket or about to be read.
    wait_until(lambda: sum(ours().values()) >= sum(expected.values()), 15)
    assert ours() == expected


def test_async_accessors_under_a_real_executor(deployment: tuple[str, Standalone, UdpReceiver, Path]) -> None:
    backend, airflow, receiver, _ = deployment
    airflow.trigger("store_metrics_async_assets")
    assert airflow.wait_for_runs("store_metrics_async_assets", 1) == ["success"], airflow.log_tail()
    style = "dogstatsd" if backend == "dogstatsd" else "influx"
    expected = {
        (f"airflow.asset_state_store.{outcome}", series("store_metrics_async_assets", "async_watermark")): 1
        for outcome in ("write", "read_found", "delete", "read_absent", "clear")
    }

    def ours() -> dict:
        got = totals(receiver.lines(), style)
        return {k: v for k, v in got.items() if dict(k[1]).get("dag_id") == "store_metrics_async_assets"}

    wait_until(lambda: sum(ours().values()) >= 5, 15)
    assert ours() == expected
