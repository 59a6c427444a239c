"""Retried tasks and a failing call: what the dashboard's Retries and Errors rows show (not one of the
proposal's scenarios; ``store-metrics demo`` runs it after them).

Two tasks fail their first try on purpose and are retried at once:

* ``resumes``: saves its progress, then fails; its retry finds it: ``retry_resumed``;
* ``starts_over``: reads (nothing there) and fails before saving; its retry finds nothing:
  ``retry_not_resumed``, then saves.

``clears_a_cursor`` makes a call the store refuses: ``set()`` with ``None`` (the Task SDK raises
``ValueError``; ``delete()`` is how a key is removed), counted as ``error`` with ``operation="set"``;
the task catches it and deletes the key instead.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, task

with DAG(
    dag_id="example_retries",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "retries", "task-store"],
    default_args={"retries": 1, "retry_delay": timedelta(seconds=0)},
) as dag:

    @task
    def resumes(**context: Any) -> None:
        store = context["task_state_store"]
        if store.get("progress") is None:
            store.set("progress", 1)
            raise RuntimeError("failed after saving its progress: the retry resumes from it")

    @task
    def starts_over(**context: Any) -> None:
        store = context["task_state_store"]
        store.get("progress")
        if context["ti"].try_number == 1:
            raise RuntimeError("failed before saving anything: the retry starts over")
        store.set("progress", 1)

    @task
    def clears_a_cursor(**context: Any) -> None:
        store = context["task_state_store"]
        try:
            store.set("cursor", None)  # refused: None is not a value
        except ValueError:
            store.delete("cursor")

    resumes()
    starts_over()
    clears_a_cursor()
