"""A DAG the test's viewer may not read: the largest task state, two expired entries, a shared asset."""

from datetime import datetime, timedelta

from airflow.sdk import DAG, Asset, task

CUSTOMERS = Asset(name="ui/customers", uri="s3://ui/customers")

with DAG("store_metrics_ui_secret", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task(outlets=[CUSTOMERS])
    def stash(task_state_store=None, asset_state_store=None):
        task_state_store.set("blob", "S" * 20000)
        task_state_store.set("old_a", "a", retention=timedelta(hours=-2))
        task_state_store.set("old_b", "b", retention=timedelta(minutes=-5))
        asset_state_store[CUSTOMERS].set("audit", "secret-dag-was-here")

    stash()
