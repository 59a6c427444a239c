"""6. The triggerer: event-loop stall per state store call of a trigger, with and without the plugin.

A real Airflow triggerer (``airflow triggerer`` with ``airflow dag-processor`` to create its
triggers, a throw-away ``AIRFLOW_HOME`` on SQLite) runs one asset watcher,
``benchmarks.triggerer_probe.StallProbeTrigger``. On the triggerer's own event loop a 1 ms
ticker records its longest sleep while one state store call is in flight (section 2's method, the
stall harness of apache/airflow#75381): every call is a real round trip to the triggerer's
supervisor process, the in-process Execution API and the database.

Two triggerer runs, one after the other:

* **plugin on** (``[store_metrics] backend = dogstatsd`` to a UDP sink in another process,
  ``flush_interval = 0.5`` so the worker flushes during the calls): the trigger is given the
  instrumented store. Calls alternate, call by call, between the instrumented store (*wrapped*) and
  Airflow's accessor inside it (*bare*, and *bare again* as the A/A control), the order rotating
  every round. *Added* is the median of the paired differences wrapped - bare.
* **plugin off** (``[store_metrics] enabled = false``): the trigger is given Airflow's own store; the
  same calls, all bare. Its medians are the triggerer without the plugin's wrappers, for comparison
  across the two processes (noisier than the paired figure: two processes, two databases).

Also, in this process: what the hook adds once per trigger start (binding ``run_trigger``'s
arguments, building the wrappers and their series), the only other work it puts on the loop.

Run with ``python -m benchmarks --only triggerer`` (about 2 min; ``--quick``: a smoke run).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, TypedDict

from testbed.processes import stop
from testbed.values import SIZES_BYTES

from .common import REPO_ROOT, UdpSink, log, median, median_ci, subprocess_env
from .stalls import VARIANTS

#: The two smaller sizes: a triggerer's calls are round trips through its supervisor.
SIZES = SIZES_BYTES[:2]


class TriggerCase(TypedDict):
    """One operation and size (or all calls pooled): stalls in ms on the triggerer's loop."""

    n: int  # paired calls
    median: dict[str, float]  # per variant
    max: dict[str, float]
    added_ms: float  # median of the paired differences wrapped - bare
    ci_ms: list[float]  # its 95% bootstrap interval
    aa_ms: float  # the same statistic for bare again - bare


class TriggererRun(TypedDict):
    instrumented: bool  # the store the trigger got was the plugin's
    store: str  # its class
    hooked: bool  # the triggerer logged that the hook is in place
    seconds: float  # how long the probe's calls took
    cases: dict[str, TriggerCase]  # per "op:size"


class PluginOff(TypedDict):
    """The triggerer with the plugin off: every variant is Airflow's own store."""

    store: str
    seconds: float
    median_ms: dict[str, float]  # per "op:size": median stall per call


class TriggerStart(TypedDict):
    triggers: int
    rounds: int
    per_start_ns: float  # median over rounds


class Triggerer(TypedDict):
    params: dict[str, Any]  # what the probe was asked to do: rounds, warm calls, sizes
    plugin_on: TriggererRun
    plugin_off: PluginOff
    pooled: TriggerCase  # every case of plugin_on together
    start: TriggerStart


DAG_FILE = textwrap.dedent(
    """
    from datetime import datetime

    from airflow.sdk import DAG, Asset, AssetWatcher, task
    from benchmarks.triggerer_probe import StallProbeTrigger

    PROBED = Asset(
        name="store_metrics_bench/probed",
        uri="s3://store-metrics-bench/probed",
        watchers=[AssetWatcher(name="stall_probe", trigger=StallProbeTrigger(run_name="{run_name}"))],
    )

    with DAG(dag_id="store_metrics_bench_probed", schedule=[PROBED], start_date=datetime(2026, 1, 1)):

        @task
        def consume():
            pass

        consume()
    """
)


# -- one real triggerer -------------------------------------------------------------------------------


def _airflow_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in subprocess_env().items()
        if not k.startswith(("AIRFLOW__", "OTEL_", "STORE_METRICS_TRIGGER_BENCH"))
    }
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        }
    )
    env.update(extra)
    return env


def triggerer_run(
    name: str, enabled: bool, params: dict[str, Any], sink_port: int, timeout: float = 300
) -> Any:
    """Start a dag-processor and a triggerer on a fresh home; return what the probe trigger measured."""
    home = Path(tempfile.mkdtemp(prefix=f"store-metrics-bench-triggerer-{name}-"))
    try:
        (home / "dags").mkdir()
        (home / "dags" / "store_metrics_bench_probed.py").write_text(DAG_FILE.format(run_name=name))
        out = home / "probe.json"
        env = _airflow_env(
            home,
            AIRFLOW__STORE_METRICS__ENABLED=str(enabled).lower(),
            AIRFLOW__STORE_METRICS__BACKEND="dogstatsd",
            AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
            AIRFLOW__STORE_METRICS__PORT=str(sink_port),
            AIRFLOW__STORE_METRICS__FLUSH_INTERVAL="0.5",
            STORE_METRICS_TRIGGER_BENCH=json.dumps(params),
            STORE_METRICS_TRIGGER_BENCH_OUT=str(out),
        )
        airflow = [sys.executable, "-m", "airflow"]
        subprocess.run([*airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
        log_path = home / "airflow.log"
        with log_path.open("wb") as log_file:
            procs = [
                subprocess.Popen(
                    [*airflow, *command], env=env, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO_ROOT
                )
                for command in (["dag-processor"], ["triggerer", "--skip-serve-logs"])
            ]
            try:
                deadline = time.monotonic() + timeout
                while not out.exists():
                    if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                        tail = log_path.read_text(errors="replace")[-4000:]
                        raise RuntimeError(f"the probe trigger did not report ({name}):\n{tail}")
                    time.sleep(0.5)
                time.sleep(0.2)  # the file is written in one call; let it close
                result = json.loads(out.read_text())
            finally:
                for proc in reversed(procs):
                    stop(proc, 30)
        text = log_path.read_text(errors="replace")
        result["hooked"] = "counting the state store calls of triggers" in text
        return result
    finally:
        shutil.rmtree(home, ignore_errors=True)


# -- the hook's work per trigger start, in process ---------------------------------------------------


def per_trigger_start(quick: bool) -> TriggerStart:
    """Time what the run_trigger wrapper does before Airflow's run_trigger: bind and instrument."""
    import inspect

    from airflow.jobs.triggerer_job_runner import TriggerRunner
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import AssetStateStoreAccessors
    from airflow.triggers.base import BaseEventTrigger

    from store_metrics.counting import runtime
    from store_metrics.counting.accessors import is_instrumented
    from store_metrics.integration import triggerer

    class Probe(BaseEventTrigger):
        def serialize(self) -> tuple[str, dict[str, Any]]:
            return "bench.Probe", {}

        async def run(self) -> Any:  # pragma: no cover - never run
            yield None

    n, rounds = (500, 3) if quick else (5_000, 7)
    signature = inspect.signature(TriggerRunner.run_trigger)
    runtime.configure("none", flush_interval=60)
    try:
        per_round = []
        for _ in range(rounds):
            probes = []
            for i in range(n):
                p = Probe()  # type: ignore[no-untyped-call]  # Airflow's BaseEventTrigger.__init__
                p.asset_state_store = AssetStateStoreAccessors(
                    inlets=[Asset(name=f"a{i % 10}", uri=f"s3://b/{i % 10}")]
                )
                probes.append(p)
            t0 = time.perf_counter_ns()
            for i, p in enumerate(probes):
                bound = signature.bind_partial(None, i, p, None, None).arguments
                triggerer._instrument_safely(bound["trigger"], bound.get("trigger_id"), bound.get("context"))
            per_round.append((time.perf_counter_ns() - t0) / n)
            assert all(is_instrumented(p.asset_state_store) for p in probes)
    finally:
        runtime.shutdown(1.0)
    return TriggerStart(triggers=n, rounds=rounds, per_start_ns=median(per_round))


# -- run, summarise --------------------------------------------------------------------------------------


def _pairs(
    cases: list[dict[str, list[list[float]]]],
) -> tuple[dict[str, list[float]], list[float], list[float]]:
    """Every call per variant, and the paired differences wrapped - bare and bare again - bare."""
    pooled: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for case in cases:
        for v in VARIANTS:
            pooled[v] += [x for rnd in case[v] for x in rnd]
    paired = [w - b for w, b in zip(pooled["wrapped"], pooled["bare"], strict=True)]
    paired_aa = [a - b for a, b in zip(pooled["bare_aa"], pooled["bare"], strict=True)]
    return pooled, paired, paired_aa


def summarise(*cases: dict[str, list[list[float]]]) -> TriggerCase:
    pooled, paired, paired_aa = _pairs(list(cases))
    low, high = median_ci(paired)
    return TriggerCase(
        n=len(paired),
        median={v: median(pooled[v]) for v in VARIANTS},
        max={v: max(pooled[v]) for v in VARIANTS},
        added_ms=median(paired),
        ci_ms=[low, high],
        aa_ms=median(paired_aa),
    )


def run(quick: bool) -> Triggerer:
    params: dict[str, Any] = (
        {"rounds": 1, "warm": 5, "sizes": list(SIZES[:1])}
        if quick
        else {"rounds": 3, "warm": 50, "sizes": list(SIZES)}
    )
    sink = UdpSink()
    try:
        log("  triggerer: plugin_on")
        on = triggerer_run("plugin_on", True, params, sink.port)
        log("  triggerer: plugin_off")
        off = triggerer_run("plugin_off", False, params, sink.port)
    finally:
        sink.close()
    log("  triggerer: per trigger start")
    return Triggerer(
        params=params,
        plugin_on=TriggererRun(
            instrumented=on["instrumented"],
            store=on["store"],
            hooked=on["hooked"],
            seconds=on["seconds"],
            cases={key: summarise(case) for key, case in on["cases"].items()},
        ),
        plugin_off=PluginOff(
            store=off["store"],
            seconds=off["seconds"],
            median_ms={key: summarise(case)["median"]["bare"] for key, case in off["cases"].items()},
        ),
        pooled=summarise(*on["cases"].values()),
        start=per_trigger_start(quick),
    )
