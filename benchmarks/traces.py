"""Traces: what a state store call costs with spans off (against the wrapper before traces) and on.

Two questions, each answered by arms timed in the same run, interleaved as in ``percall``
(blocks of ``calls`` calls, the order rotating by round, the garbage collector off), around the
same in-memory store and counting into the same emitter (``backend = none``):

* **off**: today's wrapper (``counting/accessors.py`` as it was before traces, loaded from git at
  ``BASELINE``) against this tree's wrapper without a tracer, and a second instance of the latter
  (the A/A arm). Reported: each arm's ns per call, the ratio off / today and the A/A ratio
  (medians over rounds of the ratio of two blocks timed in the same round).
* **on**: this tree's wrapper with a tracer against the bare store inside a bare OpenTelemetry SDK
  span (``tracer.start_as_current_span(name, kind=CLIENT)``), both on one real SDK
  ``TracerProvider`` whose ``BatchSpanProcessor`` (its queue long enough that no span is dropped)
  hands spans to an exporter that sends them nowhere.
  Reported: ns per call of each, their ratio, and the ratio of what each adds to the bare store.

Run: ``python -m benchmarks --only traces`` (or ``python -m benchmarks.traces`` to print the figures).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypedDict

from testbed.repository import ROOT

from .common import TAGS, AsyncMemoryStore, BackendSetup, UdpSink, log, median
from .percall import _interleaved, _keys, _method, _runner

#: The commit whose accessors are "today's": main before traces (the branch point).
BASELINE = "ca5dc29"
OPS: tuple[str, ...] = ("get_found", "set", "aget_found")
_PREFILL = {f"key-{i}": i for i in range(64)}


class OffFigures(TypedDict):
    """Spans off: ns per call (medians over rounds) and ratios (medians of the per-round ratios)."""

    bare_ns: float
    today_ns: float
    off_ns: float
    off_again_ns: float  # the A/A arm: a second wrapper of the same kind
    off_over_today: float
    aa_ratio: float  # off_again / off


class OnFigures(TypedDict):
    """Spans on: ns per call, and ours against a bare SDK span around the same store."""

    bare_ns: float
    bare_span_ns: float
    ours_ns: float
    ours_over_bare_span: float  # per call, all in (median of the per-round ratios)
    added_ratio: float  # (ours - bare) / (bare span - bare): what each adds to the store call


class Traces(TypedDict):
    calls: int
    rounds: int
    baseline: str
    off: dict[str, OffFigures]
    on: dict[str, OnFigures]


def load_today() -> Any:
    """``store_metrics.counting.accessors`` as it was at ``BASELINE``, as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{BASELINE}:src/store_metrics/counting/accessors.py"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    # The contracts have moved since, from counting/ to the package's top (below counting/).
    source = source.replace("from .contracts import", "from ..contracts import")
    name = "store_metrics.counting._accessors_before_traces"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "store_metrics.counting"  # its relative imports resolve against ours
    sys.modules[name] = module
    exec(compile(source, f"<{BASELINE}:accessors.py>", "exec"), module.__dict__)
    return module


class _Dropping:
    """A span exporter that takes every batch and sends it nowhere: the processor's work, no I/O."""

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _provider() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    # A queue longer than a block's spans: none is dropped (a dropped span would cost less).
    processor = BatchSpanProcessor(_Dropping(), max_queue_size=1 << 16)  # type: ignore[arg-type]
    provider.add_span_processor(processor)
    return provider


def _in_bare_span(tracer: Any, name: str, fn: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    from opentelemetry.trace import SpanKind

    client = SpanKind.CLIENT
    if is_async:

        async def traced_async(*args: Any) -> Any:
            with tracer.start_as_current_span(name, kind=client):
                return await fn(*args)

        return traced_async

    def traced(*args: Any) -> Any:
        with tracer.start_as_current_span(name, kind=client):
            return fn(*args)

    return traced


def _ratio(per_call: dict[str, list[float]], arm: str, against: str) -> float:
    """Median over rounds of the arm's block against the other's of the same round (drift cancels)."""
    return median(a / b for a, b in zip(per_call[arm], per_call[against], strict=True))


def measure_off(setup: BackendSetup, today: Any, calls: int, rounds: int) -> dict[str, OffFigures]:
    from store_metrics.counting import accessors

    result: dict[str, OffFigures] = {}
    for op in OPS:
        stores = {
            "bare": AsyncMemoryStore(_PREFILL),
            "today": today.instrument_task_store(AsyncMemoryStore(_PREFILL), setup.emitter, TAGS),
            "off": accessors.instrument_task_store(AsyncMemoryStore(_PREFILL), setup.emitter, TAGS),
            "off_again": accessors.instrument_task_store(AsyncMemoryStore(_PREFILL), setup.emitter, TAGS),
        }
        sizes = dict.fromkeys(stores, calls)
        runners = {v: _runner(op, getattr(s, _method(op)), _keys(op, calls)) for v, s in stores.items()}
        per_call = _interleaved(runners, sizes, rounds)
        m = {v: median(per_call[v]) for v in stores}
        result[op] = OffFigures(
            bare_ns=m["bare"],
            today_ns=m["today"],
            off_ns=m["off"],
            off_again_ns=m["off_again"],
            off_over_today=_ratio(per_call, "off", "today"),
            aa_ratio=_ratio(per_call, "off_again", "off"),
        )
    return result


def measure_on(setup: BackendSetup, calls: int, rounds: int) -> dict[str, OnFigures]:
    from store_metrics.counting import accessors, tracing

    provider = _provider()
    try:
        tracer = tracing.tracer_from(provider)
        bare_tracer = provider.get_tracer("bench")
        result: dict[str, OnFigures] = {}
        for op in OPS:
            method = _method(op)
            bare = AsyncMemoryStore(_PREFILL)
            ours = accessors.instrument_task_store(
                AsyncMemoryStore(_PREFILL), setup.emitter, TAGS, tracer=tracer
            )
            operation = method.removeprefix("a") if method in accessors.ASYNC_METHODS else method
            name = f"{operation} task_state_store"
            fns = {
                "bare": getattr(bare, method),
                "bare_span": _in_bare_span(
                    bare_tracer, name, getattr(AsyncMemoryStore(_PREFILL), method), method.startswith("a")
                ),
                "ours": getattr(ours, method),
            }
            sizes = dict.fromkeys(fns, calls)
            runners = {v: _runner(op, fn, _keys(op, calls)) for v, fn in fns.items()}
            per_call = _interleaved(runners, sizes, rounds)
            m = {v: median(per_call[v]) for v in fns}
            result[op] = OnFigures(
                bare_ns=m["bare"],
                bare_span_ns=m["bare_span"],
                ours_ns=m["ours"],
                ours_over_bare_span=_ratio(per_call, "ours", "bare_span"),
                added_ratio=median(
                    (o - b) / (s - b)
                    for o, s, b in zip(per_call["ours"], per_call["bare_span"], per_call["bare"], strict=True)
                ),
            )
        return result
    finally:
        provider.shutdown()


@contextlib.contextmanager
def _gc_off() -> Iterator[None]:
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run(quick: bool) -> Traces:
    calls = 500 if quick else 4000
    rounds = 3 if quick else 41
    today = load_today()
    sink = UdpSink()
    try:
        setup = BackendSetup("none", sink)
        try:
            log("  traces: off, against the wrapper before traces")
            with _gc_off():
                off = measure_off(setup, today, calls, rounds)
            log("  traces: on, against a bare SDK span")
            with _gc_off():
                on = measure_on(setup, calls, rounds)
        finally:
            setup.close()
    finally:
        sink.close()
    return Traces(calls=calls, rounds=rounds, baseline=BASELINE, off=off, on=on)


if __name__ == "__main__":
    import json

    print(json.dumps(run("--quick" in sys.argv), indent=2))
