"""An asset watcher's trigger that keeps its watermark in the asset state store, as a queue poller does.

``store-metrics demo`` runs it the way Airflow's triggerer runs a watcher's trigger: with
``asset_state_store`` set to the watched asset's store, through the triggerer's hook of the plugin.
It is importable from the package (``store_metrics.example_dags.watermark_trigger``), which is what
a triggerer needs: it imports a trigger by its class path, never from the DAGs folder.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

WATERMARK = "watermark"


class QueueWatermarkTrigger(BaseEventTrigger):
    """Reads the last watermark (absent the first time), advances it, fires one event."""

    def __init__(self, step: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self.step = step

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {"step": self.step}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        store = self.asset_state_store
        assert store is not None
        seen = store.get(WATERMARK, 0)
        watermark = (seen if isinstance(seen, int) else 0) + self.step
        store.set(WATERMARK, watermark)
        yield TriggerEvent({"watermark": watermark})  # type: ignore[no-untyped-call]
