"""8. What ``count_at = api_server`` costs the API server: attribution, measured on Airflow's real app.

A throwaway Airflow home (SQLite, ``testbed.airflow.make_home``) gets real task instances from
``dag.test()`` runs of the proposal's scenarios, a mapped task and a task with two assets. A fresh
process with that home's environment (``benchmarks.count_at_probe``) then builds Airflow's real
API server app (``airflow.api_fastapi.app.create_app``, with the plugin's root middleware,
``count_at = api_server``, backend ``none``), mints real task tokens with Airflow's own JWT
generator, and drives Execution API state store requests through it in process (httpx's ASGI
transport):

* **per request, cache hit**: the time attribution adds, measured two ways: the whole request
  through the real app with attribution on and off (blocks interleaved, medians, with an A/A
  control), and the attribution call alone (``StoreCalls.count`` on a cached task instance);
* **per new task instance**: the metadata query (``lookup_task_instance``) on its lookup thread,
  and whether the first request of a task instance waits for it (response time of first requests
  against cached ones);
* **cache behaviour**: every task instance's calls replayed (concurrently per task instance), then
  hits, misses and queries per task instance;
* **memory**: bytes per cache entry at the fixed size (10,000 entries).

``--quick`` is a shorter pass; ``tests/airflow/test_count_at_cost.py`` runs it through
``python -m benchmarks --quick --only count_at`` and checks what must hold on any machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from testbed.airflow import make_home

from .common import REPO_ROOT, log

#: The DAGs whose ``dag.test()`` runs make the task instances (mapped ones once per index).
DAGS = (
    "state_store_metrics_01",
    "state_store_metrics_02",
    "state_store_metrics_03",
    "example_resumable_job",
    "store_metrics_mapped",
    "store_metrics_two_assets",
)
SECRET = "store-metrics-count-at-cost-secret-0123456789abcdef0123456789abcdef"


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
    operators: dict[str, str]  # "dag_id.task_id" -> the task instance's own operator column
    pairs: int
    request_ms: float  # a state store request through the real app, attribution off
    request_added_us: float  # median of paired differences on - off
    request_aa_us: float  # the same for off - off
    request_added_us_iqr: list[float]
    count_hit_ns: float  # StoreCalls.count alone, cached task instance
    query_ms: float  # the metadata query per new task instance
    query_ms_p90: float
    tags: dict[str, dict[str, Any]]  # "dag_id.task_id" -> the tags the metadata query gives
    first_request_ms: float
    cached_request_ms: float
    first_added_us: float
    replay: Replay
    cache_size: int
    bytes_per_entry: float
    load_average: list[float]


def prepare(root: Path) -> dict[str, str]:
    """An Airflow home with real task instances (dag.test() runs); the environment to measure in."""
    home = make_home(root / "home")
    ran = home.run(root, list(DAGS), home.env(AIRFLOW__STORE_METRICS__BACKEND="none"))
    if any(state != "success" for _, state in ran["runs"]):
        raise RuntimeError(f"a DAG run failed: {ran['runs']}\n{ran['log'][-3000:]}")
    return home.env(
        AIRFLOW__STORE_METRICS__COUNT_AT="api_server",
        AIRFLOW__STORE_METRICS__BACKEND="none",
        AIRFLOW__API_AUTH__JWT_SECRET=SECRET,
    )


def run(quick: bool) -> CountAt:
    with tempfile.TemporaryDirectory(prefix="store-metrics-bench-count-at-") as tmp:
        root = Path(tmp)
        log(f"  count_at: real task instances ({len(DAGS)} DAGs under dag.test())")
        env = prepare(root)
        out = root / "count_at.json"
        log(f"  count_at: measuring ({'quick' if quick else 'full'})")
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.count_at_probe", str(out), "quick" if quick else "full"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"count_at_probe failed ({proc.returncode}):\n{proc.stderr[-5000:]}")
        result: CountAt = json.loads(out.read_text(encoding="utf-8"))
    return result
