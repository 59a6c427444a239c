"""1. Per-call overhead: wrapped accessor vs the same store unwrapped vs Airflow's per-call path.

For each backend, the emitter is configured as in production (worker thread running) and
Airflow's own stats module is initialised with the matching logger. Each operation is timed in
blocks of ``calls`` calls with ``time.perf_counter_ns``; one round times one block of every
variant, in an order that rotates from round to round (interleaved), and the garbage collector
is off while timing. Per round we take the difference to the bare block timed in that same
round, and report the median over rounds: the loop's own cost and slow drifts of the machine
cancel out.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from .common import (
    BACKENDS,
    TAGS,
    AirflowPerCallStore,
    AsyncMemoryStore,
    BackendSetup,
    UdpSink,
    log,
    median,
    otel_in_memory_provider,
)

OPS: tuple[str, ...] = ("get_found", "get_absent", "set", "delete", "clear", "aget_found", "aset")
OP_LABELS: dict[str, str] = {
    "get_found": "get (found)",
    "get_absent": "get (absent)",
    "set": "set",
    "delete": "delete",
    "clear": "clear",
    "aget_found": "aget (found)",
    "aset": "aset",
}
VARIANTS: tuple[str, ...] = ("bare", "ours", "airflow")
_KEYS = 64


def _keys(op: str, n: int) -> list[str]:
    if op in ("get_absent", "delete"):
        return [f"missing-{i % _KEYS}" for i in range(n)]
    return [f"key-{i % _KEYS}" for i in range(n)]


def _runner(op: str, fn: Callable[..., Any], keys: list[str]) -> Callable[[], int]:
    """A closure timing ``len(keys)`` calls of ``fn``; the loop is the same for every variant."""
    clock = time.perf_counter_ns
    if op in ("get_found", "get_absent", "delete"):

        def run() -> int:
            t0 = clock()
            for k in keys:
                fn(k)
            return clock() - t0

    elif op == "set":

        def run() -> int:
            t0 = clock()
            for k in keys:
                fn(k, 1)
            return clock() - t0

    elif op == "clear":

        def run() -> int:
            t0 = clock()
            for _ in keys:
                fn()
            return clock() - t0

    elif op == "aget_found":
        # Driven without an event loop: what a coroutine costs the loop thread, and nothing else.
        def run() -> int:
            t0 = clock()
            for k in keys:
                coro = fn(k)
                try:  # noqa: SIM105 - contextlib.suppress would add its cost to every timed call
                    coro.send(None)
                except StopIteration:
                    pass
            return clock() - t0

    elif op == "aset":

        def run() -> int:
            t0 = clock()
            for k in keys:
                coro = fn(k, 1)
                try:  # noqa: SIM105 - contextlib.suppress would add its cost to every timed call
                    coro.send(None)
                except StopIteration:
                    pass
            return clock() - t0

    else:
        raise ValueError(op)
    return run


def _method(op: str) -> str:
    return {"get_found": "get", "get_absent": "get", "aget_found": "aget"}.get(op, op)


def measure_backend(setup: BackendSetup, calls: int, rounds: int) -> dict[str, Any]:
    """Time every op for bare / ours / Airflow per call; return medians per op."""
    from store_metrics import instrument_asset_store, instrument_task_store

    prefill = {f"key-{i}": i for i in range(_KEYS)}
    result: dict[str, Any] = {}
    for op in OPS:
        is_async = op.startswith("a")
        wrap = instrument_asset_store if is_async else instrument_task_store
        stores = {
            "bare": AsyncMemoryStore(prefill),
            "ours": wrap(AsyncMemoryStore(prefill), setup.emitter, TAGS),
            "airflow": AirflowPerCallStore(prefill, TAGS),
        }
        # Airflow's path costs 20-100x more per call: a quarter of the calls keeps its blocks
        # long enough to time well and the whole run short.
        sizes = {"bare": calls, "ours": calls, "airflow": max(1, calls // 4)}
        runners = {v: _runner(op, getattr(s, _method(op)), _keys(op, sizes[v])) for v, s in stores.items()}
        for run in runners.values():  # warm-up: caches, first-use registry loads
            run()
        per_call: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for r in range(rounds):
            order = VARIANTS[r % 3 :] + VARIANTS[: r % 3]
            for v in order:
                per_call[v].append(runners[v]() / sizes[v])
        ours_added = [o - b for o, b in zip(per_call["ours"], per_call["bare"], strict=True)]
        af_added = [a - b for a, b in zip(per_call["airflow"], per_call["bare"], strict=True)]
        result[op] = {
            "bare_ns": median(per_call["bare"]),
            "ours_ns": median(per_call["ours"]),
            "airflow_ns": median(per_call["airflow"]),
            "ours_added_ns": median(ours_added),
            "airflow_added_ns": median(af_added),
        }
    return result


def measure_otel_counter_add(calls: int, rounds: int) -> dict[str, float]:
    """Bare OTel ``Counter.add(1, attributes=<4 tags>)`` per call, against an empty loop."""
    provider, _reader = otel_in_memory_provider()
    counter = provider.get_meter("bench").create_counter("bench.task_state_store.read_found")
    add = counter.add
    attrs = dict(TAGS)
    keys = _keys("get_found", calls)
    clock = time.perf_counter_ns

    def with_add() -> int:
        t0 = clock()
        for _ in keys:
            add(1, attrs)
        return clock() - t0

    def empty() -> int:
        t0 = clock()
        for _ in keys:
            pass
        return clock() - t0

    with_add()
    diffs = []
    for _ in range(rounds):
        e = empty()
        a = with_add()
        diffs.append((a - e) / calls)
    provider.shutdown()
    return {"added_ns": median(diffs)}


class _Emitter:
    """An emitter whose counters are made by ``make``: to see what each part of a call costs."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make

    def counter(self, metric: Any, tags: Any) -> Any:
        return self._make()

    def flush(self, timeout: float | None = None) -> bool:
        return True


class _NoopCounter:
    __slots__ = ()

    def add(self, amount: int = 1) -> None:
        return None


class _PlainCounter:
    """Not thread-safe: ``+=`` on an attribute is not atomic. For comparison only."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def add(self, amount: int = 1) -> None:
        self.n += amount


class _CountCounter:
    """``itertools.count().__next__`` as ``add()``: one C call, atomic under the GIL."""

    __slots__ = ("add",)

    def __init__(self) -> None:
        import itertools

        self.add = itertools.count().__next__


def measure_breakdown(setup: BackendSetup, calls: int, rounds: int) -> dict[str, Any]:
    """Where the added time goes: the product's wrapper class over emitters with other counters.

    The wrapper is the product's own (``instrument_task_store``); only the counter behind
    ``add()`` changes: no-op (the wrapper frame alone), an unlocked ``+=``, ``itertools.count``,
    and the product's emitter (its ``Series.add``: a lock and two ``+=``).
    """
    from store_metrics import instrument_task_store

    prefill = {f"key-{i}": i for i in range(_KEYS)}
    emitters: dict[str, Any] = {
        "wrapper, no-op counter": _Emitter(_NoopCounter),
        "wrapper, unlocked += counter": _Emitter(_PlainCounter),
        "wrapper, itertools.count counter": _Emitter(_CountCounter),
        "wrapper, product counter (Series.add)": setup.emitter,
    }
    out: dict[str, Any] = {}
    for op in ("get_found", "set"):
        stores: dict[str, Any] = {"bare": AsyncMemoryStore(prefill)}
        for name, emitter in emitters.items():
            stores[name] = instrument_task_store(AsyncMemoryStore(prefill), emitter, TAGS)
        keys = _keys(op, calls)
        runners = {v: _runner(op, getattr(s, _method(op)), keys) for v, s in stores.items()}
        names = list(runners)
        for run in runners.values():
            run()
        per_call: dict[str, list[float]] = {v: [] for v in names}
        for r in range(rounds):
            for v in names[r % len(names) :] + names[: r % len(names)]:
                per_call[v].append(runners[v]() / calls)
        out[op] = {
            v: median(p - b for p, b in zip(per_call[v], per_call["bare"], strict=True))
            for v in names
            if v != "bare"
        }
    return out


def run(quick: bool) -> dict[str, Any]:
    calls = 500 if quick else 4000
    rounds = 3 if quick else 15
    sink = UdpSink()
    out: dict[str, Any] = {"calls": calls, "rounds": rounds, "backends": {}}
    was_enabled = gc.isenabled()
    try:
        for backend in BACKENDS:
            log(f"  per-call: {backend}")
            setup = BackendSetup(backend, sink)
            try:
                gc.collect()
                gc.disable()
                ops = measure_backend(setup, calls, rounds)
            finally:
                if was_enabled:
                    gc.enable()
                setup.close()
            out["backends"][backend] = {"ops": ops, "ours": setup.ours, "airflow_path": setup.airflow_path}
        log("  per-call: breakdown")
        setup = BackendSetup("none", sink)
        try:
            gc.collect()
            gc.disable()
            out["breakdown"] = measure_breakdown(setup, calls, rounds)
        finally:
            if was_enabled:
                gc.enable()
            setup.close()
        gc.collect()
        gc.disable()
        out["otel_counter_add"] = measure_otel_counter_add(calls, rounds)
    finally:
        if was_enabled:
            gc.enable()
        sink.close()
    return out
