"""Store calls that raise: the task sees Airflow's own exception, unchanged.

``set(key, None)`` is refused by the real accessor (ValueError), and the single-asset sugar is
refused when a task has two assets (ValueError). The task records what it caught in the file
named by STORE_METRICS_TEST_OUT so the test can compare it with what the unwrapped accessor says.
"""

from __future__ import annotations

import json
import os
from datetime import datetime

from airflow.sdk import DAG, Asset, task

A = Asset(name="store_metrics_test/err_a", uri="s3://bucket/err_a")
B = Asset(name="store_metrics_test/err_b", uri="s3://bucket/err_b")

with DAG(dag_id="store_metrics_errors", schedule=None, start_date=datetime(2026, 1, 1)) as dag:

    @task(inlets=[A, B])
    def refuse(**context):
        import store_metrics

        caught = {}
        task_store = context["task_state_store"]
        try:
            task_store.set("job_id", None)
        except ValueError as exc:
            bare = store_metrics.unwrap(task_store)
            try:
                bare.set("job_id", None)
            except ValueError as bare_exc:
                caught["set"] = [type(exc).__name__, str(exc), type(bare_exc).__name__, str(bare_exc)]
        try:
            context["asset_state_store"].get("watermark")
        except ValueError as exc:
            caught["asset_get"] = [type(exc).__name__, str(exc)]
        with open(os.environ["STORE_METRICS_TEST_OUT"], "w") as f:
            json.dump(caught, f)

    @task
    def fail_on_none(**context):
        # Not caught: the task fails with the accessor's own error.
        context["task_state_store"].set("job_id", None)

    refuse() >> fail_on_none()
