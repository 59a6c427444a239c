"""Offloaded state: values a worker-side backend keeps elsewhere, the database their references."""

from datetime import datetime, timedelta

from airflow.sdk import DAG, Asset, task

OFFLOADED = Asset(name="inventory/offloaded", uri="s3://inventory/offloaded")

with DAG("inventory_offloaded", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:

    @task
    def offloaded(task_state_store=None):
        task_state_store.set("big", "B" * 10000)
        task_state_store.set("small", "s", retention=timedelta(hours=-1))

    @task(outlets=[OFFLOADED])
    def offloaded_asset(asset_state_store=None):
        asset_state_store[OFFLOADED].set("state", {"x": 1})

    offloaded() >> offloaded_asset()
