"""Scenario 1 of the upstream proposal: a plain @task reads a missing key, writes it, reads it back.

Expected: task_state_store read_absent=1, write=1, read_found=1.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

with DAG(
    dag_id="state_store_metrics_01",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
) as dag:

    @task
    def touch_store(**context: Any) -> None:
        store = context["task_state_store"]
        print("first read:", store.get("counter"))
        store.set("counter", 1)
        print("second read:", store.get("counter"))

    touch_store()
