"""State store calls whose server side is checked: task and asset stores, a key with '/', a 689 KB value.

Every call and its expected outcome, task side and API server side, are in ``CALLS``
(tests/airflow/test_server_airflow.py reads it): the Execution API request each call becomes must be
counted by the API server with the same store and outcome as the task's own counter.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Asset, task

WATERMARKS = Asset(name="store_metrics_test/server", uri="s3://bucket/server")
#: An integer array of 688,899 bytes of JSON as sent (no spaces): the proposal's 688.9 KB value.
BIG = list(range(100_000, 198_414))

#: (store, outcome) -> calls, what the two tasks below make.
CALLS = {
    ("task", "read_absent"): 1,
    ("task", "write"): 3,
    ("task", "read_found"): 3,
    ("task", "delete"): 1,
    ("task", "clear"): 1,
    ("asset", "write"): 1,
    ("asset", "read_found"): 1,
    ("asset", "read_absent"): 1,
    ("asset", "delete"): 1,
    ("asset", "clear"): 1,
}

with DAG(dag_id="store_metrics_server_calls", schedule=None, start_date=datetime(2026, 1, 1)) as dag:

    @task
    def task_store(**context):
        store = context["task_state_store"]
        assert store.get("missing", "absent") == "absent"
        store.set("small", {"n": 1})
        assert store.get("small") == {"n": 1}
        store.set("dir/key", 2)  # a key with '/': still one task store route
        assert store.get("dir/key") == 2
        store.set("big", BIG)
        assert store.get("big") == BIG
        store.delete("small")
        store.clear()

    @task(inlets=[WATERMARKS], outlets=[WATERMARKS])
    def asset_store(**context):
        store = context["asset_state_store"]
        store.set("watermark", "2026-01-01")
        assert store.get("watermark") == "2026-01-01"
        assert store.get("nope", "none") == "none"
        store.delete("watermark")
        store.clear()

    task_store() >> asset_store()
