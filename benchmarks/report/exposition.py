"""Section 16 of the page: an API server worker's scrape endpoint, native against the OpenTelemetry
SDK's Prometheus exporter and against a plain join of the same lines."""

from __future__ import annotations

import statistics

from ..exposition import Arm, Exposition
from ..results import Results, data_of
from .markdown import Rendered, join, table
from .targets import Verdict, VerdictRow, judge

#: The issue's targets at 150,000 series.
STALL_MS = 5.0
JOIN_RATIO = 5.0
KIB_PER_SERIES = 1.5

METHOD = (
    "Method (`benchmarks/exposition.py`): one fresh process per arm and size, building its emitter as an "
    "API server worker with `count_at = api_server` and `otel_exporter = prometheus` does (cumulative, "
    "its identity as instance id), with the task-side series of a deployment (DAGs x 10 tasks x the "
    "`write`, `read_found` and `delete` counters) counted once each, served with `server_exposition = "
    "native` or `otel`. An asyncio loop in the same process runs the 1 ms ticker (`testbed/ticker.py`); "
    "the endpoint is scraped once by `curl` (the first scrape), then over a socket from a thread of the "
    "process, {scrapes} times, with 1% of the series counted again before each (what a 15 s scrape "
    "interval sees move). Stall: the ticker's longest sleep during a scrape (idle: the same over 0.3 s "
    "with no scrape before each scrape, the machine's floor in that process: the A/A arm). Plain join: "
    "the scraped text's lines, already made, joined into one string in the same process (median of "
    "5). Memory: the process's RSS from before the series "
    "were made to after the first scrape (made by `curl`, so no reader's copy of the text is in the "
    "process), per series, the emitter's series included; in brackets from after the series were made: "
    "what the exposition adds. Rendering into memory: the same rendering into a list, no socket, after "
    "1% of the series moved (median of 3)."
)


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _later(arm: Arm) -> tuple[float, float, float]:
    """Median scrape seconds, median and longest stall (ms) of the scrapes after the first."""
    seconds = [s["seconds"] for s in arm["scrapes"]]
    stalls = [s["stall_ms"] for s in arm["scrapes"]]
    return _median(seconds), _median(stalls), max(stalls)


def _row(arm: Arm) -> list[str]:
    if "failed" in arm:
        return [f"{arm['series']:,}", arm["mode"], f"failed: {arm['failed']}", *["-"] * 7]
    seconds, stall, longest = _later(arm)
    render = arm["render_seconds"][1 : 1 + len(arm["scrapes"])]
    memory = arm.get("render_memory_seconds", 0.0)
    return [
        f"{arm['series']:,}",
        arm["mode"],
        f"{arm['first']['seconds']:.3f} s ({arm['first']['stall_ms']:,.0f} ms)",
        f"{seconds:.3f} s",
        f"{_median(render):.3f} s ({memory:.3f} s)" if render else "-",
        f"{arm['join_seconds'] * 1000:.1f} ms",
        f"{_ratio(seconds, arm['join_seconds']):,.1f}x",
        f"{stall:,.1f} / {longest:,.1f} ms",
        f"{_median(arm['idle_stall_ms']):.1f} ms",
        f"{arm['rss_per_series'] / 1024:.2f} KiB ({arm['rss_exposition_per_series'] / 1024:.2f})",
    ]


def _arm(r: Exposition, mode: str, series: int) -> Arm | None:
    found = [a for a in r["arms"] if a["mode"] == mode and a["series"] == series]
    return found[0] if found else None


def render(results: Results) -> Rendered:
    r: Exposition = data_of(results, "exposition")
    largest = max(r["sizes"])
    native, otel = _arm(r, "native", largest), _arm(r, "otel", largest)
    assert native is not None and otel is not None
    seconds, stall, longest = _later(native)
    idle = native["idle_stall_ms"]
    otel_failed = otel.get("failed")
    otel_seconds, otel_stall, otel_longest = _later(otel) if not otel_failed else (0.0, 0.0, 0.0)
    otel_says = f"OpenTelemetry exporter: failed ({otel_failed})" if otel_failed else ""
    ratio = _ratio(seconds, native["join_seconds"])
    render_ratio = _ratio(
        _median(native["render_seconds"][1 : 1 + len(native["scrapes"])]), native["join_seconds"]
    )
    memory_ratio = _ratio(native.get("render_memory_seconds", 0.0), native["join_seconds"])
    kib = native["rss_per_series"] / 1024
    verdicts = [
        VerdictRow(
            f"16. event loop blocked per scrape, {largest:,} series: ≤ {STALL_MS:g} ms",
            f"native: {stall:.1f} ms median, longest {longest:.1f} ms (the same loop idle: "
            f"{_median(idle):.1f} ms median, {min(idle):.1f}-{max(idle):.1f}; "
            + (
                otel_says
                or f"OpenTelemetry exporter: {otel_stall:,.0f} ms median, {otel_longest:,.0f} longest"
            )
            + ")",
            # The figure is the median, as the issue's probe's; the A/A spread is the idle windows'.
            judge(stall <= STALL_MS, gap=stall - STALL_MS, noise=max(idle) - min(idle)),
        ),
        VerdictRow(
            f"16. scrape time, {largest:,} series: ≤ {JOIN_RATIO:g}x a plain join of the same lines",
            f"native: {seconds:.3f} s end to end, {ratio:.1f}x the join "
            f"({native['join_seconds'] * 1000:.1f} ms); the endpoint's time in the scrape "
            f"{render_ratio:.1f}x, its rendering into memory {memory_ratio:.1f}x; "
            + (
                otel_says
                or f"OpenTelemetry exporter: {otel_seconds:.2f} s, "
                f"{_ratio(otel_seconds, otel['join_seconds']):,.0f}x"
            ),
            judge(ratio <= JOIN_RATIO),
        ),
        VerdictRow(
            f"16. worker memory per series, {largest:,} series: ≤ {KIB_PER_SERIES:g} KiB",
            f"native: {kib:.2f} KiB, of which {native['rss_exposition_per_series'] / 1024:.2f} KiB the "
            "exposition's (the rest is the emitter's series); "
            + (
                otel_says
                or f"OpenTelemetry exporter: {otel['rss_per_series'] / 1024:.2f} KiB, "
                f"{otel['rss_exposition_per_series'] / 1024:.2f} KiB"
            ),
            judge(kib <= KIB_PER_SERIES),
        ),
    ]
    text = join(
        "## 16. An API server worker's scrape endpoint: native and the OpenTelemetry exporter",
        METHOD.format(scrapes=len(native["scrapes"])),
        table(
            [
                "series",
                "exposition",
                "first scrape (stall)",
                "scrape, later (median)",
                "of which rendering (into memory)",
                "plain join",
                "scrape / join",
                "stall, later (median / longest)",
                "idle stall",
                "RSS per series (of which the exposition)",
            ],
            [_row(a) for a in sorted(r["arms"], key=lambda a: (a["series"], a["mode"]))],
            "llrrrrrrrr",
        ),
        "The first scrape makes every line once (label part included): "
        f"{native['first']['seconds']:.2f} s at {largest:,} series, on the endpoint's thread, in pieces. "
        "After that a scrape reads the totals of the series that moved since the last one (each counter "
        "series reports its first add after a scrape), makes again only their lines, joins again only the "
        "blocks of 1,000 lines that hold one and writes the others as joined before, so it costs the "
        "changed lines and their blocks' joins, plus the transfer; the loop in the same process "
        "waits for at most a few milliseconds of that work at a time. The OpenTelemetry exporter builds "
        "every series again on every scrape, and what holds the loop is the cyclic garbage collector"
        + (
            f": at {largest:,} series in this run its collection outran the SDK's own timeout (10 s), so "
            "its endpoint answered 500 and Prometheus would have had no sample. "
            if otel_failed
            else f": at {largest:,} series the longest collection during each of its scrapes was "
            f"{_median([x['gc_ms'] for x in otel['scrapes']]):,.0f} ms at the median against a stall of "
            f"{otel_stall:,.0f} ms (native: {max(x['gc_ms'] for x in native['scrapes']):,.1f} ms at most). "
        )
        + "Load average (1 min) at the end of the largest native arm: "
        f"{native['load_average'][0]:.1f}.",
    )
    why = []
    if any(v.verdict is not Verdict.MET for v in verdicts):
        why.append(
            "- **Scrape endpoint** (section 16): the plain join is one C call over lines already made; a "
            "scrape also makes the lines of the series that moved, joins again each block of 1,000 lines "
            "that holds one (1% of the series moved, spread evenly, touches every block), sleeps briefly "
            "every few blocks so the loop can run (on a loaded machine a sleep costs more than asked), "
            "sends the text over a socket and reads "
            "it back in the same process. The stall figure cannot go below the idle loop's floor on this "
            "machine. Memory: most of a series' cost is the emitter's own series (its lock, its tag "
            "tuples, the registry's entries), the same under either exposition."
        )
    return Rendered(text, verdicts, why)


MEMORY_METHOD = (
    "`max_series` caps the series of one emitter (one process), whatever its backend, so what one "
    "series costs is what the default cap lets a process hold. Method (`benchmarks/series_memory.py`): "
    "one fresh process per backend, its emitter built as the product builds it (`statsd` and "
    "`dogstatsd` to a UDP port on 127.0.0.1 that a thread reads and discards; `otel` as an API server "
    "worker with `otel_exporter = prometheus` and its `native` endpoint; the OpenTelemetry SDK's "
    "exporter, `server_exposition = otel`, is measured in section 16), {series:,} task-side counter "
    "series (DAGs x 10 tasks x `write`, `read_found`, "
    "`delete`) counted once each, then delivered once (StatsD: one flush, paced, to its end; otel: "
    "one scrape by `curl`); RSS from before the emitter was made to after the delivery, per series."
)
#: What the default cap must hold: 5,000 DAGs x 10 tasks x 3 operations.
FIT_SERIES = 5_000 * 10 * 3


def memory(results: Results) -> Rendered:
    """Memory per series for each backend the cap applies to, and the default cap it allows."""
    r = data_of(results, "series_memory")
    cap = r["max_series_default"]
    rows = []
    for arm in r["arms"]:
        per = arm["rss_per_series"]
        rows.append(
            [
                arm["backend"] + (f" ({arm['exposition']})" if arm["exposition"] else ""),
                f"{arm['series']:,}",
                f"{per / 1024:.2f} KiB",
                f"{per * cap / 2**20:,.0f} MiB",
                f"{arm['delivered_seconds']:.2f} s",
            ]
        )
    per = [a["rss_per_series"] for a in r["arms"]]
    lo, hi = min(per), max(per)
    named = max(r["arms"], key=lambda a: a["rss_per_series"])
    verdicts = [
        VerdictRow(
            f"17. default `max_series` fits 5,000 DAGs x 10 tasks x 3 operations ({FIT_SERIES:,} series)",
            f"{cap:,} (a process holding that many: {lo * cap / 2**20:,.0f}-{hi * cap / 2**20:,.0f} MiB at "
            f"the {lo / 1024:.2f}-{hi / 1024:.2f} KiB per series measured at {r['series']:,} series, the "
            f"most with {named['backend']} {named['exposition']})".replace(" )", ")"),
            judge(cap >= FIT_SERIES),
        )
    ]
    text = join(
        "## 17. Memory per series, and the default series cap",
        MEMORY_METHOD.format(series=r["series"]),
        _run_line(results),
        table(
            ["backend", "series", "RSS per series", f"at the default cap ({cap:,})", "delivery took"],
            rows,
            "lrrrr",
        ),
        f"The default `max_series` is {cap:,}: a worker with `count_at = api_server` holds 5,000 DAGs x 10 "
        f"tasks x 3 operations ({FIT_SERIES:,} series) and the API server's own, with room to spare; a "
        f"process that reaches the cap holds {lo * cap / 2**20:,.0f} to {hi * cap / 2**20:,.0f} MiB of "
        "series by these figures. Set it lower where a process's memory matters more than the DAGs it "
        "attributes (past the cap, new tag sets are counted under `<overflow>`).",
    )
    return Rendered(text, verdicts)


def _run_line(results: Results) -> str:
    run = results["sections"]["series_memory"]["run"]
    return f"Measured {run['date']} ({run['mode']}), load average {run['load_start']} → {run['load_end']}."
