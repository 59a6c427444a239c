"""8. What ``count_at = api_server`` costs the API server: attribution, measured on Airflow's real app.

The measurement lives with its test, ``tests/test_count_at_cost.py`` (real task instances from
``dag.test()`` runs, Airflow's real API server app in process, real tokens): this section runs its
full pass (``--quick``: the test's shorter pass) in a fresh process and returns its figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from .common import REPO_ROOT, log, subprocess_env

SCRIPT = REPO_ROOT / "tests" / "test_count_at_cost.py"


class Replay(TypedDict):
    instances: int
    requests: int
    hits: int
    misses: int
    queries: int
    failures: int
    hit_rate: float
    queries_per_instance: float


class CountAt(TypedDict):
    instances: int  # real task instances in the metadata database
    quick: bool
    pairs: int
    request_ms: float  # a state store request through the real app, attribution off
    request_added_us: float  # median of paired differences on - off
    request_aa_us: float  # the same for off - off
    request_added_us_iqr: list[float]
    count_hit_ns: float  # StoreCalls.count alone, cached task instance
    query_ms: float  # the metadata query per new task instance
    query_ms_p90: float
    tags: dict[str, dict[str, Any]]
    first_request_ms: float
    cached_request_ms: float
    first_added_us: float
    replay: Replay
    cache_size: int
    bytes_per_entry: float
    load_average: list[float]


def run(quick: bool) -> CountAt:
    with tempfile.TemporaryDirectory(prefix="store-metrics-bench-count-at-") as tmp:
        out = Path(tmp) / "count_at.json"
        log(f"  count_at: {SCRIPT.relative_to(REPO_ROOT)} --run ({'quick' if quick else 'full'})")
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), "--run", str(out), "quick" if quick else "full"],
            cwd=REPO_ROOT,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{SCRIPT.name} --run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        result: CountAt = json.loads(out.read_text(encoding="utf-8"))
    return result
