"""Scenario 2 of the upstream proposal: one task touching both the asset store and the task store.

Expected per run: asset read (absent on the first run, found on the second), asset write=1,
task read_absent=1 (the task store is scoped to the run, so it is empty every time).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Asset, task

METRICS_ASSET = Asset(name="state_store_metrics/asset", uri="s3://bucket/metrics")

with DAG(
    dag_id="state_store_metrics_02",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
) as dag:

    @task(inlets=[METRICS_ASSET], outlets=[METRICS_ASSET])
    def touch_asset_store(**context: Any) -> None:
        task_store = context["task_state_store"]
        asset_store = context["asset_state_store"]
        print("asset read:", asset_store.get("watermark"))
        asset_store.set("watermark", "2026-01-01")
        print("task read:", task_store.get("counter"))

    touch_asset_store()
