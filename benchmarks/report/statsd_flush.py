"""Section 13 of the page: one StatsD flush of 150,000 series into statsd_exporter, paced and unpaced."""

from __future__ import annotations

import statistics

from ..results import Results, data_of
from ..statsd_flush import ARMS, StatsdFlush, Trial, lost, of_arm
from .markdown import Rendered, join, table
from .targets import Verdict, VerdictRow, judge

METHOD = (
    "Method (`benchmarks/statsd_flush.py`): what an API server worker with `count_at = api_server` and "
    "`backend = statsd` sends when every series moved in one flush interval: {series:,} series ({dags:,} "
    "DAGs x 10 tasks x 3 calls, {mb:.1f} MB of lines), counted once each on the product's emitter and "
    "handed over by one `flush()`, into a fresh statsd_exporter 0.28.0 (the Airflow chart's pin, the "
    "exported mappings) on 127.0.0.1. Arms, {trials} trials each, interleaved, a fresh exporter each: "
    "**paced** (the default `max_udp_rate`, {rate:,} bytes/s after the first 64 KiB, formatted and sent "
    "1,000 series at a time) and **unpaced, one burst** (`max_udp_rate = 0`, every line formatted "
    "first and then sent at once: how every flush was sent before), both with "
    "`--statsd.read-buffer={buffer}` "
    "(what the docs recommend; the kernel's `net.core.rmem_max` here is {rmem:,}), and paced with the "
    "exporter's default buffer. Lost = lines sent minus `statsd_exporter_lines_total` once a marker sent "
    "after the flush was counted (the exporter reads its socket in order)."
)


def _row(arm: str, trials: list[Trial]) -> list[str]:
    losses = [lost(t) for t in trials]
    sent = trials[0]["lines_sent"]
    seconds = [t["flush_seconds"] for t in trials]
    return [
        arm,
        ", ".join(f"{n:,}" for n in losses),
        f"{100 * statistics.median(losses) / sent:.0f}%",
        ", ".join(f"{t['counts']['kernel_drops']:,}" for t in trials),
        f"{statistics.median(seconds):.2f} s ({min(seconds):.2f}-{max(seconds):.2f})",
    ]


def render(results: Results) -> Rendered:
    r: StatsdFlush = data_of(results, "statsd_flush")
    paced, unpaced = of_arm(r, "paced"), of_arm(r, "unpaced, one burst")
    worst = max(lost(t) for t in paced)
    unpaced_median = statistics.median(lost(t) for t in unpaced)
    end = r["task_end"]
    verdicts = [
        VerdictRow(
            f"13. one flush of {r['series']:,} series into statsd_exporter, recommended read buffer: 0 lost",
            f"paced: {worst:,} lost in the worst of {len(paced)} (unpaced: {unpaced_median:,.0f} lost, "
            f"{100 * unpaced_median / r['series']:.0f}%, median)",
            judge(worst == 0),
        ),
        VerdictRow(
            f"13. a task's flush of {r['series']:,} series returns within `flush_timeout` "
            f"({end['flush_timeout']:g} s), the rest sent later, each series once",
            f"{end['call_seconds']:.2f} s (unpaced, one burst: {end['burst_call_seconds']:.2f} s); "
            f"{end['lines_first']:,} lines left by then, {end['lines_total']:,} of {end['lines_sent']:,} "
            f"after the background flushes{', each series once' if end['series_once'] else ''}",
            judge(
                end["call_seconds"] <= end["flush_timeout"] and end["series_once"],
                # The same run's baseline: the same call without the pace, over its bound by as much.
                gap=end["call_seconds"] - end["flush_timeout"],
                noise=end["burst_call_seconds"] - end["flush_timeout"]
                if end["series_once"]
                else float("nan"),
            ),
        ),
    ]
    seconds = {arm: statistics.median(t["flush_seconds"] for t in of_arm(r, arm)) for arm, *_ in ARMS}
    paced_s, burst_s = seconds["paced"], seconds["unpaced, one burst"]
    text = join(
        "## 13. One StatsD flush of a large deployment: paced and unpaced",
        METHOD.format(
            series=r["series"],
            dags=r["dags"],
            mb=r["bytes_per_flush"] / 1e6,
            trials=len(paced),
            rate=r["default_rate"],
            buffer=r["read_buffer"],
            rmem=r["rmem_max"],
        ),
        table(
            [
                "arm",
                "lines lost, each trial",
                "lost (median)",
                "datagrams the kernel dropped",
                "flush (median, range)",
            ],
            [_row(arm, of_arm(r, arm)) for arm, *_ in ARMS],
            "lrrrr",
        ),
        f"The pace costs the flush time, on the emitter's own thread: {paced_s:.2f} s against "
        f"{burst_s:.2f} s in one burst ({paced_s / burst_s:.1f}x; the floor at this rate is "
        f"{r['bytes_per_flush'] / r['default_rate']:.1f} s, the rest is formatting the lines on this "
        "busy machine). Past `flush_interval` (10 s by default) a background flush keeps what it has not "
        "sent for the next one: at the default rate one interval carries about "
        f"{r['default_rate'] * 10 / (r['bytes_per_flush'] / r['series']):,.0f} lines of this size. "
        "A task is not held longer: its end waits `flush_timeout` at most, and the pace stops before "
        f"that wait is over. The same {r['series']:,} series flushed as a task's end flushes them "
        f"(`flush({end['flush_timeout']:g})`): the call returned after {end['call_seconds']:.2f} s, "
        f"{'everything sent' if end['returned'] else 'not everything sent'} (the same call unpaced, in "
        f"one burst: {end['burst_call_seconds']:.2f} s; past the bound, the difference is how late a "
        f"waiting thread gets the CPU back on this machine), with {end['lines_first']:,} "
        f"lines counted by then; the following background flushes (every 5 s here) brought the "
        f"total to {end['lines_total']:,} of "
        f"{end['lines_sent']:,}"
        + (", every series exactly once." if end["series_once"] else ".")
        + " Load average (1 min) at the end of the run: "
        f"{r['load_average'][0]:.1f}.",
    )
    why = []
    if any(v.verdict is not Verdict.MET for v in verdicts):
        why.append(
            f"- **StatsD flush**: paced, {worst:,} of {r['series']:,} lines lost in the worst trial "
            "(section 13): on a machine this busy, statsd_exporter's one reader may not get a CPU for "
            "longer than its buffer holds at the pace; lower `max_udp_rate` or raise the buffer."
        )
    return Rendered(text, verdicts, why)
