"""Section 7 of the page: the API server under sustained load, and faults under load."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from testbed.values import SIZES_BYTES, size_label

from ..common import median
from ..load import KILL_ARMS, WORKERS, Block, Config, FaultResult, KillBlock, Load, kill_schedule, schedule
from ..load_airflow import STALL_REPORT
from ..results import Results, data_of
from ..server import Server
from . import targets
from .markdown import Rendered, join, mib, table
from .targets import MiB, VerdictRow, judge, judge_ratio


@dataclass(frozen=True)
class Summary:
    """One concurrency: medians per arm (on, off), their ratios, and the spreads between two
    blocks of one arm (larger over smaller; NaN with one block per arm)."""

    rps: tuple[float, float]
    p50: tuple[float, float]
    p99: tuple[float, float]
    p999: tuple[float, float]
    cpu: tuple[float, float]
    off_spread: tuple[float, float]  # throughput, p99
    noise: tuple[float, float]  # the larger spread of the two arms: throughput, p99

    @property
    def rps_ratio(self) -> float:
        return _div(*self.rps)

    @property
    def p99_ratio(self) -> float:
        return _div(*self.p99)

    @property
    def cpu_ratio(self) -> float:
        return _div(*self.cpu)


def _div(a: float, b: float) -> float:
    """``a / b``, or NaN when a block measured nothing (a quick run on a machine too busy to answer)."""
    return a / b if b else math.nan


def _spread(values: list[float]) -> float:
    return max(values) / min(values) if len(values) >= 2 and min(values) > 0 else math.nan


def _largest(*values: float) -> float:
    return max((v for v in values if not math.isnan(v)), default=math.nan)


def _summary(blocks: list[Block], c: int) -> Summary:
    on = [b for b in blocks if b["arm"] == "on" and b["concurrency"] == c]
    off = [b for b in blocks if b["arm"] == "off" and b["concurrency"] == c]

    def both(figure: Callable[[Block], float]) -> tuple[float, float]:
        return median(figure(b) for b in on), median(figure(b) for b in off)

    def spreads(figure: Callable[[Block], float]) -> tuple[float, float]:
        return _spread([figure(b) for b in on]), _spread([figure(b) for b in off])

    rps, p99 = spreads(lambda b: b["window"]["rps"]), spreads(lambda b: b["window"]["p99_ms"])
    return Summary(
        rps=both(lambda b: b["window"]["rps"]),
        p50=both(lambda b: b["window"]["p50_ms"]),
        p99=both(lambda b: b["window"]["p99_ms"]),
        p999=both(lambda b: b["window"]["p999_ms"]),
        cpu=both(lambda b: b["cpu_ms_per_request"]),
        off_spread=(rps[1], p99[1]),
        noise=(_largest(*rps), _largest(*p99)),
    )


def _growth(b: Block) -> float:
    return float(b["rss_end"] - b["rss_start"])


def _apart(spread: float) -> str:
    """What two blocks of one arm differ by, for a verdict's figure."""
    if math.isnan(spread):
        return "one block per arm: no spread measured"
    return f"two blocks of one arm: up to {spread:.3f}x apart"


def _ratio_verdicts(sums: dict[int, Summary]) -> list[VerdictRow]:
    rows = []
    for c, s in sums.items():
        rows.append(
            VerdictRow(
                f"7. load, {c} clients: throughput plugin on / off ≥ {targets.LOAD_THROUGHPUT_RATIO}",
                f"{s.rps_ratio:.3f} ({s.rps[0]:.1f} / {s.rps[1]:.1f} req/s; {_apart(s.noise[0])})",
                judge_ratio(s.rps_ratio, s.rps_ratio >= targets.LOAD_THROUGHPUT_RATIO, s.noise[0]),
            )
        )
        rows.append(
            VerdictRow(
                f"7. load, {c} clients: p99 latency on / off ≤ {targets.LOAD_P99_RATIO}",
                f"{s.p99_ratio:.3f} ({s.p99[0]:.0f} / {s.p99[1]:.0f} ms; {_apart(s.noise[1])})",
                judge_ratio(s.p99_ratio, s.p99_ratio <= targets.LOAD_P99_RATIO, s.noise[1]),
            )
        )
    return rows


def _block_verdicts(lo: Load) -> list[VerdictRow]:
    on = [b for b in lo["blocks"] if b["arm"] == "on"]
    off = [b for b in lo["blocks"] if b["arm"] == "off"]
    on_5xx = sum(b["window"]["status"].get("5xx", 0) for b in on)
    off_5xx = sum(b["window"]["status"].get("5xx", 0) for b in off)
    growth_on, growth_off = median(_growth(b) for b in on), median(_growth(b) for b in off)
    noise = max((abs(_growth(b)) for b in off), default=0.0)
    exact = [b for b in on if b["exactness"] and b["exactness"]["exact"]]
    counted = sum(b["exactness"]["counted"] for b in on if b["exactness"])
    return [
        VerdictRow(
            "7. load: zero 5xx caused by the plugin",
            f"5xx on {on_5xx}, off {off_5xx}; server log lines naming store_metrics/ code: "
            f"{lo['plugin_in_tracebacks']}",
            judge(on_5xx == 0 and lo["plugin_in_tracebacks"] == 0),
        ),
        VerdictRow(
            f"7. load: RSS growth over a {lo['config']['seconds']:g} s block within the noise of off",
            f"median on {growth_on / MiB:+.1f} MiB, off {growth_off / MiB:+.1f} MiB (largest |growth| of an "
            f"off block {noise / MiB:.1f} MiB)",
            judge(growth_on - growth_off <= max(noise, MiB)),
        ),
        VerdictRow(
            "7. load: server totals = client totals per (store, operation, outcome), every block",
            f"{len(exact)} of {len(on)} blocks exact ({counted:,} requests)",
            judge(len(exact) == len(on)),
        ),
    ]


def _worst_problem(f: FaultResult) -> int:
    """The most lines any one problem got during a fault block (stall reports aside)."""
    return max((n for kind, n in f["problems"].items() if kind != "stall report"), default=0)


def _processes(f: FaultResult) -> int:
    """Worker processes that served during a fault block (a killed worker's successor is one more)."""
    return WORKERS + (1 if f["killed_pid"] is not None else 0)


def _fault_verdicts(lo: Load, noise: float) -> list[VerdictRow]:
    rows = []
    for f in lo["faults"]:
        ratio, ph = f["ratio_during"], f["phases"]
        apart = (
            f"; two identical blocks of this run: up to {noise:.3f}x apart" if not math.isnan(noise) else ""
        )
        rows.append(
            VerdictRow(
                f"7. fault, {f['name']}: throughput during ≥ {targets.FAULT_THROUGHPUT_RATIO} of before",
                f"{ratio:.3f} ({ph['during']['rps']:.1f} / {ph['before']['rps']:.1f} req/s{apart})",
                judge_ratio(ratio, ratio >= targets.FAULT_THROUGHPUT_RATIO, noise),
            )
        )
    kills = Kills(lo["kills"])
    for arm in ("on", "off"):
        rows.append(
            VerdictRow(
                f"7. fault, {kills.name(arm)}: throughput during ≥ {targets.FAULT_THROUGHPUT_RATIO} of "
                "before (median of the interleaved blocks)",
                f"{kills.median(arm):.3f} (blocks: {kills.ratios_text(arm)}; A/A: {kills.aa_text()})",
                judge_ratio(
                    kills.median(arm), kills.median(arm) >= targets.FAULT_THROUGHPUT_RATIO, kills.aa_spread
                ),
            )
        )
    worst = {f["name"]: (_worst_problem(f), _processes(f)) for f in lo["faults"]}
    for arm in KILL_ARMS:
        blocks = kills.of(arm)
        if blocks:
            worst[kills.name(arm)] = (max(_worst_problem(f) for f in blocks), _processes(blocks[0]))
    rows.append(
        VerdictRow(
            "7. faults: at most one store-metrics log line per problem (and worker process)",
            "; ".join(f"{n}: {k} ({p} worker processes)" for n, (k, p) in worst.items()),
            judge(all(k <= p for k, p in worst.values())),
        )
    )
    rows += _kill_on_off(kills)
    rows += [_delivery_verdict(f) for f in lo["faults"] if f["server"] != "off"]
    rows.append(_kill_delivery_verdict(kills))
    return rows


class Kills:
    """The interleaved worker-kill blocks: per arm, the ratios throughput during / before."""

    def __init__(self, blocks: list[KillBlock]) -> None:
        self.blocks = blocks

    def of(self, arm: str) -> list[KillBlock]:
        return [b for b in self.blocks if b["arm"] == arm]

    @staticmethod
    def name(arm: str) -> str:
        return {
            "on": "one API server worker killed (SIGKILL), plugin on",
            "off": "one API server worker killed (SIGKILL), plugin off",
            "aa": "one API server worker killed (SIGKILL), plugin off, A/A",
        }[arm]

    def ratios(self, arm: str) -> list[float]:
        return [b["ratio_during"] for b in self.of(arm)]

    def median(self, arm: str) -> float:
        return median(self.ratios(arm))

    def ratios_text(self, arm: str) -> str:
        return ", ".join(f"{r:.3f}" for r in self.ratios(arm))

    @property
    def aa_spread(self) -> float:
        """The A/A spread: the larger over the smaller of the two plugin-off arms' medians."""
        return _spread([self.median("off"), self.median("aa")])

    def aa_text(self) -> str:
        return (
            f"the same kill on the off server in two interleaved arms, medians {self.median('off'):.3f} / "
            f"{self.median('aa'):.3f}, {self.aa_spread:.3f}x apart"
        )

    def replaced(self, arm: str) -> float:
        """Median seconds from the kill until the successor's app had started."""
        return median(b["replaced_after_s"] for b in self.of(arm) if b["replaced_after_s"] is not None)


def _kill_on_off(kills: Kills) -> list[VerdictRow]:
    """The worker kill with the plugin against without: the medians of the interleaved blocks'
    ratios during / before, on over off, judged against the A/A spread (the off server's two
    interleaved arms: what this run moves between two identical arms)."""
    if not kills.of("on") or not kills.of("off"):
        return []
    ratio = kills.median("on") / kills.median("off")
    return [
        VerdictRow(
            "7. fault, one API server worker killed: throughput during / before, plugin on ≥ off "
            "(within the A/A spread; medians of interleaved blocks)",
            f"{ratio:.3f} (medians {kills.median('on'):.3f} / {kills.median('off'):.3f} over "
            f"{len(kills.of('on'))} / {len(kills.of('off'))} blocks; A/A: {kills.aa_text()})",
            judge_ratio(ratio, ratio >= 1.0, kills.aa_spread),
        )
    ]


def _kill_delivery_verdict(kills: Kills) -> VerdictRow:
    on = kills.of("on")
    lost = sum(f["lost_total"] for f in on)
    return VerdictRow(
        f"7. fault, {kills.name('on')}: counts after recovery: lost only what came after its last "
        "flush, none twice (every block)",
        f"counted twice: {sum(f['doubled_total'] for f in on)}; lost per block: "
        + ", ".join(f"{f['lost_total']} (bound {f['bound']})" for f in on)
        + f" ({lost} in all): the bound is what was answered since the killed worker's flush before "
        "its last one arrived",
        judge(all(f["doubled_total"] == 0 and f["lost_total"] <= f["bound"] for f in on)),
    )


def _delivery_verdict(f: FaultResult) -> VerdictRow:
    name = f"7. fault, {f['name']}: counts after recovery"
    if "UDP" in f["name"]:
        return VerdictRow(
            name + ": lost only each worker's first flush after the close, none twice",
            f"counted twice: {f['doubled_total']}; lost: {f['lost_total']:,} of {f['client_total']:,} (each "
            f"worker's first flush after the close: at most {f['bound']:,}); "
            f"{f['phases']['during']['requests']:,} answered while the port was closed",
            judge(f["doubled_total"] == 0 and f["lost_total"] <= f["bound"]),
        )
    if "killed" in f["name"]:
        since = f["since_last_flush_s"]
        gap = f"{since:.2f} s" if since is not None else "never"
        return VerdictRow(
            name + ": lost only what came after its last flush, none twice",
            f"counted twice: {f['doubled_total']}; lost: {f['lost_total']} (answered since the killed "
            "worker's "
            f"last flush arrived, {gap} before the kill: {f['estimate']}; since the flush before it: "
            f"{f['bound']})",
            judge(f["doubled_total"] == 0 and f["lost_total"] <= f["bound"]),
        )
    return VerdictRow(
        name + " exactly once",
        f"{f['server_total']:,} of {f['client_total']:,} counted; lost {f['lost_total']}, twice "
        f"{f['doubled_total']}",
        judge(f["exact"]),
    )


def _method(lo: Load) -> str:
    cfg = lo["config"]
    starts = ", ".join(f"{k} {v:.0f} s" for k, v in lo["startup_s"].items())
    others = "; ".join(lo["others_at_start"]) or "nothing above 1% of a core"
    others_end = "; ".join(lo["others_at_end"]) or "nothing above 1% of a core"
    loads = [la for b in lo["blocks"] for la in b["load_average"]]
    order = ", ".join(f"{a} {c}" for a, c in schedule(Config(**cfg)))
    return join(
        f"**Deployment.** `airflow api-server --workers {WORKERS}` (uvicorn; Airflow's own app, the plugin "
        f"from its entry point) on {lo['database']}; a real DAG run of `store_metrics_load` (one task and "
        "one "
        "asset per client) made by `airflow dags trigger`, and for each task instance a token from Airflow's "
        "`JWTGenerator` with the configured `[api_auth] jwt_secret` (`testbed/load_setup.py`). Two "
        "servers side by side: *on* (the plugin's server side, `backend = dogstatsd` to a UDP receiver in "
        f"the benchmark process, `flush_interval = {cfg['flush_interval']:g}`) and *off* (`server_metrics = "
        "false`). Two servers and alternating blocks, rather than a restart before each block: every block "
        "meets a warm, long-lived server (as in production), no block pays a cold start, and a third of the "
        "run is not spent starting servers; the idle server's CPU during the other's blocks is in the table "
        f"(it idles, apart from the stall monitor's ticks on *on*). Startup: {starts}; Airflow home, DAG run "
        f"and tokens: {lo['setup_s']:.0f} s.",
        "**Load.** `testbed/load_client.py` in its own process: `httpx.AsyncClient`, one coroutine per "
        "client, each sending its next request when the last one was answered. Each client has its own task "
        "instance and asset and repeats a fixed cycle: task store PUT 0.4 KB, GET (found), GET (absent), "
        "asset store PUT 0.4 KB, GET (found), GET (absent), task PUT 59 KB, GET (found), task DELETE, asset "
        f"DELETE; every {cfg['big_every']}th cycle adds a task PUT and GET of 689 KB and a clear of both "
        f"stores (value sizes {', '.join(size_label(n) for n in SIZES_BYTES)}, the async-routes proposal's). "
        f"Blocks of {cfg['seconds']:g} s measured after {cfg['warmup']:g} s of warm-up, alternating on/off: "
        f"{order}; each server had {cfg['server_warmup']:g} s of load before its first block. Latency is the "
        "client's (request sent to body read); CPU is the server's processes' user + system time during the "
        "measured window (psutil), per request; RSS is the sum over its processes.",
        "**The machine.** 2 cores shared with other engineers' jobs. Load average (1 min) during the "
        f"blocks: {min(loads):.1f} to {max(loads):.1f}. Busiest other processes at the start: {others}. At "
        f"the end: {others_end}.",
    )


def _block_row(b: Block) -> list[str]:
    w = b["window"]
    none = w["status"].get("none")
    return [
        str(b["index"] + 1),
        b["arm"],
        str(b["concurrency"]),
        f"{w['rps']:.1f}",
        f"{w['p50_ms']:.0f}",
        f"{w['p99_ms']:.0f}",
        f"{w['p999_ms']:.0f}",
        str(w["status"].get("5xx", 0)) + (f" (+{none} no answer)" if none else ""),
        f"{mib(b['rss_start'])} → {mib(b['rss_end'])} ({_growth(b) / MiB:+.1f})",
        f"{b['cpu_ms_per_request']:.2f}",
        f"{b['idle_server_cpu_percent']:.1f}",
        f"{b['load_average'][0]:.1f} / {b['load_average'][1]:.1f}",
    ]


def _summary_row(c: int, s: Summary) -> list[str]:
    return [
        str(c),
        f"{s.rps[0]:.1f} / {s.rps[1]:.1f}",
        f"**{s.rps_ratio:.3f}**",
        f"{s.p50[0]:.0f} / {s.p50[1]:.0f}",
        f"{s.p99[0]:.0f} / {s.p99[1]:.0f}",
        f"**{s.p99_ratio:.3f}**",
        f"{s.p999[0]:.0f} / {s.p999[1]:.0f}",
        f"{s.cpu[0]:.2f} / {s.cpu[1]:.2f} ({s.cpu_ratio:.3f})",
        f"{s.off_spread[0]:.3f} / {s.off_spread[1]:.3f}",
    ]


def _main_tables(lo: Load, sums: dict[int, Summary]) -> str:
    summary_header = ["clients", "req/s on / off", "throughput ratio", "p50 ms on / off", "p99 ms on / off"]
    summary_header += ["p99 ratio", "p99.9 ms on / off", "server CPU ms/request on / off (ratio)"]
    summary_header += ["off spread: req/s / p99"]
    block_header = ["#", "plugin", "clients", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "5xx"]
    block_header += [
        "RSS MiB start → end (growth)",
        "server CPU ms/request",
        "idle server CPU %",
        "load avg start / end",
    ]
    after, end = lo["rss_after_warmup"], lo["rss_after_blocks"]
    return join(
        "### Plugin on vs off",
        "Medians over the blocks of each arm; ratios are of the medians. *Off spread* is the larger over the "
        "smaller of the two *off* blocks at that concurrency (throughput / p99): what this machine moves "
        "between two identical blocks.",
        table(summary_header, [_summary_row(c, s) for c, s in sums.items()], "lrrrrrrrr"),
        "Every block, in the order run:",
        table(block_header, [_block_row(b) for b in lo["blocks"]], "lllrrrrrrrrr"),
        f"RSS over the whole run: *on* {mib(after['on'])} MiB after its warm-up, {mib(end['on'])} MiB "
        "after its "
        f"last block; *off* {mib(after['off'])} → {mib(end['off'])} MiB.",
    )


def _exactness(lo: Load) -> str:
    on = [(b, b["exactness"]) for b in lo["blocks"] if b["exactness"]]
    keys = sorted({k for _, e in on for k in e["by_key"]})
    rows = [[k, *(f"{e['by_key'].get(k, 0):,}" for _, e in on)] for k in keys]
    rows.append(["**all, client**", *(f"**{e['sent']:,}**" for _, e in on)])
    rows.append(["**all, server**", *(f"**{e['counted']:,}**" for _, e in on)])
    rows.append(["equal per key", *("yes" if e["exact"] else f"**no** {e['mismatch']}" for _, e in on)])
    stalls = ", ".join(f"{e['stall_max_ms']:.0f} ms ({e['long_stalls']})" for _, e in on)
    return join(
        "### Exactness under load",
        "For each block with the plugin on: the load generator's own counts by store/operation/outcome (a "
        "2xx "
        "is the operation's outcome, a GET answered 404 `read_absent`, any other status `error`, as the "
        "middleware classifies) and the server's `api_server.state_store.requests` received by the DogStatsD "
        "receiver between the block's start and the moment no count had changed for "
        f"{lo['config']['settle']:g} "
        "s (both workers; everything sent during warm-up included on both sides). Per block (columns in run "
        "order):",
        table(
            ["store/operation/outcome", *(f"block {b['index'] + 1} ({b['concurrency']})" for b, _ in on)],
            rows,
        ),
        f"The stall monitor's largest stall per block with the plugin on (long stalls ≥ 100 ms): {stalls}.\n"
        "Task-side counters against the server's for calls made by tasks under load are tested under "
        "`airflow standalone` (`tests/airflow/test_task_faults.py`).",
    )


def _problem_text(f: FaultResult) -> str:
    kinds = [n for k, n in f["problems"].items() if k != "stall report"]
    stalls = f["problems"].get("stall report", 0)
    return (", ".join(str(n) for n in kinds) or "0") + (f" (+{stalls} stall reports)" if stalls else "")


def _fault_row(f: FaultResult) -> list[str]:
    ph = f["phases"]
    phases = ("before", "during", "after")
    counted = (
        f"{f['server_total']:,} / {f['client_total']:,} (lost {f['lost_total']}, twice {f['doubled_total']})"
    )
    return [
        f["name"],
        " / ".join(f"{ph[p]['rps']:.1f}" for p in phases),
        f"**{f['ratio_during']:.3f}** / {f['ratio_after']:.3f}",
        " / ".join(f"{ph[p]['p99_ms']:.0f}" for p in phases),
        " / ".join(str(ph[p]["status"].get("5xx", 0) + ph[p]["status"].get("none", 0)) for p in phases),
        _problem_text(f),
        "-" if f["server"] == "off" else counted,
    ]


def _fault_note(f: FaultResult) -> str:
    extra = ""
    if f["replaced_after_s"] is not None:
        extra = (
            f" Worker {f['killed_pid']} killed; its successor was serving after "
            f"{f['replaced_after_s']:.1f} s; "
            f"client requests cut off: {f['failures'] or 'none'}."
        )
    said = [line.split("] ", 1)[-1][:300] for line in f["log_lines"] if STALL_REPORT not in line]
    if not said and f["server"] == "otel":
        extra += (
            " The API server does not say so while it runs: its emitter pushes on its interval without an "
            "explicit flush, and the OTel backend reports a failed export only on an explicit flush (a "
            "task's "
            "end; in an API server worker, only its shutdown)."
        )
    logged = "; ".join(f"`{t}`" for t in said) if said else "nothing about it"
    return f"- *{f['name']}*: {f['promise']}. Logged: {logged}.{extra}"


def _faults(lo: Load) -> str:
    cfg = lo["config"]
    header = [
        "fault",
        "req/s before / during / after",
        "ratio during / after",
        "p99 ms before / during / after",
    ]
    header += ["5xx + no answer", "log lines per problem", "counted / sent"]
    return join(
        "### Faults under load",
        f"{cfg['fault_clients']} clients, plugin on unless said; phases of {cfg['phase']:g} s each (before / "
        "during / after the fault); *ratio* is the phase's throughput over *before*'s. Log lines: "
        "store-metrics' warning and error lines the server wrote during the block, per problem (the stall "
        "monitor's reports of long stalls, at most one per worker and flush interval, counted apart). "
        "Counts: "
        "what the receiver got from the server (DogStatsD: deltas during the block; OTLP: the latest "
        "cumulative value per worker and series, over every block of that server) against what the load "
        "generator got back, once nothing had changed for a while after the block.",
        table(header, [_fault_row(f) for f in lo["faults"]], "lrrrrrl"),
        "\n".join(_fault_note(f) for f in lo["faults"]),
        _kills(lo),
    )


def _kill_row(f: KillBlock) -> list[str]:
    ph = f["phases"]
    phases = ("before", "during", "after")
    counted = (
        "-"
        if f["arm"] != "on"
        else f"{f['server_total']:,} / {f['client_total']:,} (lost {f['lost_total']}, bound {f['bound']}, "
        f"twice {f['doubled_total']})"
    )
    replaced = f"{f['replaced_after_s']:.1f}" if f["replaced_after_s"] is not None else "not seen"
    return [
        str(f["order"] + 1),
        {"on": "on", "off": "off", "aa": "off (A/A)"}[f["arm"]],
        " / ".join(f"{ph[p]['rps']:.1f}" for p in phases),
        f"**{f['ratio_during']:.3f}** / {f['ratio_after']:.3f}",
        " / ".join(f"{ph[p]['p99_ms']:.0f}" for p in phases),
        str(sum(f["failures"].values())),
        replaced,
        _problem_text(f),
        counted,
    ]


def _kills(lo: Load) -> str:
    kills = Kills(lo["kills"])
    cfg = lo["config"]
    order = ", ".join({"on": "on", "off": "off", "aa": "A/A"}[a] for _, a in kill_schedule(Config(**cfg)))
    header = ["#", "plugin", "req/s before / during / after", "ratio during / after"]
    header += ["p99 ms before / during / after", "requests cut off", "successor up after s"]
    header += ["log lines per problem", "counted / sent"]
    summary = [
        [
            {"on": "on", "off": "off", "aa": "off (A/A)"}[arm],
            str(len(kills.of(arm))),
            f"**{kills.median(arm):.3f}**",
            f"{_spread(kills.ratios(arm)):.3f}",
            f"{kills.replaced(arm):.1f}",
        ]
        for arm in KILL_ARMS
        if kills.of(arm)
    ]
    setup = lo["plugin_setup_ms"]
    return join(
        "### A worker killed, interleaved",
        f"{cfg['fault_clients']} clients; one of the server's {WORKERS} workers SIGKILLed after the first "
        f"{cfg['phase']:g} s phase (uvicorn's supervisor starts a successor, which imports Airflow and "
        "builds the app again), phases of "
        f"{cfg['phase']:g} s. Blocks interleaved in {cfg['kill_rounds']} rounds, the order rotated each "
        f"round: {order}. *A/A* is the same kill on the *off* server, a second arm of its own: the two off "
        "arms differ only by the machine. After each block the successor is waited for and the server "
        f"is loaded, unmeasured, for {cfg['server_warmup']:g} s, so every block kills a warm worker.",
        table(
            ["plugin", "blocks", "median ratio during / before", "spread in the arm", "successor up, s"],
            summary,
            "lrrrr",
        ),
        f"The medians: on / off **{kills.median('on') / kills.median('off'):.3f}**; A/A (off / off again) "
        f"{kills.aa_spread:.3f}x apart. The plugin's own set-up in a fresh worker process (its server "
        "side imported, the worker's metrics built from `[store_metrics]`, the stall monitor started): "
        f"median {median(setup):.0f} ms over {len(setup)} processes ({', '.join(f'{v:.0f}' for v in setup)} "
        "ms). Every block, in the order run:",
        table(header, [_kill_row(f) for f in lo["kills"]], "llrrrrrrl"),
        _kill_cause(lo, kills),
    )


def _seen(kills: Kills) -> str:
    """In how many blocks the successor's start was seen in the server log within the bench's wait."""
    seen = [f for f in kills.blocks if f["replaced_after_s"] is not None]
    note = (
        ""
        if len(seen) == len(kills.blocks)
        else " (*not seen*: the watcher did not find its start-up line in the log within its 120 s wait)"
    )
    return f"{len(seen)} of {len(kills.blocks)}{note}"


def _kill_cause(lo: Load, kills: Kills) -> str:
    """What a kill costs with and without the plugin, from this run's figures."""
    ratio = kills.median("on") / kills.median("off")
    gap = abs(1.0 - ratio)
    within = gap <= kills.aa_spread - 1.0
    cut = {arm: median(sum(f["failures"].values()) for f in kills.of(arm)) for arm in ("on", "off")}
    up_on, up_off = kills.replaced("on"), kills.replaced("off")
    setup = median(lo["plugin_setup_ms"])
    reading = (
        f"within the {kills.aa_spread:.3f}x the two identical off arms differ by: this run cannot tell "
        "the plugin's effect on a kill from the machine's"
        if within and ratio < 1.0
        else "as much or more throughput with the plugin"
        if ratio >= 1.0
        else f"more than the {kills.aa_spread:.3f}x the two identical off arms differ by"
    )
    return (
        f"**What a kill costs, and what the plugin adds.** On / off: {ratio:.3f} ({reading}). "
        + ("A kill costs the same with and without the plugin" if within or ratio >= 1.0 else "A kill costs")
        + ": half the workers until uvicorn's supervisor has started a "
        f"successor, which imports Airflow and builds the app again (up after {up_on:.1f} s with the plugin, "
        f"{up_off:.1f} s without, medians of the blocks where the watcher saw it: {_seen(kills)}; the State "
        "store views and the root middleware are built in both "
        f"servers), and the requests in flight on the killed worker (median {cut['on']:.0f} cut off with "
        f"the plugin, {cut['off']:.0f} without). What the plugin adds to a successor's start is its set-up, "
        f"{setup:.0f} ms in a fresh process here, taken once; it holds no lock across the fork (uvicorn "
        "spawns, it does not fork), and a successor takes the lowest free worker slot, the killed worker's "
        "among them (the kernel released its lock with the process). A during / before ratio from one "
        "block depends on that block's *before* phase as much as on the kill: hence blocks interleaved, "
        "several per arm, and medians."
    )


def render(results: Results) -> Rendered:
    lo: Load = data_of(results, "load")
    sums = {c: _summary(lo["blocks"], c) for c in lo["config"]["concurrencies"]}
    noise = _largest(*(s.noise[0] for s in sums.values()))
    verdicts = _ratio_verdicts(sums) + _block_verdicts(lo) + _fault_verdicts(lo, noise)
    text = join(
        "## 7. The API server under sustained load, and faults",
        "A real `airflow api-server` driven over HTTP by a real asynchronous load generator; method and "
        "modules: `benchmarks/load.py`, `load_airflow.py`, `testbed/load_client.py`, `load_setup.py`.",
        _method(lo),
        _main_tables(lo, sums),
        _exactness(lo),
        _faults(lo),
    )
    return Rendered(text, verdicts, _why(lo, sums, noise, _middleware_ns(results)))


# -- why ------------------------------------------------------------------------------------------------


def _middleware_ns(results: Results) -> float | None:
    """The middleware's added time per state store request, from section 4 (in process), if measured."""
    sv: Server | None = data_of(results, "server")
    return sv["in_process"]["cases"]["state store request (task get)"]["added_ns"] if sv else None


def _against_noise(what: str, ratio: float, spread: float) -> str:
    """Whether an on/off ratio's distance from 1 is within what two identical blocks differ by."""
    if math.isnan(spread):  # one block per arm
        return f"one block per arm in this run, so no spread to judge the {what} ratio against"
    off_by = abs(1 - ratio)
    if off_by <= spread - 1:
        return (
            f"two blocks of the same arm and load differ by {spread:.3f}x in {what}, more than the "
            f"{off_by * 100:.1f}% between on and off: this run cannot tell the plugin's effect from the "
            "machine's"
        )
    return (
        f"two blocks of the same arm and load differ by only {spread:.3f}x in {what}: the "
        f"{off_by * 100:.1f}% "
        "between on and off is larger than that spread"
    )


def _ratio_why(c: int, s: Summary, middleware_ns: float | None) -> list[str]:
    parts = []
    if s.rps_ratio < targets.LOAD_THROUGHPUT_RATIO:
        parts.append(
            f"throughput ratio {s.rps_ratio:.3f} (target ≥ {targets.LOAD_THROUGHPUT_RATIO}): "
            + _against_noise("throughput", s.rps_ratio, s.noise[0])
        )
    if s.p99_ratio > targets.LOAD_P99_RATIO:
        parts.append(
            f"p99 ratio {s.p99_ratio:.3f} (target ≤ {targets.LOAD_P99_RATIO}): "
            + _against_noise("p99", s.p99_ratio, s.noise[1])
        )
    if not parts:
        return []
    cost = ""
    if middleware_ns:
        cost = (
            f" The middleware's own time per state store request (section 4, in process) is "
            f"{middleware_ns / 1000:.1f} µs, {middleware_ns / (s.cpu[1] * 1e6) * 100:.2f}% of the "
            f"{s.cpu[1]:.2f} ms of CPU the server spends per request here."
        )
    return [
        f"- **Load, {c} clients: " + "; ".join(parts) + ".** Server CPU per request, which other processes' "
        f"load moves less than throughput: {s.cpu[0]:.2f} ms on, {s.cpu[1]:.2f} ms off ({s.cpu_ratio:.3f}x)."
        + cost
    ]


def _fault_why(lo: Load, f: FaultResult, noise: float) -> str:
    ph = f["phases"]
    head = (
        f"- **Fault, {f['name']}: {f['ratio_during']:.3f} of the throughput before** "
        f"({ph['before']['rps']:.1f} "
        f"→ {ph['during']['rps']:.1f} req/s; after: {ph['after']['rps']:.1f})."
    )
    spread = f"{noise:.3f}x" if not math.isnan(noise) else "not measured (one block per arm)"
    p99 = " / ".join(f"{ph[p]['p99_ms']:.0f}" for p in ("before", "during", "after"))
    return (
        head
        + f" Phases of {lo['config']['phase']:g} s; two identical {lo['config']['seconds']:g} s blocks of "
        f"this run differ by up to {spread} in throughput. The plugin's work for a receiver that is down "
        "runs "
        "on its emitter's thread, never on the event loop: the stall monitor's reports and the p99 per phase "
        f"({p99} ms) say whether the loop was held."
    )


def _delivery_why(f: FaultResult) -> str | None:
    if f["server"] == "off" or f["exact"]:
        return None
    if "UDP" in f["name"] and (f["doubled_total"] or f["lost_total"] > f["bound"]):
        return (
            f"- **Fault, {f['name']}: {f['lost_total']:,} counts never arrived and {f['doubled_total']:,} "
            "arrived "
            f"twice, against {f['phases']['during']['requests']:,} requests answered in the "
            f"{f['phases']['during']['seconds']:.0f} s the port was closed and a bound of {f['bound']:,}** "
            "(what "
            "each worker's first flush after the close can carry: the kernel takes that datagram and "
            "learns of "
            "the closed port from the ICMP answer; every later flush is probed, refused and kept). More lost "
            "than that means flushes after the first were taken by the kernel and dropped, or the receiver "
            "read its last datagrams late."
        )
    if "killed" in f["name"] and f["lost_total"] > f["bound"]:
        return (
            f"- **Fault, {f['name']}: {f['lost_total']} counts lost, more than the {f['bound']} requests "
            "answered "
            "since the killed worker's flush before its last one arrived**, which should bound them (the "
            "last "
            "flush drained its counts after that one had arrived). The receiver stamps a flush when its "
            "thread "
            "reads the datagrams; on a machine this busy that can be late, which makes the bound too small."
        )
    return None


def _why(lo: Load, sums: dict[int, Summary], noise: float, middleware_ns: float | None) -> list[str]:
    notes = [note for c, s in sums.items() for note in _ratio_why(c, s, middleware_ns)]
    notes += [
        _fault_why(lo, f, noise) for f in lo["faults"] if f["ratio_during"] < targets.FAULT_THROUGHPUT_RATIO
    ]
    notes += [n for n in (_delivery_why(f) for f in lo["faults"]) if n]
    notes += _kill_why(lo)
    notes += _kill_delivery_why(lo)
    return notes


def _kill_delivery_why(lo: Load) -> list[str]:
    over = [f for f in Kills(lo["kills"]).of("on") if f["lost_total"] > f["bound"]]
    if not over:
        return []
    return [
        "- **Fault, one API server worker killed, plugin on: more counts lost than the bound in "
        f"{len(over)} block(s)** ("
        + ", ".join(f"block {f['order'] + 1}: {f['lost_total']} lost, bound {f['bound']}" for f in over)
        + "). The bound is what was answered since the killed worker's flush before its last one "
        "arrived, found by the worker's tag (its slot, read from the process before the kill); the "
        "receiver stamps a flush when its thread reads the datagrams, which on a machine this busy can "
        "be late and make the bound too small."
    ]


def _kill_why(lo: Load) -> list[str]:
    """Why a worker kill costs throughput at all, and what the plugin adds to it."""
    kills = Kills(lo["kills"])
    if not kills.of("on") or not kills.of("off"):
        return []
    low = [arm for arm in ("on", "off") if kills.median(arm) < targets.FAULT_THROUGHPUT_RATIO]
    if not low:
        return []
    setup = median(lo["plugin_setup_ms"])
    on, off = kills.replaced("on"), kills.replaced("off")
    return [
        f"- **Fault, one API server worker killed: median {kills.median('on'):.3f} of the throughput before "
        f"with the plugin, {kills.median('off'):.3f} without** (A/A {kills.aa_spread:.3f}x). Half the "
        "workers are gone until uvicorn's supervisor has started a successor (a new process importing "
        f"Airflow and building the app on the same 2 cores: up after {on:.1f} s with the plugin, {off:.1f} s "
        "without, medians), and requests in flight on the killed worker get no answer. The plugin's part of "
        f"a successor's start is {setup:.0f} ms (its server side imported, the worker's metrics built, the "
        "stall monitor started; the State store views are built in both servers alike)."
    ]
