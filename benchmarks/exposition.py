"""16. An API server worker's scrape endpoint at 50,000 and 150,000 series: native against the
OpenTelemetry SDK's Prometheus exporter, and against a plain join of the same lines.

    python -m benchmarks.exposition MODE SERIES OUT.json     (one arm, in a process of its own)

Each arm runs in a fresh process (``probe``), as an API server worker with ``count_at =
api_server`` and ``otel_exporter = prometheus`` builds its emitter (cumulative, its identity as
instance id): SERIES task-side series (DAGs x 10 tasks x the write, read_found and delete counters,
as ``benchmarks.scale``'s deployment), counted through the product's emitter, served with
``server_exposition = MODE`` (``native`` or ``otel``). An asyncio loop runs in the same process with
the 1 ms ticker (``testbed.ticker``). Then:

* **idle**: the ticker's longest sleep over 0.3 s with no scrape, before each scrape (this machine's
  floor, the A/A arm);
* **scrapes**: ``SCRAPES`` scrapes over a raw socket from a thread of the process (a reader
  that releases the interpreter while it waits: the server's work is what the loop competes with),
  the first one separately (it renders every line), then with 1% of the series
  counted again before each (what a 15 s scrape interval sees move); for each: the time from
  connecting to the last byte and the ticker's longest sleep meanwhile;
* **plain join**: the scraped text's lines, already made, joined into one string
  (``"".join``), median of 5: the floor any exposition of these lines has, in the same process;
* **memory**: the process's RSS before the series were made, after they were made, and after the
  first scrape (made by ``curl``, another process, so no reader's copy of the text is in this
  process), per series.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

from .common import REPO_ROOT, log, rss_bytes, subprocess_env
from .scale import fetch_pieces, http_body

SIZES, QUICK_SIZES = (50_000, 150_000), (5_000, 15_000)
MODES = ("native", "otel")
SCRAPES = 7
#: The idle window measured before each scrape (the A/A arm, paired with it).
IDLE_SECONDS = 0.3


class Scrape(TypedDict):
    seconds: float
    stall_ms: float
    bytes: int
    gc_ms: float  # the longest garbage collection pass during the scrape (any thread)


class _GcWatch:
    """The longest cyclic garbage collection pass since ``reset`` (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.longest = max(self.longest, time.perf_counter() - self._start)


GC = _GcWatch()


class _ArmFailed(TypedDict, total=False):
    failed: str  # the arm's scrape failed (the SDK's exporter timed out): why


class Arm(_ArmFailed):
    mode: str
    series: int
    idle_stall_ms: list[float]
    first: Scrape
    scrapes: list[Scrape]  # after the first, 1% of the series counted again before each
    join_seconds: float  # the same lines, made, joined (median of 5)
    render_seconds: list[float]  # native: the endpoint's time in render(): the first scrape, the
    # later scrapes, then the renderings into memory
    render_memory_seconds: float  # native: the same rendering into a list, no socket (median of 3)
    rss_per_series: float  # bytes, from before the series were made to after the scrapes
    rss_exposition_per_series: float  # bytes, from after the series were made to after the scrapes
    load_average: list[float]


class Exposition(TypedDict):
    sizes: list[int]
    arms: list[Arm]


def _series(emitter: object, series: int) -> list[object]:
    from store_metrics.catalogue import Outcome, Store, metric_for, task_tags

    metrics = [metric_for(Store.TASK, o) for o in (Outcome.WRITE, Outcome.READ_FOUND, Outcome.DELETE)]
    counters = []
    for i in range(series // 3):
        tags = task_tags(
            dag_id=f"dag_{i // 10:05d}",
            task_id=f"task_{i % 10}",
            run_type="scheduled",
            operator="PythonOperator",
        )
        for metric in metrics:
            counter = emitter.counter(metric, tags)  # type: ignore[attr-defined]
            counter.add(1 + i % 7)
            counters.append(counter)
    return counters


async def _curl(url: str, out: Path) -> None:
    proc = await asyncio.create_subprocess_exec("curl", "-sf", "-o", str(out), url)
    if await proc.wait() != 0:
        raise RuntimeError(f"curl {url} failed")


async def _scrape(url: str) -> tuple[Scrape, bytes]:
    from testbed.ticker import ticking

    loop = asyncio.get_running_loop()
    got: list[tuple[list[bytes], float]] = []

    async def fetch() -> None:
        got.append(await loop.run_in_executor(None, fetch_pieces, url))

    async with ticking() as ticker:
        GC.longest = 0.0
        stall = await ticker.stall_ms(fetch())
        gc_ms = GC.longest * 1000
    chunks, seconds = got[0]
    body = http_body(b"".join(chunks))
    scrape: Scrape = {
        "seconds": round(seconds, 4),
        "stall_ms": round(stall, 2),
        "bytes": len(body),
        "gc_ms": round(gc_ms, 2),
    }
    return scrape, body


def _time_renders(native: Any, rendering: list[float]) -> None:
    """Record the endpoint's own time in render() (its thread, pauses included) on each scrape."""
    render = native.render

    def timed(*args: Any) -> None:
        start = time.perf_counter()
        render(*args)
        rendering.append(round(time.perf_counter() - start, 4))

    native.render = timed


def _in_memory(native: Any, counters: list[Any]) -> list[float]:
    """The same rendering into a list (no socket), 1% of the series moved before each: 3 times."""
    from store_metrics.backends.otel.exposition import PAUSE

    seconds = []
    for n in range(3):
        for counter in counters[n::100]:
            counter.add(1)
        sink: list[bytes] = []
        start = time.perf_counter()
        native.render(sink.append, lambda: time.sleep(PAUSE))
        seconds.append(time.perf_counter() - start)
    return seconds


async def _measure(mode: str, series: int, tmp: Path) -> Arm:
    from store_metrics.counting.runtime import create_emitter
    from testbed.ports import free_port
    from testbed.ticker import ticking

    before = rss_bytes()
    emitter = create_emitter(
        "otel",
        exporter="prometheus",
        prometheus_host="127.0.0.1",
        prometheus_port=free_port(),
        prometheus_port_tries=16,
        temporality="cumulative",
        instance_id="host-0",
        flush_interval=3600,
        max_series=series + 100,
        server_exposition=mode,
    )
    counters = _series(emitter, series)
    made = rss_bytes()
    native = emitter.backend.native  # type: ignore[attr-defined]
    rendering: list[float] = []
    if native is not None:
        _time_renders(native, rendering)
    url = f"http://127.0.0.1:{emitter.backend.prometheus_port}/metrics"  # type: ignore[attr-defined]
    idle: list[float] = []

    async def idle_window() -> None:
        async with ticking() as ticker:
            idle.append(round(await ticker.stall_ms(asyncio.sleep(IDLE_SECONDS)), 2))

    await idle_window()
    # The first scrape by curl, another process: what the endpoint keeps is then all the scrape adds
    # to this process (the in-process reader's copies of the text would count too).
    first_file = tmp / "first.txt"
    start = time.perf_counter()
    async with ticking() as ticker:
        GC.longest = 0.0
        stall = await ticker.stall_ms(_curl(url, first_file))
    first: Scrape = {
        "seconds": round(time.perf_counter() - start, 4),
        "stall_ms": round(stall, 2),
        "bytes": first_file.stat().st_size,
        "gc_ms": round(GC.longest * 1000, 2),
    }
    gc.collect()
    after = rss_bytes()
    rss_per_series = (after - before) / series
    rss_exposition = (after - made) / series
    text = first_file.read_bytes()
    scrapes = []
    step = 100  # 1% of the series
    for n in range(SCRAPES):
        for counter in counters[n::step]:
            counter.add(1)  # type: ignore[attr-defined]
        await idle_window()
        scrape, body = await _scrape(url)
        scrapes.append(scrape)
    if body != text and len(body) != len(text):
        raise RuntimeError("the scrapes' texts differ in length from the first's")
    in_memory = _in_memory(native, counters[SCRAPES:]) if native is not None else []
    lines = text.decode("utf-8").splitlines(keepends=True)
    joins = []
    for _ in range(5):
        start = time.perf_counter()
        "".join(lines)
        joins.append(time.perf_counter() - start)
    emitter.close(2.0)
    return {
        "mode": mode,
        "series": series,
        "idle_stall_ms": idle,
        "first": first,
        "scrapes": scrapes,
        "join_seconds": round(statistics.median(joins), 5),
        "render_seconds": rendering,
        "render_memory_seconds": round(statistics.median(in_memory), 4) if in_memory else 0.0,
        "rss_per_series": round(rss_per_series, 1),
        "rss_exposition_per_series": round(rss_exposition, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


#: What the OpenTelemetry SDK raises when collecting every series outran its own timeout (10 s).
TIMEOUT_SIGN = "MetricsTimeoutError"


def _failed(mode: str, series: int) -> Arm:
    """An arm whose scrape failed: the SDK's collection timed out, so the endpoint answered 500."""
    return {
        "mode": mode,
        "series": series,
        "idle_stall_ms": [],
        "first": {"seconds": float("nan"), "stall_ms": float("nan"), "bytes": 0, "gc_ms": float("nan")},
        "scrapes": [],
        "join_seconds": float("nan"),
        "render_seconds": [],
        "render_memory_seconds": 0.0,
        "rss_per_series": float("nan"),
        "rss_exposition_per_series": float("nan"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "failed": "the SDK's collection timed out (MetricsTimeoutError): the endpoint answered 500",
    }


def probe() -> None:
    mode, series, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    with tempfile.TemporaryDirectory(prefix="store-metrics-bench-exposition-") as tmp:
        arm = asyncio.run(_measure(mode, series, Path(tmp)))
    out.write_text(json.dumps(arm), encoding="utf-8")


def run(quick: bool) -> Exposition:
    sizes = QUICK_SIZES if quick else SIZES
    arms: list[Arm] = []
    with tempfile.TemporaryDirectory(prefix="store-metrics-bench-exposition-") as tmp:
        for series in sizes:
            for mode in MODES:
                log(f"  exposition: {mode}, {series:,} series")
                out = Path(tmp) / f"{mode}-{series}.json"
                proc = subprocess.run(
                    [sys.executable, "-m", "benchmarks.exposition", mode, str(series), str(out)],
                    cwd=REPO_ROOT,
                    env=subprocess_env(),
                    capture_output=True,
                    text=True,
                    timeout=1800,
                    check=False,
                )
                if proc.returncode != 0 and mode == "otel" and TIMEOUT_SIGN in proc.stderr:
                    # The SDK's exporter gave up on its own collection: that is its figure here.
                    log(f"  exposition: {mode}, {series:,} series: the SDK's collection timed out")
                    arms.append(_failed(mode, series))
                    continue
                if proc.returncode != 0:
                    raise RuntimeError(f"exposition probe failed ({proc.returncode}):\n{proc.stderr[-5000:]}")
                arms.append(json.loads(out.read_text(encoding="utf-8")))
    return {"sizes": list(sizes), "arms": arms}


if __name__ == "__main__":
    probe()
