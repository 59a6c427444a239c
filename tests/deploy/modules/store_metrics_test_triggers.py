"""Asset watcher triggers that keep a watermark in their asset state store, for the triggerer tests.

The triggerer imports a trigger by its class path, so this module must be on the ``PYTHONPATH``
of the triggerer (and of the DAG processor, which imports the DAG file that uses it): the tests put
this directory there for every Airflow process they start. A module that only sits in the DAG
folder is not found by the triggerer.

Each watcher makes its state store calls once, fires one event whose payload says what the calls
returned (or raised), and then waits for a next message that never comes, as a queue poller
would: it is not restarted, so the counts the tests expect are exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

WATERMARK = "watermark"


class _Watcher(BaseEventTrigger):
    def __init__(self, value: str = "w1", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.value = value

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {"value": self.value}

    async def _wait_for_the_next_message(self) -> None:
        await asyncio.Event().wait()


class AsyncWatermarkTrigger(_Watcher):
    """``aget`` (absent), ``aset``, ``aget`` (found) on the single watched asset's store."""

    async def run(self) -> AsyncIterator[TriggerEvent]:
        store = self.asset_state_store
        assert store is not None
        before = await store.aget(WATERMARK)
        await store.aset(WATERMARK, self.value)
        after = await store.aget(WATERMARK)
        yield TriggerEvent({"before": before, "after": after, "store": type(store).__name__})
        await self._wait_for_the_next_message()


class SyncWatermarkTrigger(_Watcher):
    """The same with the sync methods (``get``, ``set``, ``get``), from inside ``async def run``."""

    async def run(self) -> AsyncIterator[TriggerEvent]:
        store = self.asset_state_store
        assert store is not None
        before = store.get(WATERMARK)
        store.set(WATERMARK, self.value)
        after = store.get(WATERMARK)
        yield TriggerEvent({"before": before, "after": after, "store": type(store).__name__})
        await self._wait_for_the_next_message()


class FailingStoreTrigger(_Watcher):
    """Two calls the real store raises on: a ``get`` the API server rejects, a ``set`` of ``None``.

    The watcher catches what they raise, as a poller would, and reports it in its event.
    """

    async def run(self) -> AsyncIterator[TriggerEvent]:
        store = self.asset_state_store
        assert store is not None
        raised: dict[str, str] = {}
        try:
            await store.aget("")  # the Execution API wants a key of at least one character: 422
        except Exception as exc:
            raised["get"] = f"{type(exc).__module__}.{type(exc).__qualname__}"
        try:
            await store.aset(WATERMARK, None)  # the accessor refuses None before any round trip
        except Exception as exc:
            raised["set"] = f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
        yield TriggerEvent({"raised": raised})
        await self._wait_for_the_next_message()
