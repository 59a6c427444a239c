"""``count_at = api_server`` under the CeleryExecutor: workers with no metrics configuration at all.

The deployment of ``tests/airflow/test_celery.py`` (a real ``redis-server``; ``airflow api-server``,
``scheduler``, ``dag-processor``; two ``airflow celery worker`` processes, concurrency 2, each with
its own host name), except for where ``[store_metrics]`` is set: only the API server has it
(``count_at = api_server``, DogStatsD to a real UDP socket). The Celery workers get no
``[store_metrics]`` and no ``[metrics]`` setting, as a deployment that configures metrics on the
API server alone. The same three runs of mapped sync (task store) and async (asset store) tasks,
spread over both workers, must arrive on the socket as exactly the totals the task side counts in
``test_celery.py``, with the same names and tags.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.barriers import api_server_marker
from support.celery import (
    DAG_ID,
    RUNS,
    celery_cluster,
    dag_totals,
    expected_totals,
    run_over_both_workers,
    start_workers,
)
from support.cluster import Cluster, Process, dag_module
from support.totals import Key
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.celery]


@pytest.fixture(scope="module")
def receiver() -> Iterator[UdpReceiver]:
    udp = UdpReceiver()
    yield udp
    udp.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, receiver: UdpReceiver) -> Iterator[Cluster]:
    with celery_cluster(tmp_path_factory.mktemp("celery-count-at")) as airflow:
        # No component gets a [store_metrics] setting from the shared environment: only the API server's own.
        for name in [k for k in airflow.env if k.startswith("AIRFLOW__STORE_METRICS__")]:
            del airflow.env[name]
        airflow.start(
            [DAG_ID],
            AIRFLOW__STORE_METRICS__COUNT_AT="api_server",
            AIRFLOW__STORE_METRICS__BACKEND="dogstatsd",
            AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
            AIRFLOW__STORE_METRICS__PORT=str(receiver.port),
            AIRFLOW__STORE_METRICS__FLUSH_INTERVAL="1",
        )
        yield airflow


def start_count_at_workers(cluster: Cluster, barrier: Path) -> list[Process]:
    """Two Celery workers with no [store_metrics] and no [metrics] configuration."""
    workers = start_workers(cluster, "count-at", barrier)
    assert not any(k.startswith(("AIRFLOW__STORE_METRICS__", "AIRFLOW__METRICS__")) for k in cluster.env)
    return workers


def test_the_api_server_counts_what_celery_workers_without_metrics_configuration_call(
    cluster: Cluster, receiver: UdpReceiver, tmp_path: Path
) -> None:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    started = time.monotonic()
    workers = start_count_at_workers(cluster, barrier)
    try:
        instances, hosts = run_over_both_workers(cluster, "count-at")
        expected = expected_totals(RUNS)

        def ours() -> Counter[Key]:
            return dag_totals(receiver.lines(), "dogstatsd")

        # The API server flushes every second: wait for the totals, then for one more count the
        # API server makes and sends after them (a barrier: anything counted twice is in by then).
        with contextlib.suppress(AssertionError):  # if they never arrive, the comparison says which
            wait_until(lambda: sum(ours().values()) >= sum(expected.values()), 30)
        api_server_marker(cluster.api_port, receiver, "dogstatsd")
        assert ours() == expected, (hosts, cluster.tails(1500))
        # The workers' task processes stood down ([store_metrics] count_at is per component: the
        # workers' default, tasks, with the default backend following an empty [metrics], counts
        # into nothing); the series above all came from the API server.
        api_server = next(p for p in cluster.processes if p.name == "api-server")
        assert re.search(r"count_at = api_server: API server worker \S+ counts", api_server.text())
        print(
            f"celery count_at=api_server: {len(instances)} task instances on {dict(hosts)} in "
            f"{time.monotonic() - started:.1f} s"
        )
    finally:
        cluster.stop_processes(workers)


def test_one_metadata_query_per_task_instance(cluster: Cluster, receiver: UdpReceiver) -> None:
    """Stopping the API server (one worker) logs what its attribution did: one query per task instance."""
    api_server = next(p for p in cluster.processes if p.name == "api-server")
    cluster.stop_processes([api_server])
    summary = re.findall(
        r"(\d+) state store requests counted, (\d+) cache hits, (\d+) misses \(([\d.]+)% hit rate\), "
        r"(\d+) metadata queries \((\d+) failed",
        api_server.text(),
    )
    assert len(summary) == 1, api_server.tail()
    requests, hits, misses, _rate, queries, failed = (float(x) for x in summary[0])
    dag = dag_module(DAG_ID)
    instances = RUNS * (dag.CRUNCH_PARTS + dag.ADVANCE_PARTS)
    calls = sum(expected_totals(RUNS).values())
    # Every call attributed to its task instance; one more request, the barrier of the test above
    # (no token: counted as unknown, attributed to no task instance).
    assert hits + misses == calls and requests == calls + 1
    assert queries == instances and failed == 0
    print(f"attribution: {summary[0]}")
