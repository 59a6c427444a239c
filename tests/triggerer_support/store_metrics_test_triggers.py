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
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
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


class StallProbeTrigger(_Watcher):
    """benchmarks/triggerer.py: event-loop stall per state store call, bare vs instrumented.

    Runs in the real triggerer, on its event loop, against its real asset state store (each call a
    round trip to the triggerer's supervisor and its database). A 1 ms ticker on the loop records
    its longest sleep while one call is in flight (benchmarks/stalls.py's method). The calls go
    through the instrumented store (``wrapped``) and through the accessor inside it (``bare``, and
    ``bare_aa`` again as the A/A control), interleaved call by call. Results are written as JSON to
    ``$STORE_METRICS_TRIGGER_BENCH_OUT`` (``value`` names the run).
    """

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from store_metrics import unwrap
        from store_metrics.accessors import is_instrumented

        store = self.asset_state_store
        assert store is not None
        params = json.loads(os.environ.get("STORE_METRICS_TRIGGER_BENCH", "{}"))
        rounds, warm = int(params.get("rounds", 3)), int(params.get("warm", 20))
        variants = {"bare": unwrap(store), "wrapped": store, "bare_aa": unwrap(store)}
        ticker = _Ticker()
        tick_task = asyncio.create_task(ticker.run())
        await store.aset("get-key", list(range(100)))
        await ticker.next_tick()

        async def one(variant: str, op: str, i: int) -> float:
            s = variants[variant]
            ticker.reset()
            if op == "aget":
                await s.aget("get-key")
            elif op == "aset":
                await s.aset(f"set-{i % 10}", i)
            elif op == "get":
                s.get("get-key")
            else:
                s.set(f"set-{i % 10}", i)
            await ticker.next_tick()
            return ticker.longest * 1000.0

        names = list(variants)
        results: dict[str, Any] = {"instrumented": is_instrumented(store), "cases": {}}
        started = time.monotonic()
        for op in ("aget", "aset", "get", "set"):
            case: dict[str, list[float]] = {v: [] for v in names}
            for r in range(rounds):
                order = names[r % 3 :] + names[: r % 3]
                for v in order:  # cold call, dropped
                    await one(v, op, 0)
                for i in range(warm):
                    for v in order:
                        case[v].append(await one(v, op, i))
            results["cases"][op] = case
        results["seconds"] = time.monotonic() - started
        tick_task.cancel()
        out = os.environ.get("STORE_METRICS_TRIGGER_BENCH_OUT")
        if out:
            Path(out).with_name(f"{Path(out).stem}-{self.value}.json").write_text(json.dumps(results))
        yield TriggerEvent({"done": self.value})
        await self._wait_for_the_next_message()


class _Ticker:
    """Sleeps 1 ms in a loop and keeps the longest sleep since :meth:`reset` (benchmarks/stalls.py)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._waiters: list[asyncio.Future[None]] = []

    def reset(self) -> None:
        self.longest = 0.0

    async def run(self) -> None:
        clock = time.perf_counter
        while True:
            t0 = clock()
            await asyncio.sleep(0.001)
            self.longest = max(self.longest, clock() - t0)
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    async def next_tick(self) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        await future
