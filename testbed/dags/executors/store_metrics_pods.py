"""Tasks for the process-per-task executor (the KubernetesExecutor's shape): each one its own process.

``pod_0`` .. ``pod_2`` are separate tasks, so each series belongs to exactly one task process:
``pod_n`` makes ``n + 1`` times the calls in ``TASK_CALLS``. ``resume`` is mapped (3 instances,
one series), ``watermark`` is an async task on its asset's store. Each task's last statement,
right after its last store call, records its pid, its parent's pid and the time
(STORE_METRICS_TEST_OUT/<task>.<map_index>.json): the test compares them with when the process
that ran the task exited.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, Asset, task

WATERMARKS = Asset(name="store_metrics_test/pods", uri="s3://bucket/pods")
PODS = 3
RESUME_PARTS = 3
#: Task store calls per unit, by outcome (``pod_n``: n + 1 units; each ``resume`` instance: 1 unit).
TASK_CALLS = {"read_absent": 2, "write": 2, "read_found": 2, "delete": 1, "clear": 1}
#: Asset store calls of ``watermark``, by outcome.
ASSET_CALLS = {"read_absent": 1, "write": 2, "read_found": 1, "delete": 1}


def record(context) -> None:
    ti = context["ti"]
    out = Path(os.environ["STORE_METRICS_TEST_OUT"]) / f"{ti.task_id}.{ti.map_index}.json"
    out.write_text(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "ended": time.time()}))


def use_task_store(store, units: int) -> None:
    for unit in range(units):
        assert store.get(f"job-{unit}") is None
        store.set(f"job-{unit}", {"unit": unit})
        assert store.get(f"job-{unit}") == {"unit": unit}
        store.set(f"job-{unit}", {"unit": unit, "done": True})
        assert store.get(f"job-{unit}")["done"] is True
        assert store.get("never-set", "absent") == "absent"
        store.delete(f"job-{unit}")
        store.clear()


with DAG(dag_id="store_metrics_pods", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    for n in range(PODS):

        @task(task_id=f"pod_{n}")
        def pod(units=n + 1, **context):
            use_task_store(context["task_state_store"], units)
            record(context)

        pod()

    @task
    def resume(part, **context):
        use_task_store(context["task_state_store"], 1)
        record(context)

    resume.expand(part=list(range(RESUME_PARTS)))

    @task(inlets=[WATERMARKS], outlets=[WATERMARKS])
    async def watermark(**context):
        store = context["asset_state_store"]
        key = f"watermark/{context['run_id']}"
        assert await store.aget(key) is None
        await store.aset(key, "2026-01-01")
        await store.aset(key, "2026-01-02")
        assert await store.aget(key) == "2026-01-02"
        await store.adelete(key)
        record(context)

    watermark()
