"""An async @task using aget/aset/adelete/aclear on its single asset's store (the sugar form)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Asset, task

WATERMARKS = Asset(name="store_metrics_test/async", uri="s3://bucket/async")

with DAG(dag_id="store_metrics_async_assets", schedule=None, start_date=datetime(2026, 1, 1)) as dag:

    @task(inlets=[WATERMARKS], outlets=[WATERMARKS])
    async def async_watermark(**context):
        store = context["asset_state_store"]
        await store.aset("watermark", "2026-01-01")
        assert await store.aget("watermark") == "2026-01-01"
        await store.adelete("watermark")
        assert await store.aget("watermark", "none") == "none"
        await store.aclear()

    async_watermark()
