"""What ``count_at = api_server`` costs the API server: what must hold on any machine.

The measurement is section 8 of the benchmark page (``benchmarks/count_at.py``: real task
instances from ``dag.test()`` runs, Airflow's real API server app in process, real tokens); this
test runs its shorter pass through the benchmark's own command (``python -m benchmarks --quick
--only count_at``) and checks the bounds and the tags, never a timing against a target.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testbed.repository import ROOT


def measure(root: Path) -> dict[str, Any]:
    """Section 8's quick pass, through ``python -m benchmarks``: the figures it saved."""
    results, page = root / "results.json", root / "performance.md"
    command = ["-m", "benchmarks", "--quick", "--only", "count_at", "--results", str(results)]
    proc = subprocess.run(
        [sys.executable, *command, "--output", str(page)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    data: dict[str, Any] = json.loads(results.read_text())["sections"]["count_at"]["data"]
    return data


# -- the test -----------------------------------------------------------------------------------------


@pytest.mark.airflow
@pytest.mark.slow
def test_attribution_costs_microseconds_per_request_and_one_query_per_task_instance(tmp_path: Path) -> None:
    r = measure(tmp_path)
    print(json.dumps(r, indent=2))
    # Exactly one metadata query per task instance, none failed, however many requests.
    replay = r["replay"]
    assert replay["queries"] == replay["instances"] == r["instances"] and replay["failures"] == 0
    assert replay["hits"] + replay["misses"] == replay["requests"] == replay["instances"] * 10
    # The hit path: microseconds on the loop; a real query: milliseconds, on a thread.
    assert r["count_hit_ns"] < 20_000
    assert r["query_ms"] < 100
    # The real query gives every task instance its own dag_id, task_id, run_type (dag.test() runs
    # are manual) and operator, each from its own column, and no team_name (no multi_team).
    assert set(r["tags"]) == set(r["operators"]) and len(r["tags"]) >= 6  # tasks (mapped ones once)
    for name, tags in r["tags"].items():
        dag_id, task_id = name.split(".", 1)  # no DAG id here has a dot
        assert tags == {
            "dag_id": dag_id,
            "task_id": task_id,
            "run_type": "manual",
            "operator": r["operators"][name],
        }, name
    # Operators are the task side's: the class name, not @task's display name.
    assert r["tags"]["state_store_metrics_01.touch_store"]["operator"] == "_PythonDecoratedOperator"
    assert r["tags"]["example_resumable_job.run_batch_job"]["operator"] == "MockBatchOperator"
    assert r["tags"]["store_metrics_mapped.resume_or_start"]["operator"] == "_PythonDecoratedOperator"
    assert r["bytes_per_entry"] < 1000


def test_the_benchmark_page_carries_the_full_pass() -> None:
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text(encoding="utf-8"))
    saved = results["sections"]["count_at"]
    assert saved["run"]["mode"] == "full" and saved["data"]["quick"] is False
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert "## 8. `count_at = api_server`: what attribution costs the API server" in page
