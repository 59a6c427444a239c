"""Retried tasks: does each retry resume? What ``tests/airflow/test_retries_standalone.py`` runs.

Every task fails its first try on purpose (except ``first_try_success``) and is retried once:

* ``saves_then_fails``: saves its progress, then fails; its retry finds it (``retry_resumed``);
* ``fails_before_saving``: reads (nothing there) and fails before saving; its retry finds nothing
  (``retry_not_resumed``), then saves;
* ``never_reads``: fails; its retry writes and deletes but never reads (neither counter);
* ``first_try_success``: reads, saves, succeeds at once (neither counter);
* ``mapped``: three map indexes, each its own attempt: 0 succeeds at once, 1 saves then fails
  (its retry resumes), 2 fails before saving (its retry starts over).

A retry that reads reads again after idle pauses longer than the Task SDK's HTTP keep-alive (5 s):
each pause makes the supervisor open a new connection, which the API server's kernel may hand to
another worker. ``STORE_METRICS_TEST_PAUSE`` (seconds) sets the pause; 0 leaves it out.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta

from airflow.sdk import DAG, task

PAUSES = 2


def read_again_later(store, key: str) -> None:
    pause = float(os.environ.get("STORE_METRICS_TEST_PAUSE", "0"))
    for _ in range(PAUSES if pause else 0):
        time.sleep(pause)
        store.get(key)


with DAG(
    dag_id="store_metrics_retries",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=0)},
) as dag:

    @task
    def saves_then_fails(**context):
        store = context["task_state_store"]
        if store.get("progress") is None:
            store.set("progress", 1)
            raise RuntimeError("failed after saving its progress")
        read_again_later(store, "progress")

    @task
    def fails_before_saving(**context):
        store = context["task_state_store"]
        assert store.get("progress") is None  # never saved: both tries find nothing
        if context["ti"].try_number == 1:
            raise RuntimeError("failed before saving anything")
        store.set("progress", 1)
        read_again_later(store, "progress")

    @task
    def never_reads(**context):
        if context["ti"].try_number == 1:
            raise RuntimeError("failed before touching the store")
        store = context["task_state_store"]
        store.set("done", True)
        store.delete("done")

    @task
    def first_try_success(**context):
        store = context["task_state_store"]
        store.get("progress")
        store.set("progress", 1)

    @task
    def mapped(n: int, **context):
        store = context["task_state_store"]
        found = store.get("progress")
        if context["ti"].try_number == 1 and n > 0:
            if n == 1:
                store.set("progress", n)
            raise RuntimeError(f"map index {n} fails its first try")
        if n > 0:
            assert (found is not None) == (n == 1)
            read_again_later(store, "progress")

    saves_then_fails()
    fails_before_saving()
    never_reads()
    first_try_success()
    mapped.expand(n=[0, 1, 2])
