"""The CeleryExecutor deployment of ``tests/airflow/test_celery.py`` and ``test_count_at_celery.py``.

A real ``redis-server`` (broker and result backend) under a ``Cluster``,
two ``airflow celery worker`` processes with concurrency 2, each with its own host name, and the
totals the DAG ``store_metrics_celery`` (``testbed/dags/executors/``) must add up to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.cluster import Cluster, Process, Redis, dag_module
from support.totals import Key

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
