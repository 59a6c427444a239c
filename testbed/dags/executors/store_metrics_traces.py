"""Two retried tasks, for the traces test: one whose retry resumes, one whose retry starts over.

``resumes``: try 1 saves its job id and fails; try 2 reads it back (found: the retry resumed) and
finishes. ``starts_over``: try 1 reads, finds nothing and fails before saving anything; try 2 reads
again (absent: the retry started over), saves, and finishes. Retries follow at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, task

with DAG(
    dag_id="store_metrics_traces",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=0)},
) as dag:

    @task
    def resumes(**context: Any) -> None:
        store = context["task_state_store"]
        if context["ti"].try_number == 1:
            store.set("job_id", "j-1")
            raise RuntimeError("the job's first try failed after it was submitted")
        assert store.get("job_id") == "j-1"

    @task
    def starts_over(**context: Any) -> None:
        store = context["task_state_store"]
        if context["ti"].try_number == 1:
            assert store.get("job_id") is None
            raise RuntimeError("the first try failed before it submitted anything")
        assert store.get("job_id") is None
        store.set("job_id", "j-2")

    resumes()
    starts_over()
