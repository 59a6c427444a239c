"""Instruction counts per call under ``valgrind --tool=callgrind``: the same comparison, without noise.

Full mode only, and only if valgrind is installed. ``python -m benchmarks.callgrind --child``
runs ``n`` calls of one op on a bare or wrapped in-memory store (backend ``none``, worker
thread running). Each (variant, op) runs at n = 0 and n = N with ``PYTHONHASHSEED=0``; the
difference over N is the instructions per call, start-up cancelled out.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from typing import Any, TypedDict

from .common import REPO_ROOT, TAGS, MemoryStore, log, subprocess_env

N = 20_000
OPS = ("get_found", "set")


def _child(variant: str, op: str, n: int) -> None:
    import store_metrics
    from store_metrics import instrument_task_store

    emitter = store_metrics.configure("none")
    store: Any = MemoryStore({f"key-{i}": i for i in range(64)})
    if variant == "wrapped":
        store = instrument_task_store(store, emitter, TAGS)
    keys = [f"key-{i % 64}" for i in range(n)]
    if op == "get_found":
        get = store.get
        for k in keys:
            get(k)
    else:
        put = store.set
        for k in keys:
            put(k, 1)


def _instructions(variant: str, op: str, n: int) -> int:
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "benchmarks.callgrind",
            "--child",
            variant,
            op,
            str(n),
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=subprocess_env(PYTHONHASHSEED="0"),
        timeout=600,
        check=True,
    )
    match = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
    if not match:
        raise RuntimeError("no instruction count in valgrind output")
    return int(match.group(1))


class Callgrind(TypedDict):
    measured: bool
    reason: str  # why not, when not measured
    n: int  # calls per run (minus a run of 0 calls)
    #: Per operation: instructions per call, bare, wrapped and added.
    ops: dict[str, dict[str, float]]


def run(quick: bool) -> Callgrind:
    if quick:
        return Callgrind(measured=False, reason="quick mode", n=0, ops={})
    if shutil.which("valgrind") is None:
        return Callgrind(measured=False, reason="valgrind is not installed", n=0, ops={})
    ops: dict[str, dict[str, float]] = {}
    try:
        for op in OPS:
            per_call: dict[str, float] = {}
            for variant in ("bare", "wrapped"):
                log(f"  callgrind: {op} {variant}")
                zero = _instructions(variant, op, 0)
                full = _instructions(variant, op, N)
                per_call[variant] = (full - zero) / N
            per_call["added"] = per_call["wrapped"] - per_call["bare"]
            ops[op] = per_call
    except Exception as exc:
        log(f"  callgrind: failed: {exc}")
        return Callgrind(measured=False, reason=str(exc)[:300], n=0, ops={})
    return Callgrind(measured=True, reason="", n=N, ops=ops)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "OP", "N"), required=True)
    args = parser.parse_args()
    variant, op, n = args.child
    _child(variant, op, int(n))


if __name__ == "__main__":
    main()
