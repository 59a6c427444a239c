"""``count_at = api_server`` under a real ``airflow standalone``: the API server counts what tasks counted.

Two deployments, each a real ``airflow standalone`` (LocalExecutor: every task its own short-lived
process) running the same DAG runs: the upstream proposal's four scenarios (scenario 2 twice),
three mapped instances of one task, an async task on its asset's store, an async task on its task
store (``aget``/``aset``/``adelete``/``aclear`` on Airflow 3.4; the sync methods on 3.3, which has
no others), and six tasks using the task store at once (at least four in parallel):

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
  by Airflow's own JWT generator are counted with that task instance's tags. A task cleared and
  re-run is counted as itself, and so are calls still made as its archived attempt (a write Airflow
  refuses with 410 Gone on 3.4: ``error``; a read answered 404: ``read_absent``).

Under ``dag.test()`` there is no API server: with ``count_at = api_server`` nothing is counted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.count_at_runs import (
    PYOP,
    Switching,
    task_series,
    task_store_is_async,
)
from testbed.airflow import make_home
from testbed.udp import UdpReceiver

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.peers]


def test_count_at_tasks_counts_each_call_once_on_the_task_side(switching: Switching) -> None:
    expected, received = switching.phases["tasks"]
    assert received == expected
    assert "count_at = api_server" not in switching.logs["tasks"]


@pytest.mark.parametrize("phase", ["tasks", "api_server"])
def test_the_async_task_used_the_async_task_store_methods_where_airflow_has_them(
    switching: Switching, phase: str
) -> None:
    """Its calls are in the exact totals above; here: on Airflow 3.4 they were aget/aset/..."""
    methods = "async" if task_store_is_async() else "sync"
    assert f"task store methods: {methods}" in switching.logs[phase]


def test_switching_to_api_server_counts_each_call_once_on_the_api_server(switching: Switching) -> None:
    expected, received = switching.phases["api_server"]
    # Scenario 2's asset key was written in the first phase: both its reads find it now.
    assert (
        expected[
            (
                "airflow.asset_state_store.read_found",
                task_series("state_store_metrics_02", "touch_asset_store", PYOP),
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


# -- under dag.test() there is no API server -------------------------------------------------------


def test_under_dag_test_count_at_api_server_counts_nothing(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    receiver = UdpReceiver()
    try:
        env = home.env(
            AIRFLOW__STORE_METRICS__COUNT_AT="api_server",
            AIRFLOW__STORE_METRICS__BACKEND="dogstatsd",
            AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
            AIRFLOW__STORE_METRICS__PORT=str(receiver.port),
        )
        result = home.run(tmp_path, ["state_store_metrics_01"], env)
        assert result["runs"] == [["state_store_metrics_01", "success"]]
        assert result["configured"] is False
        assert "the task process counts nothing" in result["log"]
        assert receiver.lines_before_marker() == []
    finally:
        receiver.close()
