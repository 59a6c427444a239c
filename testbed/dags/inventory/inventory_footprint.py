"""The inventory's footprint: task and asset state of every kind (expired, mapped, cleared)."""

from datetime import datetime, timedelta

from airflow.sdk import DAG, NEVER_EXPIRE, Asset, task

ORDERS = Asset(name="inventory/orders", uri="s3://inventory/orders")
EVENTS = Asset(name="inventory/events", uri="s3://inventory/events")

with DAG("inventory_footprint", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:

    @task
    def writer(task_state_store=None):
        task_state_store.set("job_id", "job-123")
        task_state_store.set("cursor", {"offset": 42, "done": False})
        task_state_store.set("stale", "old", retention=timedelta(hours=-1))
        task_state_store.set("stale2", [1, 2, 3], retention=timedelta(seconds=-5))
        task_state_store.set("keep", "x" * 5000, retention=NEVER_EXPIRE)

    @task
    def mapped(i, task_state_store=None):
        task_state_store.set("part", "p" * (10 * (i + 1)))
        if i == 2:
            task_state_store.set("tmp", i, retention=timedelta(hours=-1))

    @task
    def cleaner(task_state_store=None):
        s = task_state_store
        s.set("a", 1)
        s.set("b", 2)
        s.delete("a")
        s.set("c", 3)
        s.clear()
        s.set("d", "after-clear")

    @task(outlets=[ORDERS, EVENTS])
    def assets(asset_state_store=None):
        asset_state_store[ORDERS].set("watermark", "2026-01-01T00:00:00+00:00")
        asset_state_store[ORDERS].set("blob", "z" * 2000)
        asset_state_store[EVENTS].set("seen", 7)

    writer() >> mapped.expand(i=[0, 1, 2]) >> cleaner() >> assets()
