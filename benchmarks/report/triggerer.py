"""Section 6 of the page: state store calls of a trigger, in a real triggerer."""

from __future__ import annotations

from testbed.values import size_label

from ..common import BACKENDS
from ..percall import PerCall
from ..results import Results, data_of
from ..triggerer import TriggerCase, Triggerer
from .markdown import Rendered, join, table
from .targets import STALL_ADDED_MS, Verdict, VerdictRow, cell, judge

METHOD = (
    "Method: `airflow triggerer` and `airflow dag-processor` on a throw-away `AIRFLOW_HOME` (SQLite) run "
    "one asset watcher whose trigger measures on the triggerer's own event loop: a 1 ms ticker records "
    "its longest sleep while one state store call is in flight (section 2's method; an idle loop reads "
    "~1.1-1.3 ms). Every call is a real round trip from the trigger runner subprocess to its supervisor, "
    "the in-process Execution API and SQLite; `get`/`set` are the sync methods, called from `async def "
    "run()` through Airflow's greenback portal. With the plugin on (`backend = dogstatsd` to a UDP sink in "
    "another process, `flush_interval = 0.5`: the worker flushes during the calls) calls alternate call by "
    "call between the instrumented store (*wrapped*) and Airflow's accessor inside it (*bare*; *bare "
    "again* is the A/A control), the order rotating each round: {rounds} round(s) of {warm} warm calls "
    "per variant and case, one cold call per variant dropped. *Added* is the median of the paired "
    "differences wrapped - bare, with its 95% bootstrap interval; *A/A* the same statistic for bare again "
    "- bare; verdicts by the page's one rule. *All calls* pools every case's pairs (the wrapper's code on "
    "the loop is the same for each). Cells: median / max ms."
)
CROSS = (
    "Across the two triggerer processes, median stall per call: Airflow's own store with the plugin off, "
    "against the instrumented store and the bare accessor with the plugin on. Another process and another "
    "database, minutes apart: the runs differ by about as much for the *bare* accessor as for the wrapped "
    "one, so only the paired figures above measure the wrapper."
)


def _label(key: str) -> str:
    op, n = key.split(":")
    return f"{op} {size_label(int(n))}"


def _verdict(c: TriggerCase) -> Verdict:
    added, low = c["added_ms"], c["ci_ms"][0]
    return judge(added <= STALL_ADDED_MS, gap=added, noise=c["aa_ms"], interval_reaches=low <= STALL_ADDED_MS)


def _row(op: str, size: str, c: TriggerCase, per_variant: bool = True) -> list[str]:
    cells = [f"{c['median'][v]:.2f} / {c['max'][v]:.2f}" if per_variant else "" for v in ("bare", "wrapped")]
    ci = f"[{c['ci_ms'][0]:+.3f}, {c['ci_ms'][1]:+.3f}]"
    return [
        op,
        size,
        str(c["n"]),
        *cells,
        f"**{c['added_ms']:+.3f}**",
        ci,
        f"{c['aa_ms']:+.3f}",
        cell(_verdict(c)),
    ]


def _verdicts(t: Triggerer) -> list[VerdictRow]:
    cases = [(_label(key), c) for key, c in t["plugin_on"]["cases"].items()] + [("all calls", t["pooled"])]
    return [
        VerdictRow(
            f"6. triggerer: stall added ≤ {STALL_ADDED_MS} ms at the median: {label}",
            f"{c['added_ms']:+.3f} ms, 95% CI [{c['ci_ms'][0]:+.3f}, {c['ci_ms'][1]:+.3f}] (median of "
            f"{c['n']} "
            f"paired calls; A/A {c['aa_ms']:+.3f} ms)",
            _verdict(c),
        )
        for label, c in cases
    ]


def _cross(t: Triggerer) -> list[list[str]]:
    rows = []
    for key, c in t["plugin_on"]["cases"].items():
        off = t["plugin_off"]["median_ms"].get(key)
        if off is not None:
            wrapped, bare = c["median"]["wrapped"], c["median"]["bare"]
            op, n = key.split(":")
            rows.append(
                [
                    op,
                    size_label(int(n)),
                    f"{off:.2f}",
                    f"{wrapped:.2f}",
                    f"{bare:.2f}",
                    f"{wrapped - off:+.3f}",
                    f"{bare - off:+.3f}",
                ]
            )
    return rows


def _bound(pc: PerCall | None) -> str:
    if not pc:
        return "section 1 measures it"
    ops = [pc["backends"][b]["ops"] for b in BACKENDS]
    asynchronous = max(o[op]["ours_added_ns"] for o in ops for op in ("aget_found", "aset")) / 1000
    synchronous = max(o[op]["ours_added_ns"] for o in ops for op in ("get_found", "set")) / 1000
    return (
        f"section 1 measures at most {asynchronous:.1f} µs per `aget`/`aset` and {synchronous:.1f} µs "
        "per `get`/`set`"
    )


def _reading(t: Triggerer, bound: str) -> str:
    cases, pooled = t["plugin_on"]["cases"], t["pooled"]
    worst_key = max(cases, key=lambda k: cases[k]["added_ms"])
    worst = cases[worst_key]
    worst_aa = max(abs(c["aa_ms"]) for c in cases.values())
    return (
        f"All calls pooled: **{pooled['added_ms']:+.3f} ms** added per call (95% CI "
        f"[{pooled['ci_ms'][0]:+.3f}, "
        f"{pooled['ci_ms'][1]:+.3f}]). Largest per-case median: {worst['added_ms']:+.3f} ms "
        f"({_label(worst_key)}, "
        f"CI [{worst['ci_ms'][0]:+.3f}, {worst['ci_ms'][1]:+.3f}], {_verdict(worst).value}); the largest "
        "|A/A| "
        f"of a case in the same run: {worst_aa:.3f} ms. Direct bound: the wrapper awaits nothing but the "
        "inner "
        "call, so all it can add to a stall is its own synchronous time on the loop thread, and it is the "
        f"same wrapper as in a task: {bound}, orders of magnitude below the stalls this triggerer's loop "
        "shows during any state store call."
    )


def render(results: Results) -> Rendered:
    t: Triggerer = data_of(results, "triggerer")
    on, off, start = t["plugin_on"], t["plugin_off"], t["start"]
    rows = []
    for key, c in on["cases"].items():
        op, n = key.split(":")
        rows.append(_row(op, size_label(int(n)), c))
    rows.append(_row("**all calls**", "", t["pooled"], per_variant=False))
    header = [
        "op",
        "value",
        "paired calls",
        "bare ms",
        "wrapped ms",
        "added ms",
        "95% CI ms",
        "A/A ms",
        "verdict",
    ]
    cross_header = ["op", "value", "plugin off ms", "plugin on, wrapped ms", "plugin on, bare ms"]
    cross_header += ["wrapped (on) - off ms", "bare (on) - off ms"]
    text = join(
        "## 6. Triggerer: state store calls of asset watchers",
        "Target: **no added event-loop stall beyond noise per state store call of a trigger (≤ "
        f"{STALL_ADDED_MS} "
        "ms at the median)**, measured in a real triggerer. Module: `benchmarks/triggerer.py` (with "
        "`benchmarks/triggerer_probe.py`); run alone with `python -m benchmarks --only triggerer`.",
        METHOD.format(rounds=t["params"]["rounds"], warm=t["params"]["warm"]),
        f"Plugin on: the trigger was given `{on['store']}` (hook in place: {on['hooked']}); plugin off "
        f"(`enabled = false`): `{off['store']}`. The probe's calls took {on['seconds']:.0f} s and "
        f"{off['seconds']:.0f} s.",
        table(header, rows, "llrrrrrrl"),
        CROSS,
        table(cross_header, _cross(t), "llrrrrr"),
        f"Per trigger start (in process, {start['triggers']:,} triggers per round, {start['rounds']} rounds, "
        f"median): binding `run_trigger`'s arguments and wrapping the trigger's store costs "
        f"**{start['per_start_ns'] / 1000:.1f} µs** on the loop, once per trigger, not per call. The emitter "
        "is configured in the trigger runner's `run()` before its loop starts, and its worker thread sends: "
        "nothing else of the hook runs on the loop.",
        _reading(t, _bound(data_of(results, "percall"))),
    )
    return Rendered(text, _verdicts(t), _why(t))


def _why(t: Triggerer) -> list[str]:
    return [
        f"- **Triggerer, {_label(key)}: {c['added_ms']:+.3f} ms added per call** (95% CI "
        f"[{c['ci_ms'][0]:+.3f}, "
        f"{c['ci_ms'][1]:+.3f}], A/A {c['aa_ms']:+.3f} ms), {_verdict(c).value}: a call holds the "
        "triggerer's "
        "loop for milliseconds (a round trip through its supervisor), which the machine moves by more than "
        f"{STALL_ADDED_MS} ms; every call pooled: {t['pooled']['added_ms']:+.3f} ms. The wrapper's own "
        "time on "
        "the loop is the same as in a task (section 1)."
        for key, c in t["plugin_on"]["cases"].items()
        if _verdict(c) is not Verdict.MET
    ]
