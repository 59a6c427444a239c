"""Section 3 of the page: memory and cardinality, one flush, one histogram series, process exit."""

from __future__ import annotations

from ..exitdelay import ExitCase, ExitDelay
from ..flush import Flush
from ..histogram_export import HistogramExport, HistogramRow
from ..memory import Memory
from ..results import Results, data_of
from .markdown import Rendered, join, mib, table
from .targets import EXIT_ADDED_MS, RSS_ALLOWANCE, MiB, VerdictRow, judge

MEMORY_METHOD = (
    "Method: a fresh process per variant wraps {tasks:,} task stores (100 DAGs x 10 tasks, one tag set "
    "each), then makes {calls:,} calls with {calls:,} distinct keys spread over them (get, set, get, "
    "delete in turn; a clear every 1,000th call) on a store that keeps nothing, so only our memory can "
    "grow; backend statsd to a live UDP port, flushing every 0.5 s. `gc.collect()` before each reading; "
    "RSS from `/proc/self/statm`; `sys.getallocatedblocks()` counts live Python allocations."
)
FLUSH_METHOD = (
    "One explicit `flush()` of {series:,} series ({tag_sets:,} tag sets x 5 counters, each bumped once "
    "before every flush), timed from the caller: request to the worker, the whole export, wake-up. "
    "{reps} timed flushes per backend after an untimed first one. Delivery checked after each: lines "
    "received by the UDP sink (another process), or data points collected by the OTel in-memory reader. "
    "No target; for scale. The flush runs on the worker thread; a task thread only feels it through the "
    "GIL."
)
EXIT_METHOD = (
    "Method: a fresh process per run (`python -m benchmarks.exit_probe`), production defaults "
    "(`flush_interval` {flush_interval:g} s, `flush_timeout` {flush_timeout:g} s, `exit_timeout` "
    "{exit_timeout:g} s): configure, work until the worker has opened the backend (at most 1 s), 2,000 "
    "counted calls, then either end the script (*plain exit*: the emitter's exit hook makes the last "
    "flush) or call `flush()` first, as the plugin does at the end of every task (*flush path*), then "
    "end. The child prints `time.monotonic()` just before that part; the parent notes when `waitpid` "
    "returns. Baseline: the same script with backend `none` (plain {plain:.0f} ms, flush path {flush:.0f} "
    "ms). {reps} runs per case, interleaved; medians. The *reference, up* rows run each backend while it "
    "works, to separate what the outage costs from what the backend's libraries cost at exit anyway. "
    "Down = closed port, unresolvable host (`*.invalid`; a failed lookup took {dns_ms:.0f} ms here), or "
    "an OTLP endpoint that accepts TCP connections and never answers."
)


def _memory_verdict(mem: Memory) -> VerdictRow:
    w, b = mem["wrapped"]["points"], mem["bare"]["points"]
    grow_w, grow_b = w[-1]["rss"] - w[1]["rss"], b[-1]["rss"] - b[1]["rss"]
    met = len({p["series"] for p in w}) == 1 and grow_w - grow_b <= RSS_ALLOWANCE
    first, last = w[1]["calls"], w[-1]["calls"]
    return VerdictRow(
        "3. RSS and series independent of keys / calls",
        f"series {w[1]['series']:,} at {first:,} and {w[-1]['series']:,} at {last:,} calls; RSS "
        f"{first:,}→{last:,} calls: wrapped {grow_w / MiB:+.2f} MiB, bare {grow_b / MiB:+.2f} MiB",
        judge(met),
    )


def _memory_reading(mem: Memory) -> str:
    """What the table shows: the up-front cost, then why the blocks grow and RSS does not follow calls."""
    w, b = mem["wrapped"]["points"], mem["bare"]["points"]
    first, last = w[1]["calls"], w[-1]["calls"]
    return (
        f"Wrapping {mem['tasks']:,} tasks costs {mib(w[0]['rss'] - b[0]['rss'], 1)} MiB up front "
        f"({w[0]['series']:,} series: 9 counters per task, created when the task is wrapped). After that "
        f"the series count does not move. The {w[-1]['blocks'] - w[1]['blocks']:+,} allocated blocks between "
        f"{first:,} and {last:,} calls are Python int objects: a count above 256 is a heap object (CPython "
        "caches smaller ints), at most two per series (total and pending), so at most "
        f"{2 * w[-1]['series']:,} blocks whatever the number of calls, where keeping the keys would take "
        "one block per key. The RSS step that comes with them is the allocator touching fresh memory for "
        f"those objects. All {mem['wrapped']['counted']:,} calls were counted."
    )


def memory(results: Results) -> Rendered:
    mem: Memory = data_of(results, "memory")
    rows = [
        [v, f"{p['calls']:,}", mib(p["rss"], 2), f"{p['series']:,}", f"{p['blocks']:,}"]
        for v, variant in (("bare", mem["bare"]), ("wrapped", mem["wrapped"]))
        for p in variant["points"]
    ]
    text = join(
        "## 3. Memory, cardinality, flush and exit",
        "### Memory and cardinality",
        "Target: **resident memory growth and the number of series held do not depend on the number of "
        "keys or calls**. Criterion used: the series count is the same at every checkpoint, and RSS growth "
        "between the first and the last checkpoint exceeds the bare run's by at most "
        f"{RSS_ALLOWANCE // MiB} MiB (allocator noise).",
        MEMORY_METHOD.format(tasks=mem["tasks"], calls=mem["calls"]),
        table(["variant", "calls", "RSS MiB", "series held", "allocated blocks"], rows, "lrrrr"),
        _memory_reading(mem),
    )
    return Rendered(text, [_memory_verdict(mem)])


def flush(results: Results) -> Rendered:
    fl: Flush = data_of(results, "flush")
    rows = []
    for backend, d in fl["backends"].items():
        delivered = f"{d['delivered']:,} / {d['expected']:,}" if d["expected"] else "n/a (sends nothing)"
        rows.append(
            [backend, f"{d['median_ms']:.1f}", f"{d['max_ms']:.1f}", f"{d['per_series_us']:.2f}", delivered]
        )
    header = ["backend", "median ms", "max ms", "µs per series", "delivered (min over flushes)"]
    text = join(
        "### Cost of one flush",
        FLUSH_METHOD.format(series=fl["series"], tag_sets=fl["series"] // 5, reps=fl["reps"]),
        table(header, rows, "lrrrl"),
    )
    return Rendered(text)


def _ratio(x: float) -> str:
    return f"{x:.2f}x" if x >= 0.01 or x <= 0 else f"1/{1 / x:,.0f}"


def _histogram_row(r: HistogramRow) -> list[str]:
    late = r["replay_late_ms"]
    received = r["replay_received"], r["live_received"]
    return [
        r["backend"],
        f"{r['observations']:,}",
        f"{r['replay_caller_ns']:,.0f}",
        f"{r['live_caller_ns']:,.0f}",
        _ratio(r["live_caller_ns"] / r["replay_caller_ns"]),
        f"{r['replay_flush_ms']:.3f}",
        f"{r['live_flush_ms']:.3f}",
        _ratio(r["live_flush_ms"] / r["replay_flush_ms"]),
        f"{late[0]:.1f} / {late[1]:.2f}" if late else "",
        f"{received[0]:,} / {received[1]:,}" if received[0] is not None and received[1] is not None else "",
    ]


def histogram(results: Results) -> Rendered:
    he: HistogramExport = data_of(results, "histogram_export")
    header = ["backend", "observations", "replay: caller ns/obs", "live: caller ns/obs", "caller ratio"]
    header += [
        "replay: flush ms",
        "live: flush ms",
        "flush ratio",
        "loop late during replay, max / median ms",
    ]
    header += ["UDP lines received, replay / live"]
    text = join(
        "### Exporting one histogram series",
        f"Median of {he['reps']} fresh backends each; Airflow's path: {he['airflow_path']}.",
        table(header, [_histogram_row(r) for r in he["rows"]], "lr" + "r" * 8),
    )
    return Rendered(text)


def _exit_row(label: str, d: ExitCase) -> tuple[list[str], list[VerdictRow]]:
    """One case's row; a case with the backend down also gives its two verdicts."""
    is_ref = label.startswith("reference")
    cells, verdicts = [label], []
    for e, what in ((d["plain"], "plain exit"), (d["flush"], "flush() then exit (plugin's path)")):
        verdict = judge(e["added_ms"] <= EXIT_ADDED_MS)
        shown = "" if is_ref else ("met" if verdict.value == "met" else f"**{verdict.value}**")
        cells += [f"{e['delay_ms']:.0f}", f"{e['added_ms']:+.0f} (max {e['max_added_ms']:+.0f})", shown]
        if not is_ref:
            verdicts.append(
                VerdictRow(
                    f"3. exit delay ≤ {EXIT_ADDED_MS:.0f} ms, backend down: {label}, {what}",
                    f"{e['added_ms']:+.0f} ms vs backend none",
                    verdict,
                )
            )
    flushed = d["flush"]["flushed"] or []
    cells.append("yes" if all(flushed) else ("no" if not any(flushed) else "mixed"))
    return cells, verdicts


def _early_exit_why(ex: ExitDelay) -> list[str]:
    early = ex["early_exit_posts"]
    if not (early and min(early) == 0):
        return []
    message = ex["early_exit_stderr"].splitlines()
    said = f' It logged: "{message[-1][:300]}".' if message else ""
    return [
        "- **Counts lost when a process ends right after `configure()`** (not a target; seen while "
        "measuring exit): with backend otel and a working OTLP endpoint, a process that exits before the "
        f"worker has opened the backend delivered {sum(1 for e in early if e)} export(s) in {len(early)} "
        "runs. The worker imports the OTLP exporter inside `open()`; during interpreter shutdown that "
        f"import fails, so the exit flush has nothing to send with.{said} The plugin's task-end `flush()` "
        "waits for `open()` and is not affected."
    ]


def _otlp_down_why(ex: ExitDelay) -> list[str]:
    down = {k: v for k, v in ex["cases"].items() if k.startswith("otel")}
    if not down:
        return []
    ref = ex["cases"].get("reference, up: otel OTLP/HTTP endpoint answering 200")
    plain = max(v["plain"]["added_ms"] for v in down.values())
    flush = max(v["flush"]["added_ms"] for v in down.values())
    notes = []
    if plain > EXIT_ADDED_MS:
        ref_text = (
            f"; the same backend *up* already adds {ref['plain']['added_ms']:.0f} ms at exit (OTel SDK and "
            "exporter teardown, the last export)"
            if ref
            else ""
        )
        notes.append(
            f"- **OTLP down, plain exit: +{plain:.0f} ms.** The exit hook waits `exit_timeout` "
            f"({ex['defaults']['exit_timeout']:g} s) for the worker, whose export is stuck on the endpoint"
            f"{ref_text}. Waiting the whole target leaves no room for anything else at exit."
        )
    if flush > EXIT_ADDED_MS:
        slow = "; ".join(k for k, v in down.items() if v["flush"]["added_ms"] > EXIT_ADDED_MS)
        notes.append(
            f"- **OTLP down, flush path: +{flush / 1000:.2f} s** ({slow}). The `flush()` the plugin makes at "
            f"the end of every task waits up to `flush_timeout` ({ex['defaults']['flush_timeout']:g} s "
            "default) for the export. A refused or unresolvable endpoint is found by a TCP connect and not "
            "waited for; an endpoint that accepts the connection and never answers looks like a slow "
            "collector, and a slow collector gets its time (waiting less would lose the counts of short "
            "tasks whenever the collector is merely slow). The wait comes after the task's state is "
            "reported, and once a wait has run out the process does not wait again; `flush_timeout` sets "
            "the trade-off."
        )
    return notes


def exit_delay(results: Results) -> Rendered:
    ex: ExitDelay = data_of(results, "exitdelay")
    rows, verdicts = [], []
    for label, case in ex["cases"].items():
        row, case_verdicts = _exit_row(label, case)
        rows.append(row)
        verdicts += case_verdicts
    header = ["case", "plain exit ms", "added vs none ms", "verdict", "flush path ms", "added vs none ms"]
    header += ["verdict", "flush() returned True"]
    method = EXIT_METHOD.format(
        **ex["defaults"],
        plain=ex["baseline_ms"]["plain"],
        flush=ex["baseline_ms"]["flush"],
        reps=ex["reps"],
        dns_ms=ex["dns_ms"],
    )
    text = join(
        "### Process exit with the backend down",
        f"Target: **≤ {EXIT_ADDED_MS:.0f} ms added** to process exit when the backend is down.",
        method,
        table(header, rows, "lrrlrrll"),
    )
    return Rendered(text, verdicts, _early_exit_why(ex) + _otlp_down_why(ex))
