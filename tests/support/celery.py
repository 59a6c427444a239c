"""The CeleryExecutor deployment of ``tests/airflow/test_celery.py`` and ``test_count_at_celery.py``.

A real ``redis-server`` (broker and result backend) under a ``Cluster``,
two ``airflow celery worker`` processes with concurrency 2, each with its own host name, the runs
of the DAG ``store_metrics_celery`` (``testbed/dags/executors/``) over both, and the totals they
must add up to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.cluster import Cluster, Process, Redis, dag_module
from support.totals import Key, totals

DAG_ID = "store_metrics_celery"
PYOP = "_PythonDecoratedOperator"
RUNS = 3
WORKERS = ("worker-a", "worker-b")


@contextmanager
def celery_cluster(root: Path) -> Iterator[Cluster]:
    """A ``Cluster`` (not started yet) with the CeleryExecutor over a real Redis, and the DAG
    ``DAG_ID``; every process stopped on the way out."""
    redis = Redis(root / "redis")
    try:
        airflow = Cluster(
            root,
            [f"{DAG_ID}.py"],
            {
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__CELERY__BROKER_URL": f"{redis.url}/0",
                "AIRFLOW__CELERY__RESULT_BACKEND": f"{redis.url}/1",
                "AIRFLOW__CORE__PARALLELISM": "8",
            },
        )
        try:
            yield airflow
        finally:
            airflow.stop()
    finally:
        redis.stop()


def start_workers(cluster: Cluster, suffix: str, barrier: Path, **env: str) -> list[Process]:
    """The two Celery workers (host names ``<worker>-<suffix>``), with ``env`` on top of the
    cluster's; returns once both are ready."""
    workers = []
    for name in WORKERS:
        hostname = f"{name}-{suffix}"
        workers.append(
            cluster.spawn(
                hostname,
                [
                    *("celery", "worker", "--concurrency", "2", "--skip-serve-logs"),
                    *("--celery-hostname", f"{hostname}@store-metrics-test"),
                ],
                AIRFLOW__CORE__HOSTNAME_CALLABLE="support.hostnames.from_env",
                STORE_METRICS_TEST_HOSTNAME=hostname,
                STORE_METRICS_TEST_BARRIER=str(barrier),
                **env,
            )
        )
    cluster.wait(
        lambda: all(f"{w.name}@store-metrics-test ready." in w.text() for w in workers),
        120,
        "both Celery workers ready",
    )
    return workers


def expected_totals(run_count: int) -> Counter[Key]:
    """What ``run_count`` runs of the DAG must send, per series (names with the prefix ``airflow``)."""
    dag = dag_module(DAG_ID)

    def series(task_id: str) -> tuple[tuple[str, str], ...]:
        return (("dag_id", DAG_ID), ("task_id", task_id), ("run_type", "manual"), ("operator", PYOP))

    expected: Counter[Key] = Counter()
    for outcome, calls in dag.TASK_CALLS.items():
        expected[(f"airflow.task_state_store.{outcome}", series("crunch"))] = (
            calls * dag.CRUNCH_PARTS * run_count
        )
    for outcome, calls in dag.ASSET_CALLS.items():
        expected[(f"airflow.asset_state_store.{outcome}", series("advance"))] = (
            calls * dag.ADVANCE_PARTS * run_count
        )
    return expected


def run_over_both_workers(cluster: Cluster, suffix: str) -> tuple[list[dict[str, Any]], Counter[str]]:
    """``RUNS`` runs of the DAG (run ids ``<suffix>-<n>``) on the workers ``start_workers`` started
    with ``suffix``: every run succeeds, every task instance once and on its first try (no retry
    hides a lost count), and both workers ran tasks. The runs' task instances, and their count by host."""
    run_ids = [f"{suffix}-{n}" for n in range(RUNS)]
    for run_id in run_ids:
        cluster.trigger(DAG_ID, run_id)
    states = cluster.wait_for_runs(DAG_ID, run_ids, 150)
    assert states == dict.fromkeys(run_ids, "success"), cluster.tails()
    dag = dag_module(DAG_ID)
    instances = [ti for ti in cluster.task_instances(DAG_ID) if ti["run_id"] in run_ids]
    assert len(instances) == RUNS * (dag.CRUNCH_PARTS + dag.ADVANCE_PARTS)
    assert {ti["state"] for ti in instances} == {"success"}
    assert {ti["try_number"] for ti in instances} == {1}
    hosts = Counter(ti["hostname"] for ti in instances)
    assert set(hosts) == {f"{w}-{suffix}" for w in WORKERS}, hosts
    return instances, hosts


def dag_totals(lines: list[str], style: str) -> Counter[Key]:
    """The totals of ``lines`` (``style``: ``dogstatsd`` or ``influx``) for the DAG's series only."""
    return Counter({k: v for k, v in totals(lines, style).items() if dict(k[1]).get("dag_id") == DAG_ID})
