"""The trigger the triggerer benchmark runs in a real triggerer (``benchmarks.triggerer``).

An asset watcher's trigger: Airflow's triggerer gives it its asset state store, runs it on its
event loop, and every call is a real round trip to the triggerer's supervisor process and its
database. On that loop a 1 ms ticker (``testbed.ticker.Ticker``) records its longest sleep
while one call is in flight. The calls go through the store the trigger was given (``wrapped``:
instrumented when the plugin is on) and through the accessor inside it (``bare``, and ``bare_aa``
again as the A/A control), interleaved call by call, the order rotating every round. With the
plugin off, the store given is Airflow's own and all three variants are the same.

Parameters come as JSON in ``$STORE_METRICS_TRIGGER_BENCH`` (rounds, warm calls per variant,
value sizes); the results are written as JSON to ``$STORE_METRICS_TRIGGER_BENCH_OUT``. The trigger
then fires one event and waits, like a watcher with nothing more to report.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from testbed.ticker import ticking
from testbed.values import int_array

from .stalls import interleaved


class StallProbeTrigger(BaseEventTrigger):
    def __init__(self, run_name: str = "run", **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]  # Airflow's, untyped
        self.run_name = run_name

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {"run_name": self.run_name}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from store_metrics import unwrap
        from store_metrics.counting.accessors import is_instrumented

        store: Any = self.asset_state_store
        params = json.loads(os.environ.get("STORE_METRICS_TRIGGER_BENCH", "{}"))
        rounds, warm = int(params.get("rounds", 3)), int(params.get("warm", 10))
        sizes = [int(n) for n in params.get("sizes", [400])]
        stores = {"bare": unwrap(store), "wrapped": store, "bare_aa": unwrap(store)}
        values = {n: int_array(n) for n in sizes}

        async def request(variant: str, *, op: str, n: int) -> None:
            s = stores[variant]
            if op == "aget":
                got = await s.aget(f"get-{n}")
                assert len(got) == len(values[n])
            elif op == "aset":
                await s.aset(f"set-{n}", values[n])
            elif op == "get":  # sync, from async def run(): Airflow's greenback portal
                got = s.get(f"get-{n}")
                assert len(got) == len(values[n])
            else:
                s.set(f"set-{n}", values[n])

        cases: dict[str, dict[str, list[list[float]]]] = {}
        async with ticking() as ticker:
            for n, value in values.items():
                await store.aset(f"get-{n}", value)
            await ticker.next_tick()
            started = time.monotonic()
            for op in ("aget", "aset", "get", "set"):
                for n in sizes if op in ("aget", "aset") else sizes[:1]:
                    cases[f"{op}:{n}"] = await interleaved(ticker, partial(request, op=op, n=n), rounds, warm)
        result = {
            "instrumented": is_instrumented(store),
            "store": type(store).__name__,
            "seconds": time.monotonic() - started,
            "cases": cases,
        }
        out = os.environ.get("STORE_METRICS_TRIGGER_BENCH_OUT")
        if out:
            Path(out).write_text(json.dumps(result), encoding="utf-8")
        yield TriggerEvent({"done": self.run_name})  # type: ignore[no-untyped-call]  # Airflow's
        await asyncio.Event().wait()
