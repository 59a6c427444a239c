"""The UI tests' main DAG: task state per task (mapped too, one entry expired), asset state on two assets."""

from datetime import datetime, timedelta

from airflow.sdk import DAG, Asset, task

ORDERS = Asset(name="ui/orders", uri="s3://ui/orders")
CUSTOMERS = Asset(name="ui/customers", uri="s3://ui/customers")

with DAG("store_metrics_ui_orders", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task
    def extract(task_state_store=None):
        store = task_state_store
        store.get("cursor")  # absent
        store.set("cursor", {"offset": 1200, "done": False})
        store.set("job_id", "job-7f3a")
        store.get("cursor")  # found
        store.set("scratch", "x" * 300, retention=timedelta(hours=-1))  # already expired

    @task
    def transform(part, task_state_store=None):
        task_state_store.get("part")  # absent
        task_state_store.set("part", "p" * (100 * (part + 1)))

    @task(outlets=[ORDERS])
    def load(asset_state_store=None):
        asset_state_store[ORDERS].get("watermark")  # absent
        asset_state_store[ORDERS].set("watermark", "2026-12-01T00:00:00+00:00")
        asset_state_store[ORDERS].set("rows", 1200)

    @task(outlets=[CUSTOMERS])
    def enrich(asset_state_store=None, task_state_store=None):
        asset_state_store[CUSTOMERS].get("snapshot")  # absent
        asset_state_store[CUSTOMERS].set("snapshot", {"customers": 3, "source": "crm"})
        task_state_store.set("done", True)
        task_state_store.delete("done")

    extract() >> transform.expand(part=[0, 1, 2]) >> load() >> enrich()
