"""A task with two assets, addressing each one's store by subscript: store[ASSET]."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Asset, task

ORDERS = Asset(name="store_metrics_test/orders", uri="s3://bucket/orders")
CUSTOMERS = Asset(name="store_metrics_test/customers", uri="s3://bucket/customers")

with DAG(dag_id="store_metrics_two_assets", schedule=None, start_date=datetime(2026, 1, 1)) as dag:

    @task(inlets=[ORDERS, CUSTOMERS], outlets=[ORDERS])
    def sync_both(**context):
        stores = context["asset_state_store"]
        stores[ORDERS].set("watermark", "2026-01-02")
        assert stores[CUSTOMERS].get("watermark") is None
        assert stores[ORDERS].get("watermark") == "2026-01-02"
        stores[ORDERS].delete("watermark")

    sync_both()
