"""The task fault tests' DAGs (``airflow standalone``, a proxy in front of the API server).

``store_metrics_fault_unreachable`` calls every method while the test has cut the API server off;
``store_metrics_fault_kill`` is SIGKILLed between two flushes and retried; the three tasks of
``store_metrics_load_callers`` make a known set of calls while the load generator runs. The tasks and
the test hand each other signals through files in ``STORE_METRICS_TEST_SIGNALS``.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Asset, task

from testbed import signals

SIGNALS = Path(os.environ["STORE_METRICS_TEST_SIGNALS"])


def signal(name: str, text: str) -> None:
    signals.send(SIGNALS, name, text)


def wait_for(name: str, timeout: float = 180) -> None:
    path = SIGNALS / name
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(name)
        time.sleep(0.02)


def describe(exc: BaseException) -> dict:
    frames = traceback.extract_tb(exc.__traceback__)
    error = getattr(exc, "error", None)
    kind = getattr(error, "error", None)
    return {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "error": getattr(kind, "value", str(kind)),
        "detail": getattr(error, "detail", None),
        "innermost": frames[-1].filename if frames else "",
        "cause": repr(exc.__cause__),
        "suppress_context": exc.__suppress_context__,
    }


with DAG(
    dag_id="store_metrics_fault_unreachable", schedule=None, start_date=datetime(2026, 1, 1), catchup=False
):

    @task
    def cut_off(**context):
        store = context["task_state_store"]
        store.set("before", 1)
        signal("unreachable-ready", type(store).__module__)
        wait_for("unreachable-cut")
        seen = {}
        calls = (
            ("get", lambda: store.get("before")),
            ("set", lambda: store.set("k", 2)),
            ("delete", lambda: store.delete("k")),
            ("clear", store.clear),
        )
        for operation, call in calls:
            try:
                call()
            except Exception as exc:
                seen[operation] = describe(exc)
            else:
                seen[operation] = None
        signal("unreachable-done", json.dumps(seen, default=str))
        wait_for("unreachable-restored")
        assert store.get("before") == 1

    cut_off()


with DAG(
    dag_id="store_metrics_fault_kill",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
):

    @task(outlets=[Asset("store_metrics_fault_kill_asset")])
    def killed_then_retried(**context):
        store, assets = context["task_state_store"], context["asset_state_store"]
        if context["ti"].try_number == 1:
            # A: sent by the interval flush before the kill.
            store.get("progress")
            store.set("progress", 1)
            store.set("job", "j-1")
            assets.set("watermark", 1)
            signal("kill-a-done", str(os.getpid()))
            wait_for("kill-go-b")
            # B: after the last flush; the process is killed before the next one.
            store.set("progress", 2)
            store.get("job")
            assets.get("watermark")
            signal("kill-b-done", str(os.getpid()))
            time.sleep(600)
        # C: the retry resumes from what the first try saved.
        assert store.get("progress") == 2
        assert store.get("job") == "j-1"
        store.delete("job")
        store.clear()
        assert assets.get("watermark") == 1
        assets.delete("watermark")
        assert assets.get("watermark") is None

    killed_then_retried()


with DAG(dag_id="store_metrics_load_callers", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    for i in range(3):

        @task(task_id=f"caller_{i}", outlets=[Asset(f"store_metrics_load_callers_{i}")])
        def caller(**context):
            store, assets = context["task_state_store"], context["asset_state_store"]
            store.set("a", 1)
            store.set("b", [1, 2])
            assert store.get("a") == 1
            assert store.get("b") == [1, 2]
            assert store.get("nope") is None
            store.delete("a")
            store.set("c", "x")
            store.clear()
            assets.set("w", 1)
            assert assets.get("w") == 1
            assert assets.get("nope") is None
            assets.delete("w")

        caller()
