"""Three assets with AssetWatchers whose triggers use their asset state store, and their consumers.

* ``store_metrics_test/watched_async``: AsyncWatermarkTrigger (aget absent, aset, aget found);
* ``store_metrics_test/watched_sync``: SyncWatermarkTrigger (get absent, set, get found);
* ``store_metrics_test/watched_failing``: FailingStoreTrigger (a get and a set that raise).

Each asset schedules one DAG; the async and sync consumers read the watermark their watcher wrote
(one read_found each, tagged as that task). The trigger classes live in
``tests/deploy/modules/store_metrics_test_triggers.py``, on the triggerer's PYTHONPATH.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Asset, AssetWatcher, task
from store_metrics_test_triggers import AsyncWatermarkTrigger, FailingStoreTrigger, SyncWatermarkTrigger

WATCHED_ASYNC = Asset(
    name="store_metrics_test/watched_async",
    uri="s3://store-metrics-test/watched_async",
    watchers=[AssetWatcher(name="async_watermark", trigger=AsyncWatermarkTrigger(value="w-async"))],
)
WATCHED_SYNC = Asset(
    name="store_metrics_test/watched_sync",
    uri="s3://store-metrics-test/watched_sync",
    watchers=[AssetWatcher(name="sync_watermark", trigger=SyncWatermarkTrigger(value="w-sync"))],
)
WATCHED_FAILING = Asset(
    name="store_metrics_test/watched_failing",
    uri="s3://store-metrics-test/watched_failing",
    watchers=[AssetWatcher(name="failing_store", trigger=FailingStoreTrigger(value="w-failing"))],
)

with DAG(dag_id="store_metrics_watched_async", schedule=[WATCHED_ASYNC], start_date=datetime(2026, 1, 1)):

    @task(inlets=[WATCHED_ASYNC])
    def read_async_watermark(**context):
        assert context["asset_state_store"].get("watermark") == "w-async"

    read_async_watermark()

with DAG(dag_id="store_metrics_watched_sync", schedule=[WATCHED_SYNC], start_date=datetime(2026, 1, 1)):

    @task(inlets=[WATCHED_SYNC])
    def read_sync_watermark(**context):
        assert context["asset_state_store"][WATCHED_SYNC].get("watermark") == "w-sync"

    read_sync_watermark()

with DAG(dag_id="store_metrics_watched_failing", schedule=[WATCHED_FAILING], start_date=datetime(2026, 1, 1)):

    @task
    def no_store_calls():
        pass

    no_store_calls()
