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
from typing import Any

from .common import REPO_ROOT, log, rss_bytes, subprocess_env

DAGS = 100
TASKS = 10


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


def child(variant: str, calls: int, checkpoints: list[int]) -> dict[str, Any]:
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

    def snapshot(done: int) -> dict[str, Any]:
        # Read with the worker idle: right after an explicit flush, the next periodic one is
        # 0.5 s away, so no export is holding deltas or datagrams while we count.
        emitter.flush(timeout=5.0)
        time.sleep(0.02)
        gc.collect()
        return {
            "calls": done,
            "rss": rss_bytes(),
            "series": emitter.series_count,
            "blocks": sys.getallocatedblocks(),
        }

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
    return {"variant": variant, "points": points, "counted": totals}


def run(quick: bool) -> dict[str, Any]:
    calls = 20_000 if quick else 1_000_000
    checkpoints = [calls // 10, calls // 2, calls]
    out: dict[str, Any] = {"calls": calls, "checkpoints": checkpoints, "tasks": DAGS * TASKS}
    for variant in ("bare", "wrapped"):
        log(f"  memory: {variant}")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.memory",
                "--variant",
                variant,
                "--calls",
                str(calls),
                "--checkpoints",
                ",".join(map(str, checkpoints)),
            ],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=subprocess_env(),
            check=True,
            timeout=600,
        )
        out[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


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
