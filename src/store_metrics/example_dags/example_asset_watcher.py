"""An asset fed by an asset watcher, and the DAG it schedules (``store-metrics demo`` runs both).

The watcher's trigger (``QueueWatermarkTrigger``)
keeps a watermark in the asset's state store; its calls are counted with ``dag_id="<none>"``,
``run_type="asset_watcher"``. The consumer makes no state store call of its own, so the proposal's
series stay exactly the proposal's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Asset, AssetWatcher, task

from store_metrics.example_dags.watermark_trigger import QueueWatermarkTrigger

QUEUE = Asset(
    name="example_queue",
    uri="s3://example-bucket/queue",
    watchers=[AssetWatcher(name="queue_watermark", trigger=QueueWatermarkTrigger())],
)

with DAG(dag_id="example_asset_watcher", schedule=[QUEUE], start_date=datetime(2026, 1, 1)) as dag:

    @task(inlets=[QUEUE])
    def consume(**context: Any) -> None:
        print("triggered by", context.get("triggering_asset_events"))

    consume()
