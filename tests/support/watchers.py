"""The asset watchers' DAG file (``testbed/dags/watchers/``) and what its runs call.

Three assets with ``AssetWatcher`` triggers (``tests/deploy/modules/store_metrics_test_triggers.py``,
which every Airflow process must find on its ``PYTHONPATH``): each watcher makes its calls once and
fires one event; the event starts a consumer DAG. ``WATCHERS`` is what the watchers call (in the
triggerer), ``TASKS`` what the consumers' tasks call, as DogStatsD totals.
"""

from __future__ import annotations

from support.deploy import WATCHER_DAGS
from support.totals import Key

DAG_FILE = WATCHER_DAGS / "store_metrics_watchers.py"
CONSUMERS = ("store_metrics_watched_async", "store_metrics_watched_sync", "store_metrics_watched_failing")
PYOP = "_PythonDecoratedOperator"


def watcher(operator: str, asset: str) -> tuple[tuple[str, str], ...]:
    """The tags of a watcher's calls (the asset name as the tag value rule sends it)."""
    return (
        ("dag_id", "<none>"),
        ("task_id", f"store_metrics_test/watched_{asset}"),
        ("run_type", "asset_watcher"),
        ("operator", operator),
    )


def consumer(dag_id: str, task_id: str) -> tuple[tuple[str, str], ...]:
    return (("dag_id", dag_id), ("task_id", task_id), ("run_type", "asset_triggered"), ("operator", PYOP))


ASYNC, SYNC = watcher("AsyncWatermarkTrigger", "async"), watcher("SyncWatermarkTrigger", "sync")
FAILING = watcher("FailingStoreTrigger", "failing")
WATCHERS: dict[Key, int] = {
    **{(f"airflow.asset_state_store.{o}", ASYNC): 1 for o in ("read_absent", "write", "read_found")},
    **{(f"airflow.asset_state_store.{o}", SYNC): 1 for o in ("read_absent", "write", "read_found")},
    ("airflow.asset_state_store.error", (*FAILING, ("operation", "get"))): 1,
    ("airflow.asset_state_store.error", (*FAILING, ("operation", "set"))): 1,
}
FOUND = "airflow.asset_state_store.read_found"
TASKS: dict[Key, int] = {
    (FOUND, consumer("store_metrics_watched_async", "read_async_watermark")): 1,
    (FOUND, consumer("store_metrics_watched_sync", "read_sync_watermark")): 1,
}
