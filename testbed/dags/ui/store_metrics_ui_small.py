"""The UI tests' smallest DAG: one entry."""

from datetime import datetime

from airflow.sdk import DAG, task

with DAG("store_metrics_ui_small", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task
    def note(task_state_store=None):
        task_state_store.set("seen", 1)
        task_state_store.get("seen")  # found

    note()
