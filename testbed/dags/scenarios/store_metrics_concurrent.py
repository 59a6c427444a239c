"""Six tasks that use the task store at the same time, each in its own short-lived process.

Each task waits at a file barrier (STORE_METRICS_TEST_BARRIER) until at least four tasks are
running at once, then makes a known number of calls and ends; the test checks that the lines
received add up to exactly those calls.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, task

TASKS = 6
CONCURRENT = 4
CALLS = {"write": 20, "read_found": 20, "read_absent": 5, "delete": 3, "clear": 1}

with DAG(dag_id="store_metrics_concurrent", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    for n in range(TASKS):

        @task(task_id=f"worker_{n}")
        def worker(**context):
            barrier = Path(os.environ["STORE_METRICS_TEST_BARRIER"])
            me = barrier / context["ti"].task_id
            me.touch()
            deadline = time.monotonic() + 120
            # Wait (bounded) until enough tasks are running at once; the files prove it afterwards.
            while len(list(barrier.iterdir())) < CONCURRENT:
                if time.monotonic() > deadline:
                    raise TimeoutError("fewer than 4 tasks ran at once")
                time.sleep(0.05)
            store = context["task_state_store"]
            for i in range(CALLS["write"]):
                store.set(f"step-{i}", i)
                assert store.get(f"step-{i}") == i
            for i in range(CALLS["read_absent"]):
                assert store.get(f"missing-{i}", "default") == "default"
            for i in range(CALLS["delete"]):
                store.delete(f"step-{i}")
            store.clear()

        worker()
