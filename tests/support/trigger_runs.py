"""One trigger run through Airflow's own ``TriggerRunner.run_trigger``, in the test's process or a fresh one.

What is real: Airflow's ``TriggerRunner`` (its ``run_trigger`` coroutine, with the greenback
portal, span, logging and event queue it sets up), Airflow's ``BaseEventTrigger`` and Airflow's
``AssetStateStoreAccessors`` / ``AssetStateStoreAccessor``. What is not: the round trip behind
``SUPERVISOR_COMMS``, a socket to the ``TriggerRunnerSupervisor`` process and its database in
a triggerer; ``InMemorySupervisor`` answers the same messages from a dict instead. Airflow
is imported only when these are called.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from store_metrics import catalogue
from store_metrics.counting.accessors import is_instrumented

#: The asset the in-process watchers watch.
ASSET = "store_metrics_test/in_process"
#: The tags of that watcher's calls but ``operator`` (its class).
WATCHER_TAGS = {"dag_id": catalogue.DAG_ID_NONE, "task_id": ASSET, "run_type": "asset_watcher"}


class InMemorySupervisor:
    """Answers the asset store messages the triggerer's supervisor answers, from a dict.

    ``fail_with``: raise this very exception object from the round trip instead (a broken pipe,
    say), so a test can check the trigger sees the same object.
    """

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], Any] = {}
        self.fail_with: BaseException | None = None
        self.messages: list[str] = []

    def send(self, msg: Any) -> Any:
        return self._answer(msg)

    async def asend(self, msg: Any) -> Any:
        await asyncio.sleep(0)
        return self._answer(msg)

    def _answer(self, msg: Any) -> Any:
        from airflow.sdk.exceptions import ErrorType
        from airflow.sdk.execution_time import comms

        self.messages.append(type(msg).__name__)
        if self.fail_with is not None:
            raise self.fail_with
        if isinstance(msg, comms.GetAssetStateStoreByName):
            if (msg.name, msg.key) in self.values:
                return comms.AssetStateStoreResult(value=self.values[(msg.name, msg.key)])
            return comms.ErrorResponse(error=ErrorType.ASSET_STORE_NOT_FOUND)
        if isinstance(msg, comms.SetAssetStateStoreByName):
            self.values[(msg.name, msg.key)] = msg.value
        elif isinstance(msg, comms.DeleteAssetStateStoreByName):
            self.values.pop((msg.name, msg.key), None)
        elif isinstance(msg, comms.ClearAssetStateStoreByName):
            self.values = {k: v for k, v in self.values.items() if k[0] != msg.name}
        else:
            raise AssertionError(f"unexpected message {msg!r}")
        return comms.OKResponse(ok=True)


def answer_from_memory() -> InMemorySupervisor:
    """Make an ``InMemorySupervisor`` the task runner's ``SUPERVISOR_COMMS`` (a fresh process)."""
    from airflow.sdk.execution_time import task_runner

    answering = InMemorySupervisor()
    task_runner.SUPERVISOR_COMMS = answering  # type: ignore[assignment]
    return answering


def watched_store() -> Any:
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import AssetStateStoreAccessors

    # Exactly what the triggerer sets (triggerer_job_runner.py, TriggerRunner.create_triggers).
    return AssetStateStoreAccessors(inlets=[Asset(name=ASSET, uri="s3://store-metrics-test/in-process")])


def event_trigger_class() -> type:
    from airflow.triggers.base import BaseEventTrigger, TriggerEvent

    class Watermarks(BaseEventTrigger):
        """aget absent, aset, aget found (with a default equal to the value), then the sync trio."""

        def serialize(self) -> tuple[str, dict[str, Any]]:
            return "tests.Watermarks", {}

        async def run(self) -> AsyncIterator[TriggerEvent]:
            store = self.asset_state_store
            seen = [await store.aget("w"), await store.aset("w", "v1"), await store.aget("w", "v1")]
            seen += [store.get("s", "dflt"), store.set("s", 2), store.get("s")]
            await store.adelete("w")
            store.clear()
            yield TriggerEvent({"seen": seen, "wrapped": is_instrumented(store)})

    return Watermarks


def sync_trigger_class() -> type:
    """A watcher with the sync methods only (every Airflow 3.3 release has them)."""
    from airflow.triggers.base import BaseEventTrigger, TriggerEvent

    class SyncWatermarks(BaseEventTrigger):
        """get absent, set, get found, delete."""

        def serialize(self) -> tuple[str, dict[str, Any]]:
            return "tests.SyncWatermarks", {}

        async def run(self) -> AsyncIterator[TriggerEvent]:
            store = self.asset_state_store
            seen = [store.get("w"), store.set("w", "v1"), store.get("w")]
            store.delete("w")
            yield TriggerEvent({"seen": seen, "wrapped": is_instrumented(store)})

    return SyncWatermarks


async def run_in_airflows_runner(trigger: Any, trigger_id: int = 7, context: Any = None) -> list[Any]:
    """Run one trigger through Airflow's own TriggerRunner.run_trigger; return its event payloads."""
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    runner = TriggerRunner()
    runner.triggers[trigger_id] = {"task": None, "is_watcher": True, "name": f"ID {trigger_id}", "events": 0}
    await runner.run_trigger(trigger_id, trigger, None, context)
    return [entry.event.payload for entry in runner.events]


def watcher(cls: type | None = None) -> Any:
    """A watcher trigger (``event_trigger_class`` by default) on ``ASSET``, as the triggerer
    makes it."""
    trigger = (cls or event_trigger_class())()
    trigger.asset_state_store = watched_store()
    return trigger
