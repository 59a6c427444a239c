"""One real state store round trip under ``dag.test()``: the denominator for "share of a call".

Full mode only. A throw-away ``AIRFLOW_HOME`` on SQLite, ``airflow db migrate``, a DAG file in
the dags folder, then ``python <dag file>`` runs ``dag.test()``: its task times 20 calls of
each operation on the real ``context["task_state_store"]`` (supervisor comms, Execution API,
metastore) and writes them to a JSON file. The plugin is switched off for this run
(``[store_metrics] enabled = false``), so the accessor is Airflow's own, unwrapped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TypedDict

from .common import log, median, subprocess_env

CALLS = 20

DAG_FILE = """
from __future__ import annotations

import json
import os
import time
from datetime import datetime

from airflow.sdk import DAG, task

with DAG(dag_id="store_metrics_bench_roundtrip", schedule=None, start_date=datetime(2026, 1, 1),
         catchup=False) as dag:

    @task
    def probe(**context):
        store = context["task_state_store"]
        clock = time.perf_counter_ns
        result = {"accessor": type(store).__module__ + "." + type(store).__qualname__,
                  "get_found": [], "get_absent": [], "set": [], "delete": []}
        store.set("present", [1, 2, 3])
        for i in range(%(calls)d):
            t = clock(); store.get("present"); result["get_found"].append(clock() - t)
            t = clock(); store.get(f"absent-{i}"); result["get_absent"].append(clock() - t)
            t = clock(); store.set(f"k{i}", i); result["set"].append(clock() - t)
            t = clock(); store.delete(f"k{i}"); result["delete"].append(clock() - t)
        with open(os.environ["STORE_METRICS_BENCH_RT_OUT"], "w") as f:
            json.dump(result, f)

    probe()

if __name__ == "__main__":
    dag.test()
"""


class RoundTrip(TypedDict):
    measured: bool
    reason: str  # why not, when not measured
    calls: int
    accessor: str  # the accessor class dag.test() handed the task
    ms: dict[str, float]  # median per operation: get_found, get_absent, set, delete


def _not_measured(reason: str) -> RoundTrip:
    return RoundTrip(measured=False, reason=reason, calls=0, accessor="", ms={})


def _measure(home: Path) -> RoundTrip:
    dags = home / "dags"
    dags.mkdir()
    dag_file = dags / "store_metrics_bench_roundtrip.py"
    dag_file.write_text(DAG_FILE % {"calls": CALLS}, encoding="utf-8")
    out_file = home / "result.json"
    env = subprocess_env(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__STORE_METRICS__ENABLED="false",
        STORE_METRICS_BENCH_RT_OUT=str(out_file),
    )
    airflow = str(Path(sys.executable).with_name("airflow"))
    log("  round trip: airflow db migrate")
    subprocess.run(
        [airflow, "db", "migrate"], env=env, cwd=home, capture_output=True, check=True, timeout=300
    )
    log("  round trip: dag.test()")
    proc = subprocess.run(
        [sys.executable, str(dag_file)],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if not out_file.exists():
        tail = (proc.stdout + proc.stderr)[-2000:]
        raise RuntimeError(f"dag.test() wrote no result (exit {proc.returncode}):\n{tail}")
    data = json.loads(out_file.read_text(encoding="utf-8"))
    accessor = data.pop("accessor")
    ms = {op: median(samples) / 1e6 for op, samples in data.items()}
    return RoundTrip(measured=True, reason="", calls=CALLS, accessor=accessor, ms=ms)


def run(quick: bool) -> RoundTrip:
    if quick:
        return _not_measured("quick mode")
    home = Path(tempfile.mkdtemp(prefix="store-metrics-bench-rt-"))
    try:
        return _measure(home)
    except Exception as exc:  # the page says it was not measured, and why
        log(f"  round trip: failed: {exc}")
        return _not_measured(str(exc)[:500])
    finally:
        shutil.rmtree(home, ignore_errors=True)
