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
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.celery import DAG_ID, RUNS, WORKERS, celery_cluster, expected_totals, start_workers
from support.cluster import Cluster, dag_module
from support.totals import Key, totals
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
        run_ids = [f"{backend}-{n}" for n in range(RUNS)]
        for run_id in run_ids:
            cluster.trigger(DAG_ID, run_id)
        states = cluster.wait_for_runs(DAG_ID, run_ids, 150)
        assert states == dict.fromkeys(run_ids, "success"), cluster.tails()

        dag = dag_module(DAG_ID)
        instances = [ti for ti in cluster.task_instances(DAG_ID) if ti["run_id"] in run_ids]
        assert len(instances) == RUNS * (dag.CRUNCH_PARTS + dag.ADVANCE_PARTS)
        assert {ti["state"] for ti in instances} == {"success"}
        assert {ti["try_number"] for ti in instances} == {1}  # no retry hides a lost count
        hosts = Counter(ti["hostname"] for ti in instances)
        assert set(hosts) == {f"{w}-{backend}" for w in WORKERS}, hosts  # both workers ran tasks
        # The barrier: at least three crunch instances ran at once (so on both workers).
        assert len(list(barrier.iterdir())) == RUNS * dag.CRUNCH_PARTS

        style = "dogstatsd" if backend == "dogstatsd" else "influx"
        expected = expected_totals(RUNS)

        def ours() -> Counter[Key]:
            got = totals(receiver.lines(), style)
            return Counter({k: v for k, v in got.items() if dict(k[1]).get("dag_id") == DAG_ID})

        # Every task process has exited: whatever it sent is ahead of a marker sent now.
        receiver.lines_before_marker()
        assert ours() == expected, (hosts, cluster.tails(1500))
        took = time.monotonic() - started
        print(f"{backend}: {len(instances)} task instances on {dict(hosts)}; {took:.1f} s with worker start")
    finally:
        cluster.stop_processes(workers)
        receiver.close()
