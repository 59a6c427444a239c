"""3a. Memory and cardinality: many calls with distinct keys must not grow memory or series.

Each variant runs in a fresh child process (``python -m benchmarks.memory``), so nothing else
the benchmark did is in its heap. The child wraps 1,000 task stores (100 DAGs x 10 tasks, one
tag set each, as 1,000 task instances would), then makes ``calls`` calls spread over them with
a distinct key per call (``key-0`` ... ``key-999999``): get, set, get, delete, and a clear every
1,000th call. The inner store keeps nothing, so what grows is ours. At each checkpoint it
flushes (so the worker is idle while it reads), runs ``gc.collect()`` and records the resident
set size (``/proc/self/statm``), the number of series the emitter holds and
``sys.getallocatedblocks()``. The ``bare`` variant makes the same
calls on the unwrapped stores: the baseline for the process's own drift.
"""

from __future__ import annotations

import argparse
import gc
import json
import socket
import subprocess
import sys
import time
from typing import Any, TypedDict

from .common import REPO_ROOT, log, rss_bytes, subprocess_env

DAGS = 100
TASKS = 10


class Point(TypedDict):
    """One checkpoint of a child process."""

    calls: int
    rss: int  # bytes
    series: int  # series the emitter holds
    blocks: int  # sys.getallocatedblocks()


class Variant(TypedDict):
    variant: str  # bare or wrapped
    points: list[Point]
    counted: int  # the emitter's totals at the end: every call counted once


class Memory(TypedDict):
    calls: int
    checkpoints: list[int]
    tasks: int
    bare: Variant
    wrapped: Variant


class NullStore:
    """Stores nothing: ``get`` finds keys ending in an even digit, everything else is a no-op."""

    def get(self, key: str, default: Any = None) -> Any:
        return 1 if key[-1] in "02468" else default

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        return None

    def delete(self, key: str) -> None:
        return None

    def clear(self) -> None:
        return None


def child(variant: str, calls: int, checkpoints: list[int]) -> Variant:
    import store_metrics
    from store_metrics import instrument_task_store

    # A live UDP port that is never read: the kernel drops what does not fit, nothing blocks.
    hole = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    hole.bind(("127.0.0.1", 0))
    emitter = store_metrics.configure(
        "statsd", host="127.0.0.1", port=hole.getsockname()[1], flush_interval=0.5
    )
    stores: list[Any] = []
    for d in range(DAGS):
        for t in range(TASKS):
            tags = {
                "dag_id": f"dag_{d:03d}",
                "task_id": f"task_{t:02d}",
                "run_type": "scheduled",
                "operator": "PythonOperator",
            }
            inner = NullStore()
            stores.append(instrument_task_store(inner, emitter, tags) if variant == "wrapped" else inner)
    emitter.flush(timeout=5.0)
    n_stores = len(stores)

    def snapshot(done: int) -> Point:
        # Read with the worker idle: right after an explicit flush, the next periodic one is
        # 0.5 s away, so no export is holding deltas or datagrams while we count.
        emitter.flush(timeout=5.0)
        time.sleep(0.02)
        gc.collect()
        return Point(
            calls=done, rss=rss_bytes(), series=emitter.series_count, blocks=sys.getallocatedblocks()
        )

    points = [snapshot(0)]
    done = 0
    for stop in sorted(checkpoints):
        for i in range(done, stop):
            store = stores[i % n_stores]
            key = f"key-{i}"
            step = (i // n_stores) & 3  # every store goes through get, set, get, delete
            if i % 1000 == 999:
                store.clear()
            elif step == 1:
                store.set(key, i)
            elif step == 3:
                store.delete(key)
            else:
                store.get(key)
        done = stop
        points.append(snapshot(done))
    emitter.flush(timeout=5.0)
    totals = sum(emitter.snapshot().values())
    store_metrics.shutdown(timeout=2.0)
    hole.close()
    return Variant(variant=variant, points=points, counted=totals)


def _variant(variant: str, calls: int, checkpoints: list[int]) -> Variant:
    """One variant in a fresh child process."""
    log(f"  memory: {variant}")
    command = [sys.executable, "-m", "benchmarks.memory", "--variant", variant, "--calls", str(calls)]
    command += ["--checkpoints", ",".join(map(str, checkpoints))]
    proc = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO_ROOT, env=subprocess_env(), check=True, timeout=600
    )
    result: Variant = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run(quick: bool) -> Memory:
    calls = 20_000 if quick else 1_000_000
    checkpoints = [calls // 10, calls // 2, calls]
    bare = _variant("bare", calls, checkpoints)
    wrapped = _variant("wrapped", calls, checkpoints)
    return Memory(calls=calls, checkpoints=checkpoints, tasks=DAGS * TASKS, bare=bare, wrapped=wrapped)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=("bare", "wrapped"), required=True)
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--checkpoints", required=True)
    args = parser.parse_args()
    result = child(args.variant, args.calls, [int(x) for x in args.checkpoints.split(",")])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
