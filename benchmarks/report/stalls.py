"""Section 2 of the page: event-loop stalls on ``aget`` / ``aset``."""

from __future__ import annotations

from testbed.values import size_label

from ..common import BACKENDS
from ..percall import PerCall
from ..results import Results, data_of
from ..stalls import PooledCase, StallCase, Stalls
from .markdown import Rendered, join, table
from .targets import STALL_ADDED_MS, VerdictRow, cell, judge

METHOD = (
    "Method (the event-loop stall harness of "
    "[apache/airflow#75381](https://github.com/apache/airflow/pull/75381), "
    "the async state store routes proposal, applied to the accessor): a 1 ms ticker on the event loop "
    "records its longest sleep while one request is in flight (an idle loop reads ~1.1-1.3 ms: the 1 ms "
    "sleep plus wake-up). The store does real async I/O: every call is a length-prefixed JSON round "
    "trip over loopback TCP to another process, which echoes the stored value back on `aget` (integer "
    "arrays of {sizes} of JSON). Per case and round: one cold request per variant dropped, then {warm} "
    "warm requests per variant interleaved request by request (bare, wrapped, bare again as an A/A "
    "control; the order rotates per round); {rounds} rounds. The emitter's worker flushes every 0.5 s "
    "during the run. Cells: `median / max` ms per round. *Added* is the median of the paired "
    "differences wrapped - bare; *A/A* the same statistic for bare - bare, i.e. what this machine "
    "shows when nothing differs."
)
POOLING = (
    "Verdicts: per operation and value size, on the median of the paired differences of all backends "
    "together, with its 95% confidence interval (bootstrap, 2,000 resamples), by the page's one rule. "
    "Pooling is sound because the code the loop runs is the same for every backend (they differ only in "
    "the worker thread), and one case alone ({pairs} pairs) cannot resolve {target} ms once a request "
    "holds the loop for several ms: see its A/A column. Per-backend figures are in the second table."
)


def _pooled(case: PooledCase, backends: int) -> tuple[list[str], VerdictRow]:
    added, aa, (low, high) = case["added_ms"], case["aa_ms"], case["ci_ms"]
    verdict = judge(added <= STALL_ADDED_MS, gap=added, noise=aa, interval_reaches=low <= STALL_ADDED_MS)
    ci = f"[{low:+.3f}, {high:+.3f}]"
    label = f"{case['op']}, {size_label(case['size'])}"
    row = [
        case["op"],
        size_label(case["size"]),
        str(case["pairs"]),
        f"{added:+.3f}",
        ci,
        f"{aa:+.3f}",
        cell(verdict),
    ]
    return row, VerdictRow(
        f"2. stall added ≤ {STALL_ADDED_MS} ms at the median: {label}",
        f"{added:+.3f} ms, 95% CI {ci} (median of {case['pairs']} paired requests over the {backends} "
        f"backends; A/A {aa:+.3f} ms)",
        verdict,
    )


def _case_row(backend: str, key: str, case: StallCase) -> list[str]:
    op, size = key.split(":")
    cells = [
        "; ".join(f"{m:.2f} / {x:.2f}" for m, x in case["rounds"][v]) for v in ("bare", "wrapped", "bare_aa")
    ]
    added, aa, ci = case["added_ms"], case["aa_ms"], case["ci_ms"]
    verdict = judge(
        added <= STALL_ADDED_MS, gap=added, noise=aa, interval_reaches=bool(ci) and ci[0] <= STALL_ADDED_MS
    )
    return [backend, op, size_label(int(size)), *cells, f"{added:+.3f}", f"{aa:+.3f}", verdict.value]


def _floor(st: Stalls) -> str:
    """Noise floor per value size: the largest |A/A| of a single case over all backends."""
    floor: dict[int, float] = {}
    for cases in st["backends"].values():
        for key, case in cases.items():
            n = int(key.split(":")[1])
            floor[n] = max(floor.get(n, 0.0), abs(case["aa_ms"]))
    return ", ".join(f"{size_label(n)}: {v:.3f} ms" for n, v in sorted(floor.items()))


def _bound(pc: PerCall | None) -> tuple[str, list[VerdictRow]]:
    """The bound from section 1 (the wrapper's own time on the loop): a paragraph and a verdict."""
    if not pc:
        return "", []
    a = max(pc["backends"][b]["ops"]["aget_found"]["ours_added_ns"] for b in BACKENDS) / 1e6
    s = max(pc["backends"][b]["ops"]["aset"]["ours_added_ns"] for b in BACKENDS) / 1e6
    verdict = VerdictRow(
        f"2. (bound, not the ticker) wrapper's own time on the loop per aget / aset ≤ {STALL_ADDED_MS} ms",
        f"{max(a, s):.4f} ms (section 1, worst backend and op)",
        judge(max(a, s) <= STALL_ADDED_MS),
    )
    text = (
        "Direct bound: the wrapper has no `await` of its own besides the inner call, so all it can add to "
        "any stall is its own synchronous time on the loop thread, measured in section 1: at most "
        f"**{a:.4f} ms** per `aget` and **{s:.4f} ms** per `aset` (worst backend), about "
        f"{STALL_ADDED_MS / max(a, s):,.0f}x below the target. The worker thread never touches the loop; "
        "it only competes for the GIL during a flush (section 3)."
    )
    return text, [verdict]


def _why(st: Stalls) -> list[str]:
    return [
        f"- **Stall, {c['op']} {size_label(c['size'])}: {c['added_ms']:+.3f} ms added at the median** over "
        f"all backends, 95% CI [{c['ci_ms'][0]:+.3f}, {c['ci_ms'][1]:+.3f}] ms (A/A {c['aa_ms']:+.3f} ms). A "
        "request holds the loop for several ms at this size and its duration varies with the machine's "
        f"load far more than {STALL_ADDED_MS} ms, so the ticker cannot settle this within the run's "
        "budget. The wrapper itself runs well under a microsecond per call on the loop (bound row), "
        "with no I/O and no lock wait there."
        for c in st["pooled"]
        if c["added_ms"] > STALL_ADDED_MS
    ]


def render(results: Results) -> Rendered:
    st: Stalls = data_of(results, "stalls")
    pooled = [_pooled(c, len(st["backends"])) for c in st["pooled"]]
    rows = [_case_row(b, key, case) for b, cases in st["backends"].items() for key, case in cases.items()]
    bound, bound_verdict = _bound(data_of(results, "percall"))
    pooled_header = ["op", "value", "paired requests", "added ms (median)", "95% CI ms", "A/A ms (median)"]
    case_header = [
        "backend",
        "op",
        "value",
        "bare ms",
        "wrapped ms",
        "bare again (A/A) ms",
        "added ms",
        "A/A ms",
    ]
    sizes = ", ".join(size_label(n) for n in st["sizes"])
    text = join(
        "## 2. Event-loop stalls on `aget` / `aset`",
        f"Target: **no added stall beyond noise (≤ {STALL_ADDED_MS} ms at the median)**.",
        METHOD.format(sizes=sizes, warm=st["warm"], rounds=st["rounds"]),
        POOLING.format(pairs=st["rounds"] * st["warm"], target=STALL_ADDED_MS),
        table([*pooled_header, "verdict"], [row for row, _ in pooled], "llrrrrl"),
        table([*case_header, "verdict"], rows, "lllllllrl"),
        f"Largest |A/A| of a single case, per size: {_floor(st)}.",
        bound,
    )
    return Rendered(text, [v for _, v in pooled] + bound_verdict, _why(st))
