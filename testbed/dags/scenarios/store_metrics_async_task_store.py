"""An async @task on its task store: aget/aset/adelete/aclear where the accessor has them.

Task SDK 1.4 (Airflow 3.4) gives the task store accessor async methods; 1.3 has only the sync
ones, so there the task makes the same calls synchronously. Either way: read_absent 2, write 1,
read_found 1, delete 1, clear 1. The task prints which methods it used.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, task

with DAG(dag_id="store_metrics_async_task_store", schedule=None, start_date=datetime(2026, 1, 1)) as dag:

    @task
    async def async_task_store(**context: Any) -> None:
        store = context["task_state_store"]
        if hasattr(store, "aget"):
            print("task store methods: async")
            assert await store.aget("cursor") is None
            await store.aset("cursor", 41, retention=timedelta(hours=1))
            assert await store.aget("cursor", 41) == 41
            await store.adelete("cursor")
            assert await store.aget("cursor", "gone") == "gone"
            await store.aclear()
        else:
            print("task store methods: sync")
            assert store.get("cursor") is None
            store.set("cursor", 41, retention=timedelta(hours=1))
            assert store.get("cursor", 41) == 41
            store.delete("cursor")
            assert store.get("cursor", "gone") == "gone"
            store.clear()

    async_task_store()
