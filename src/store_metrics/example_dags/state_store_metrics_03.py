"""Scenario 3 of the upstream proposal: delete and clear.

Expected: task write=2, delete=1, clear=1; asset write=1, delete=1.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Asset, task

METRICS_ASSET = Asset(name="state_store_metrics/asset3", uri="s3://bucket/metrics3")

with DAG(
    dag_id="state_store_metrics_03",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
) as dag:

    @task(inlets=[METRICS_ASSET], outlets=[METRICS_ASSET])
    def delete_and_clear(**context: Any) -> None:
        task_store = context["task_state_store"]
        asset_store = context["asset_state_store"]
        task_store.set("a", 1)
        task_store.set("b", 2)
        task_store.delete("a")
        task_store.clear()
        asset_store.set("w", "x")
        asset_store.delete("w")

    delete_and_clear()
