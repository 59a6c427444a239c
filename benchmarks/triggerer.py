"""6. The triggerer: event-loop stall per state store call of a trigger, with and without the plugin.

A real Airflow triggerer (``airflow triggerer`` with ``airflow dag-processor`` to create its
triggers, a throw-away ``AIRFLOW_HOME`` on SQLite) runs one asset watcher,
:class:`benchmarks.triggerer_probe.StallProbeTrigger`. On the triggerer's own event loop a 1 ms
ticker records its longest sleep while one state store call is in flight (section 2's method,
../shared/seeds/003_5d62acb7dce6a5f5.txt): every call is a real round trip to the triggerer's
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

Run alone (the page's other sections are untouched)::

    python -m benchmarks.triggerer            # ~2 min, prints the section
    python -m benchmarks.triggerer --write    # ... and puts it into docs/performance.md
    python -m benchmarks.triggerer --quick    # smoke run

``--write`` replaces the part of the page between ``<!-- triggerer:start -->`` and
``<!-- triggerer:end -->``, or adds it (before the inventory block, which stays last). A full
``python -m benchmarks`` rewrites the page without this block: run ``--write`` again after it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from .common import REPO_ROOT, UdpSink, log, md_table, median, prepare_airflow_home, subprocess_env
from .stalls import size_label

VARIANTS: tuple[str, ...] = ("bare", "wrapped", "bare_aa")
SIZES_BYTES: tuple[int, ...] = (400, 58_900)
TARGET_STALL_MS = 0.05
START, END = "<!-- triggerer:start -->", "<!-- triggerer:end -->"
#: The start of benchmarks.inventory's block, which wants to stay last on the page.
INVENTORY_START = "<!-- inventory:start"
CROSS_HEADER = (
    "op",
    "value",
    "plugin off ms",
    "plugin on, wrapped ms",
    "plugin on, bare ms",
    "wrapped (on) - off ms",
    "bare (on) - off ms",
)

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


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


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
                    _stop(proc)
        text = log_path.read_text(errors="replace")
        result["hooked"] = "counting the state store calls of triggers" in text
        return result
    finally:
        shutil.rmtree(home, ignore_errors=True)


# -- the hook's work per trigger start, in process ---------------------------------------------------


def per_trigger_start(quick: bool) -> dict[str, Any]:
    """Time what the run_trigger wrapper does before Airflow's run_trigger: bind and instrument."""
    import inspect

    from airflow.jobs.triggerer_job_runner import TriggerRunner
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import AssetStateStoreAccessors
    from airflow.triggers.base import BaseEventTrigger

    from store_metrics import runtime, triggers
    from store_metrics.accessors import is_instrumented

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
                p = Probe()
                p.asset_state_store = AssetStateStoreAccessors(
                    inlets=[Asset(name=f"a{i % 10}", uri=f"s3://b/{i % 10}")]
                )
                probes.append(p)
            t0 = time.perf_counter_ns()
            for i, p in enumerate(probes):
                bound = signature.bind_partial(None, i, p, None, None).arguments
                triggers._instrument_safely(bound["trigger"], bound.get("trigger_id"), bound.get("context"))
            per_round.append((time.perf_counter_ns() - t0) / n)
            assert all(is_instrumented(p.asset_state_store) for p in probes)
    finally:
        runtime.shutdown(1.0)
    return {"triggers": n, "rounds": rounds, "per_start_ns": median(per_round), "rounds_ns": per_round}


# -- run, summarise --------------------------------------------------------------------------------------


def _median_ci(values: list[float], resamples: int = 2000) -> tuple[float, float]:
    rng = random.Random(0)
    medians = sorted(median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def summarise(case: dict[str, list[list[float]]]) -> dict[str, Any]:
    pooled = {v: [x for rnd in case[v] for x in rnd] for v in VARIANTS}
    paired = [w - b for w, b in zip(pooled["wrapped"], pooled["bare"], strict=True)]
    paired_aa = [a - b for a, b in zip(pooled["bare_aa"], pooled["bare"], strict=True)]
    low, high = _median_ci(paired)
    return {
        "n": len(paired),
        "median": {v: median(pooled[v]) for v in VARIANTS},
        "max": {v: max(pooled[v]) for v in VARIANTS},
        "added_ms": median(paired),
        "ci_ms": [low, high],
        "aa_ms": median(paired_aa),
        "paired_ms": paired,
        "paired_aa_ms": paired_aa,
    }


def run(quick: bool) -> dict[str, Any]:
    params = {"rounds": 1, "warm": 5, "sizes": list(SIZES_BYTES[:1])} if quick else {
        "rounds": 3, "warm": 50, "sizes": list(SIZES_BYTES)
    }  # fmt: skip
    sink = UdpSink()
    out: dict[str, Any] = {"params": params}
    try:
        for name, enabled in (("plugin_on", True), ("plugin_off", False)):
            log(f"  triggerer: {name}")
            raw = triggerer_run(name, enabled, params, sink.port)
            out[name] = {
                "instrumented": raw["instrumented"],
                "store": raw["store"],
                "hooked": raw["hooked"],
                "seconds": raw["seconds"],
                "cases": {key: summarise(case) for key, case in raw["cases"].items()},
            }
        out["udp_lines"] = sink.wait_for_lines(1, timeout=2)
    finally:
        sink.close()
    log("  triggerer: per trigger start")
    out["start"] = per_trigger_start(quick)
    return out


# -- the page --------------------------------------------------------------------------------------


def _verdict(added: float, ci: list[float], aa: float) -> str:
    """met: ≤ the target; within noise: no more than the A/A control moves, or the interval holds 0;
    missed: the whole interval above the target and above the A/A figure; else not resolved."""
    if added <= TARGET_STALL_MS:
        return "**met**"
    if added <= abs(aa) or ci[0] <= 0.0:
        return "**within noise**"
    return "**missed**" if ci[0] > max(TARGET_STALL_MS, abs(aa)) else "**not resolved**"


def _case_label(key: str) -> tuple[str, str]:
    op, n = key.split(":")
    return op, size_label(int(n))


def render_section(result: dict[str, Any]) -> str:
    """Section 6 of docs/performance.md (Markdown), between its markers."""
    on, off = result["plugin_on"], result["plugin_off"]
    p = result["params"]
    rows, cross = [], []
    for key, case in on["cases"].items():
        op, size = _case_label(key)
        rows.append(
            [
                op,
                size,
                case["n"],
                f"{case['median']['bare']:.2f} / {case['max']['bare']:.2f}",
                f"{case['median']['wrapped']:.2f} / {case['max']['wrapped']:.2f}",
                f"**{case['added_ms']:+.3f}**",
                f"[{case['ci_ms'][0]:+.3f}, {case['ci_ms'][1]:+.3f}]",
                f"{case['aa_ms']:+.3f}",
                _verdict(case["added_ms"], case["ci_ms"], case["aa_ms"]),
            ]
        )
        other = off["cases"].get(key)
        if other:
            off_ms = other["median"]["bare"]
            cross.append(
                [
                    op,
                    size,
                    f"{off_ms:.2f}",
                    f"{case['median']['wrapped']:.2f}",
                    f"{case['median']['bare']:.2f}",
                    f"{case['median']['wrapped'] - off_ms:+.3f}",
                    f"{case['median']['bare'] - off_ms:+.3f}",
                ]
            )
    pairs = [d for c in on["cases"].values() for d in c["paired_ms"]]
    pairs_aa = [d for c in on["cases"].values() for d in c["paired_aa_ms"]]
    pooled_ci = _median_ci(pairs)
    pooled_added, pooled_aa = median(pairs), median(pairs_aa)
    rows.append(
        [
            "**all calls**",
            "",
            len(pairs),
            "",
            "",
            f"**{pooled_added:+.3f}**",
            f"[{pooled_ci[0]:+.3f}, {pooled_ci[1]:+.3f}]",
            f"{pooled_aa:+.3f}",
            _verdict(pooled_added, list(pooled_ci), pooled_aa),
        ]
    )
    worst_key = max(on["cases"], key=lambda k: on["cases"][k]["added_ms"])
    worst_case = on["cases"][worst_key]
    worst = worst_case["added_ms"]
    worst_label = " ".join(_case_label(worst_key))
    worst_aa = max(abs(c["aa_ms"]) for c in on["cases"].values())
    start = result["start"]
    lines = [
        START,
        "## 6. Triggerer: state store calls of asset watchers",
        "",
        "Target: **no added event-loop stall beyond noise per state store call of a trigger (≤ "
        f"{TARGET_STALL_MS} ms at the median)**, measured in a real triggerer. Module: "
        "`benchmarks/triggerer.py` (with `benchmarks/triggerer_probe.py`); run alone with "
        "`python -m benchmarks.triggerer --write`, which rewrites only this section.",
        "",
        "Method: `airflow triggerer` and `airflow dag-processor` on a throw-away `AIRFLOW_HOME` (SQLite) "
        "run one asset watcher whose trigger measures on the triggerer's own event loop: a 1 ms ticker "
        "records its longest sleep while one state store call is in flight (section 2's method; an idle "
        "loop reads ~1.1-1.3 ms). Every call is a real round trip from the trigger runner subprocess to "
        "its supervisor, the in-process Execution API and SQLite; `get`/`set` are the sync methods, "
        "called from `async def run()` through Airflow's greenback portal. With the plugin on "
        "(`backend = dogstatsd` to a UDP sink in another process, `flush_interval = 0.5`: the worker "
        "flushes during the calls) calls alternate call by call between the instrumented store "
        "(*wrapped*) and Airflow's accessor inside it (*bare*; *bare again* is the A/A control), the "
        f"order rotating each round: {p['rounds']} round(s) of {p['warm']} warm calls per variant and "
        "case, one cold call per variant dropped. *Added* is the median of the paired differences "
        "wrapped - bare, with its 95% bootstrap interval; *A/A* the same statistic for bare again - bare. "
        f"Verdict: **met** if added ≤ {TARGET_STALL_MS} ms; **within noise** if it is above but no larger "
        "than the A/A figure of the same case, or its interval holds 0 (this triggerer's loop moves that "
        "much between two identical series); **missed** if the whole interval lies above both the target "
        "and the A/A figure; else **not resolved**. *All calls* pools every case's pairs (the wrapper's "
        "code on the loop is the same for each). Cells: median / max ms.",
        "",
        f"Plugin on: the trigger was given `{on['store']}` (hook in place: {on['hooked']}); plugin off "
        f"(`enabled = false`): `{off['store']}`. The probe's calls took {on['seconds']:.0f} s and "
        f"{off['seconds']:.0f} s.",
        "",
        md_table(
            [
                "op",
                "value",
                "paired calls",
                "bare ms",
                "wrapped ms",
                "added ms",
                "95% CI ms",
                "A/A ms",
                "verdict",
            ],
            rows,
            "llrrrrrrl",
        ),
        "",
        "Across the two triggerer processes, median stall per call: Airflow's own store with the plugin "
        "off, against the instrumented store and the bare accessor with the plugin on. Another process "
        "and another database, minutes apart: the runs differ by about as much for the *bare* accessor "
        "as for the wrapped one, so only the paired figures above measure the wrapper.",
        "",
        md_table(CROSS_HEADER, cross, "llrrrrr"),
        "",
        f"Per trigger start (in process, {start['triggers']:,} triggers per round, {start['rounds']} "
        f"rounds, median): binding `run_trigger`'s arguments and wrapping the trigger's store costs "
        f"**{start['per_start_ns'] / 1000:.1f} µs** on the loop, once per trigger, not per call. The "
        "emitter is configured in the trigger runner's `run()` before its loop starts, and its worker "
        "thread sends: nothing else of the hook runs on the loop.",
        "",
        f"All calls pooled: **{pooled_added:+.3f} ms** added per call (95% CI [{pooled_ci[0]:+.3f}, "
        f"{pooled_ci[1]:+.3f}]). Largest per-case median: {worst:+.3f} ms ({worst_label}, CI "
        f"[{worst_case['ci_ms'][0]:+.3f}, {worst_case['ci_ms'][1]:+.3f}], "
        f"{_verdict(worst, worst_case['ci_ms'], worst_case['aa_ms']).strip('*')}); the largest |A/A| of a "
        f"case in the same run: {worst_aa:.3f} ms. Direct bound: the wrapper awaits nothing but the inner "
        "call, so all it can add to a stall is its own synchronous time on the loop thread, and it is "
        "the same wrapper as in a task: section 1 measures about 0.3 µs per `aget`/`aset` and 0.2 µs per "
        "`get`/`set`, four orders of magnitude below the stalls this triggerer's loop shows during any "
        "state store call.",
        END,
    ]
    return "\n".join(lines) + "\n"


def write_section(page: Path, section: str) -> None:
    """Replace the page's triggerer block (between its markers), or add it.

    Added before the inventory block if the page has one (``benchmarks.inventory`` keeps its own
    block last), else at the end. ``python -m benchmarks`` rewrites the page without it: run this
    module with ``--write`` again afterwards.
    """
    text = page.read_text(encoding="utf-8") if page.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + section + ("\n" + tail if tail else "")
    elif INVENTORY_START in text:
        head, tail = text.split(INVENTORY_START, 1)
        text = head.rstrip("\n") + "\n\n" + section + "\n" + INVENTORY_START + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    page.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.triggerer", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: one size, few calls")
    parser.add_argument("--write", action="store_true", help="put the section into the page")
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "docs" / "performance.md")
    parser.add_argument("--json", type=Path, help="also save the raw results here")
    parser.add_argument("--render", type=Path, help="render saved results (--json) instead of measuring")
    args = parser.parse_args(argv)
    os.chdir(REPO_ROOT)
    prepare_airflow_home()
    result = json.loads(args.render.read_text(encoding="utf-8")) if args.render else run(args.quick)
    if args.json and not args.render:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    section = render_section(result)
    print(section)
    if args.write:
        write_section(args.output, section)
        log(f"wrote the triggerer section of {args.output}")


if __name__ == "__main__":
    main()
