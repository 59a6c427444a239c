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

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

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
_KEYS = 64


def _keys(op: str, n: int) -> list[str]:
    if op in ("get_absent", "delete"):
        return [f"missing-{i % _KEYS}" for i in range(n)]
    return [f"key-{i % _KEYS}" for i in range(n)]


# One timing closure per call shape: ``len(keys)`` calls of ``fn``, the loop the same for every
# variant of an operation. Coroutines are driven without an event loop (``coro.send(None)``): what a
# coroutine costs the loop thread, and nothing else.
Timer = Callable[[], int]
_clock = time.perf_counter_ns


def _key(fn: Callable[[str], Any], keys: list[str]) -> Timer:
    def run() -> int:
        t0 = _clock()
        for k in keys:
            fn(k)
        return _clock() - t0

    return run


def _key_value(fn: Callable[[str, int], Any], keys: list[str]) -> Timer:
    def run() -> int:
        t0 = _clock()
        for k in keys:
            fn(k, 1)
        return _clock() - t0

    return run


def _no_argument(fn: Callable[[], Any], keys: list[str]) -> Timer:
    def run() -> int:
        t0 = _clock()
        for _ in keys:
            fn()
        return _clock() - t0

    return run


def _coroutine_key(fn: Callable[[str], Any], keys: list[str]) -> Timer:
    def run() -> int:
        t0 = _clock()
        for k in keys:
            coro = fn(k)
            try:  # noqa: SIM105 - contextlib.suppress would add its cost to every timed call
                coro.send(None)
            except StopIteration:
                pass
        return _clock() - t0

    return run


def _coroutine_key_value(fn: Callable[[str, int], Any], keys: list[str]) -> Timer:
    def run() -> int:
        t0 = _clock()
        for k in keys:
            coro = fn(k, 1)
            try:  # noqa: SIM105 - contextlib.suppress would add its cost to every timed call
                coro.send(None)
            except StopIteration:
                pass
        return _clock() - t0

    return run


_TIMERS: dict[str, Callable[[Any, list[str]], Timer]] = {
    "get_found": _key,
    "get_absent": _key,
    "delete": _key,
    "set": _key_value,
    "clear": _no_argument,
    "aget_found": _coroutine_key,
    "aset": _coroutine_key_value,
}


def _runner(op: str, fn: Callable[..., Any], keys: list[str]) -> Timer:
    """A closure timing ``len(keys)`` calls of ``fn``; the loop is the same for every variant."""
    return _TIMERS[op](fn, keys)


def _method(op: str) -> str:
    return {"get_found": "get", "get_absent": "get", "aget_found": "aget"}.get(op, op)


class OpFigures(TypedDict):
    """One operation on one backend, ns per call: medians over rounds."""

    bare_ns: float
    ours_ns: float
    ours_added_ns: float  # median of the per-round differences wrapped - bare
    airflow_added_ns: float  # the same for Airflow's per-call path


class BackendFigures(TypedDict):
    ops: dict[str, OpFigures]  # by operation (OPS)
    ours: str  # what store-metrics sends to, on this backend
    airflow_path: str  # Airflow's per-call path it is compared with


class PerCall(TypedDict):
    calls: int  # per block (a quarter of that for Airflow's path)
    rounds: int
    backends: dict[str, BackendFigures]
    #: Per operation (get_found, set), per wrapper variant: added ns per call.
    breakdown: dict[str, dict[str, float]]
    otel_counter_add_ns: float  # a bare OTel Counter.add, against an empty loop


def _interleaved(runners: dict[str, Timer], calls: dict[str, int], rounds: int) -> dict[str, list[float]]:
    """ns per call of each variant, per round: one block each, in an order rotating by round."""
    for run in runners.values():  # warm-up: caches, first-use registry loads
        run()
    names = list(runners)
    per_call: dict[str, list[float]] = {v: [] for v in names}
    for r in range(rounds):
        for v in names[r % len(names) :] + names[: r % len(names)]:
            per_call[v].append(runners[v]() / calls[v])
    return per_call


def _added(per_call: dict[str, list[float]], variant: str) -> float:
    """Median over rounds of the variant's difference to the bare block of the same round."""
    return median(v - b for v, b in zip(per_call[variant], per_call["bare"], strict=True))


def measure_backend(setup: BackendSetup, calls: int, rounds: int) -> dict[str, OpFigures]:
    """Time every op for bare / ours / Airflow per call; return medians per op."""
    from store_metrics import instrument_asset_store, instrument_task_store

    prefill = {f"key-{i}": i for i in range(_KEYS)}
    result: dict[str, OpFigures] = {}
    for op in OPS:
        wrap = instrument_asset_store if op.startswith("a") else instrument_task_store
        stores = {
            "bare": AsyncMemoryStore(prefill),
            "ours": wrap(AsyncMemoryStore(prefill), setup.emitter, TAGS),
            "airflow": AirflowPerCallStore(prefill, TAGS),
        }
        # Airflow's path costs 20-100x more per call: a quarter of the calls keeps its blocks
        # long enough to time well and the whole run short.
        sizes = {"bare": calls, "ours": calls, "airflow": max(1, calls // 4)}
        runners = {v: _runner(op, getattr(s, _method(op)), _keys(op, sizes[v])) for v, s in stores.items()}
        per_call = _interleaved(runners, sizes, rounds)
        result[op] = OpFigures(
            bare_ns=median(per_call["bare"]),
            ours_ns=median(per_call["ours"]),
            ours_added_ns=_added(per_call, "ours"),
            airflow_added_ns=_added(per_call, "airflow"),
        )
    return result


def measure_otel_counter_add(calls: int, rounds: int) -> float:
    """Bare OTel ``Counter.add(1, attributes=<4 tags>)``, ns per call, against an empty loop."""
    provider, _reader = otel_in_memory_provider()
    counter = provider.get_meter("bench").create_counter("bench.task_state_store.read_found")
    add = counter.add
    attrs = dict(TAGS)
    keys = _keys("get_found", calls)

    def with_add() -> int:
        t0 = _clock()
        for _ in keys:
            add(1, attrs)
        return _clock() - t0

    def empty() -> int:
        t0 = _clock()
        for _ in keys:
            pass
        return _clock() - t0

    with_add()
    diffs = []
    for _ in range(rounds):
        e = empty()
        a = with_add()
        diffs.append((a - e) / calls)
    provider.shutdown()
    return median(diffs)


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


def measure_breakdown(setup: BackendSetup, calls: int, rounds: int) -> dict[str, dict[str, float]]:
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
    out: dict[str, dict[str, float]] = {}
    for op in ("get_found", "set"):
        stores: dict[str, Any] = {"bare": AsyncMemoryStore(prefill)}
        for name, emitter in emitters.items():
            stores[name] = instrument_task_store(AsyncMemoryStore(prefill), emitter, TAGS)
        keys = _keys(op, calls)
        runners = {v: _runner(op, getattr(s, _method(op)), keys) for v, s in stores.items()}
        per_call = _interleaved(runners, dict.fromkeys(runners, calls), rounds)
        out[op] = {v: _added(per_call, v) for v in emitters}
    return out


@contextlib.contextmanager
def _gc_off() -> Iterator[None]:
    """The garbage collector off while timing (collected first), as it was after."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run(quick: bool) -> PerCall:
    calls = 500 if quick else 4000
    rounds = 3 if quick else 15
    sink = UdpSink()
    backends: dict[str, BackendFigures] = {}
    try:
        for backend in BACKENDS:
            log(f"  per-call: {backend}")
            setup = BackendSetup(backend, sink)
            try:
                with _gc_off():
                    ops = measure_backend(setup, calls, rounds)
            finally:
                setup.close()
            backends[backend] = BackendFigures(ops=ops, ours=setup.ours, airflow_path=setup.airflow_path)
        log("  per-call: breakdown")
        setup = BackendSetup("none", sink)
        try:
            with _gc_off():
                breakdown = measure_breakdown(setup, calls, rounds)
        finally:
            setup.close()
        with _gc_off():
            otel_add = measure_otel_counter_add(calls, rounds)
    finally:
        sink.close()
    return PerCall(
        calls=calls, rounds=rounds, backends=backends, breakdown=breakdown, otel_counter_add_ns=otel_add
    )
