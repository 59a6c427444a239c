"""Mapped sync tasks on the task store and mapped async tasks on the asset store, for the CeleryExecutor.

``crunch`` (4 instances a run) waits at a file barrier (STORE_METRICS_TEST_BARRIER) until at least
three instances have started, so the first ones provably run at once and, with two workers of
concurrency 2, on both workers; then each makes the calls in ``TASK_CALLS``. ``advance``
(2 instances a run) is an async task using ``aget/aset/adelete`` on its asset's store, with a key
of its own (run and map index) so that runs going on at once never see each other's keys.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, Asset, task

LEDGER = Asset(name="store_metrics_test/celery", uri="s3://bucket/celery")
CRUNCH_PARTS = 4
ADVANCE_PARTS = 2
AT_ONCE = 3
#: Task store calls each ``crunch`` instance makes, by outcome.
TASK_CALLS = {"read_absent": 2, "write": 3, "read_found": 3, "delete": 1, "clear": 1}
#: Asset store calls each ``advance`` instance makes, by outcome.
ASSET_CALLS = {"read_absent": 1, "write": 2, "read_found": 2, "delete": 1}

with DAG(dag_id="store_metrics_celery", schedule=None, start_date=datetime(2026, 1, 1)) as dag:

    @task
    def crunch(part, **context):
        barrier = Path(os.environ["STORE_METRICS_TEST_BARRIER"])
        (barrier / f"{context['run_id']}-{part}").touch()
        deadline = time.monotonic() + 120
        while len(list(barrier.iterdir())) < AT_ONCE:
            if time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {AT_ONCE} crunch instances ran at once")
            time.sleep(0.05)
        store = context["task_state_store"]
        assert store.get("cursor") is None
        for i in range(3):
            store.set(f"cursor-{i}", i)
            assert store.get(f"cursor-{i}") == i
        assert store.get("missing", "default") == "default"
        store.delete("cursor-0")
        store.clear()

    @task(inlets=[LEDGER], outlets=[LEDGER])
    async def advance(part, **context):
        store = context["asset_state_store"]
        key = f"{context['run_id']}/{part}"
        assert await store.aget(key) is None
        await store.aset(key, 1)
        assert await store.aget(key) == 1
        await store.aset(key, 2)
        assert await store.aget(key) == 2
        await store.adelete(key)

    crunch.expand(part=list(range(CRUNCH_PARTS))) >> advance.expand(part=list(range(ADVANCE_PARTS)))
