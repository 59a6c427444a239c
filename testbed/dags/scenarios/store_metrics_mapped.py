"""A mapped task: three instances, each reads a missing key then writes it."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

with DAG(dag_id="store_metrics_mapped", schedule=None, start_date=datetime(2026, 1, 1)) as dag:

    @task
    def resume_or_start(part, **context):
        store = context["task_state_store"]
        if store.get("progress") is None:
            store.set("progress", part)

    resume_or_start.expand(part=[1, 2, 3])
