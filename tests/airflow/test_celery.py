"""End to end under the CeleryExecutor: a real Redis, two Celery workers, exact totals on a real socket.

One deployment for the module: ``redis-server`` on a free port, then ``airflow api-server``,
``scheduler`` (CeleryExecutor) and ``dag-processor``, each its own process. Per backend (DogStatsD,
then StatsD with InfluxDB tags) two ``airflow celery worker`` processes start with concurrency 2,
each with its own host name (``[core] hostname_callable``) and the plugin configured only by
``AIRFLOW__STORE_METRICS__*``; three DAG runs of mapped tasks (sync task store calls, async asset
store calls) are spread over both. The lines the task processes sent must add up, series for
series, to exactly the calls they made, and the task instances must show both workers' host names.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.celery import (
    DAG_ID,
    RUNS,
    celery_cluster,
    dag_totals,
    expected_totals,
    run_over_both_workers,
    start_workers,
)
from support.cluster import Cluster, dag_module
from testbed.udp import UdpReceiver

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.celery]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with celery_cluster(tmp_path_factory.mktemp("celery")) as airflow:
        airflow.start([DAG_ID])
        yield airflow


@pytest.mark.parametrize("backend", ["dogstatsd", "statsd"])
def test_two_celery_workers_exact_totals(cluster: Cluster, backend: str, tmp_path: Path) -> None:
    receiver = UdpReceiver()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    started = time.monotonic()
    workers = start_workers(
        cluster,
        backend,
        barrier,
        AIRFLOW__STORE_METRICS__BACKEND=backend,
        AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
        AIRFLOW__STORE_METRICS__PORT=str(receiver.port),
    )
    try:
        instances, hosts = run_over_both_workers(cluster, backend)
        # The barrier: at least three crunch instances ran at once (so on both workers).
        assert len(list(barrier.iterdir())) == RUNS * dag_module(DAG_ID).CRUNCH_PARTS

        style = "dogstatsd" if backend == "dogstatsd" else "influx"
        # Every task process has exited: whatever it sent is ahead of a marker sent now.
        receiver.lines_before_marker()
        assert dag_totals(receiver.lines(), style) == expected_totals(RUNS), (hosts, cluster.tails(1500))
        took = time.monotonic() - started
        print(f"{backend}: {len(instances)} task instances on {dict(hosts)}; {took:.1f} s with worker start")
    finally:
        cluster.stop_processes(workers)
        receiver.close()
