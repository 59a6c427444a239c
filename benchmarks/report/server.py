"""Section 4 of the page: the API server side (route metrics middleware and stall monitor)."""

from __future__ import annotations

from testbed.values import size_label

from ..results import Results, data_of
from ..server import InProcess, Monitor, OverHttp, Server
from . import targets
from .markdown import Rendered, join, table
from .targets import STALL_ADDED_MS, VerdictRow, judge

HTTP_METHOD = (
    'A FastAPI app with the task state store routes\' shapes (sync handlers, a `{{"value": JsonValue}}` '
    "body, integer arrays of the given JSON size as sent), served by uvicorn in this process; every "
    "request over HTTP (keep-alive) from another thread; a 1 ms ticker on the server loop records its "
    "longest sleep while the request is in flight (an idle loop reads ~1.1-1.3 ms). Variants "
    "interleaved request by request: *bare* (no middleware, no stall monitor), *instrumented* "
    "(middleware, and the stall monitor at its default tick), *bare again* (A/A). {rounds} round(s) of "
    "{warm} warm requests per variant and case, one cold request per variant dropped. *Added*: median "
    "of paired differences instrumented - bare; the A/A figure is the same statistic for bare again - "
    "bare, what this machine shows when nothing differs. The instrumented server counted {counted:,} "
    "state store requests."
)


def _in_process(ip: InProcess) -> tuple[str, list[VerdictRow]]:
    rows = [
        [label, f"{c['bare_ns']:,.0f}", f"{c['ours_ns']:,.0f}", f"**{c['added_ns']:,.0f}**"]
        for label, c in ip["cases"].items()
    ]
    passing = ip["cases"]["other request (pass-through)"]["added_ns"]
    store = ip["cases"]["state store request (task get)"]["added_ns"]
    verdicts = [
        VerdictRow(
            f"4. other requests: ≤ {targets.PASS_THROUGH_NS / 1000:g} µs added per request (in process)",
            f"{passing:,.0f} ns",
            judge(passing <= targets.PASS_THROUGH_NS),
        ),
        VerdictRow(
            f"4. state store requests: ≤ {targets.STORE_REQUEST_NS / 1000:g} µs added per request "
            "(in process; 1% of a 2.5 ms request)",
            f"{store / 1000:,.1f} µs",
            judge(store <= targets.STORE_REQUEST_NS),
        ),
        VerdictRow(
            f"4. (bound) loop time the middleware adds to a state store request ≤ {STALL_ADDED_MS} ms",
            f"{store / 1e6:.4f} ms (its whole added time runs on the loop)",
            judge(store / 1e6 <= STALL_ADDED_MS),
        ),
    ]
    text = join(
        "### Per request, in process",
        f"An ASGI app that answers at once, called {ip['requests']:,} times per block in one event loop (no "
        f"network), bare and through the middleware (emitter backend `none`), blocks interleaved, "
        f"{ip['rounds']} rounds, medians; *added* is the median of the per-round differences. Other "
        "requests pay one `type` test, one flag test and one substring test; a state store request pays "
        "the route classification, two wrapped ASGI callables, four series updates (count, duration, "
        "request and response size).",
        table(["request", "bare ns", "with middleware ns", "added ns"], rows, "lrrr"),
    )
    return text, verdicts


def _monitor(mon: Monitor) -> tuple[str, list[VerdictRow]]:
    tick, block = mon["default_tick_ms"], mon["block_ms"]
    base = mon["cpu_percent"]["none"]
    ticks = [t for t in mon["cpu_percent"] if t != "none"]
    rows = [
        [
            f"{t} ms" + (" (default)" if float(t) == tick else ""),
            f"{mon['cpu_percent'][t]:.2f}",
            f"{mon['cpu_percent'][t] - base:+.2f}",
            f"{mon['blocked_ms'][t]:.1f}",
        ]
        for t in ticks
    ]
    cpu, blocked = mon["cpu_percent"][f"{tick:g}"] - base, mon["blocked_ms"][f"{tick:g}"]
    verdicts = [
        VerdictRow(
            f"4. stall monitor at the default tick ({tick:g} ms): ≤ {targets.MONITOR_CPU_PERCENT:g}% of a "
            "core, idle loop",
            f"{cpu:+.2f}%",
            judge(cpu <= targets.MONITOR_CPU_PERCENT),
        ),
        VerdictRow(
            f"4. a {block:.0f} ms blocked loop reads within one tick ({tick:g} ms)",
            f"{blocked:.1f} ms",
            judge(block - tick <= blocked <= block + targets.BLOCK_READ_SLACK_MS),
        ),
    ]
    others = ", ".join(f"{mon['cpu_percent'][t] - base:+.2f}% at {t} ms" for t in ticks if float(t) != tick)
    text = join(
        "### The stall monitor",
        f"CPU of this process (`time.process_time`) while its event loop does nothing else for "
        f"{mon['seconds']:g} s, with the monitor at each tick and without (median of {mon['reps']}), as % of "
        f"one core; and the stall the monitor reports for a loop blocked {block:.0f} ms by `time.sleep` (a "
        "stall is measured as how late a tick runs, so it reads up to one tick short). An idle loop pays "
        "mostly for waking up; a busy one is awake anyway and pays the callback: "
        f"{mon['on_tick_ns']:,.0f} ns per tick for the histogram and the gauge.",
        table(["tick", "CPU % of a core", "added vs none", f"{block:.0f} ms block reads (ms)"], rows, "lrrr"),
        f"Default tick: {tick:g} ms. Stalls that matter here are tens to hundreds of ms (the proposal's 59 "
        "KB "
        f"and 689 KB values): {tick:g} ms measures them to within {tick:g} ms for {cpu:+.2f}% of an idle "
        "core "
        f"here, against {others}. Node.js's event-loop delay monitor also defaults to a 10 ms resolution.",
    )
    return text, verdicts


def _http(hp: OverHttp) -> str:
    rows = []
    for key, c in hp["cases"].items():
        method, n = key.split(":")
        lat, stall, peak = c["latency_ms"], c["stall_ms"], c["stall_max_ms"]
        rows.append(
            [
                method,
                size_label(int(n)) if method != "DELETE" else "-",
                f"{lat['bare']:.2f} / {lat['instrumented']:.2f}",
                f"{c['added_latency_ms']:+.3f} (A/A {c['aa_latency_ms']:+.3f})",
                f"{stall['bare']:.2f} / {peak['bare']:.2f}",
                f"{stall['instrumented']:.2f} / {peak['instrumented']:.2f}",
                f"{c['added_stall_ms']:+.3f} (A/A {c['aa_stall_ms']:+.3f})",
            ]
        )
    worst = max(0.0, *(c["added_stall_ms"] for c in hp["cases"].values()))
    worst_aa = max(0.0, *(abs(c["aa_stall_ms"]) for c in hp["cases"].values()))
    header = ["request", "value", "latency bare / instrumented ms", "latency added ms"]
    header += ["stall bare median / max ms", "stall instrumented median / max ms", "stall added ms"]
    return join(
        "### Over HTTP, the proposal's method",
        HTTP_METHOD.format(rounds=hp["rounds"], warm=hp["warm"], counted=hp["counted"]),
        table(header, rows, "llrrrrr"),
        f"Largest median stall added over HTTP: {worst:+.3f} ms; the A/A control moves up to {worst_aa:.3f} "
        "ms in the same run. The middleware itself can add at most its in-process time (above) to a "
        "request's time on the loop; the instrumented variant also runs the stall monitor, whose ticks "
        "wake the loop (and take the GIL from the handler's thread) during longer requests.",
    )


def render(results: Results) -> Rendered:
    sv: Server = data_of(results, "server")
    in_process, ip_verdicts = _in_process(sv["in_process"])
    monitor, mon_verdicts = _monitor(sv["monitor"])
    text = join(
        "## 4. API server side: route metrics middleware and stall monitor",
        "What `StateStoreRouteMetrics` (the plugin's FastAPI root middleware) and the event-loop stall "
        "monitor cost an API server worker. Method and module: `benchmarks/server.py`.",
        in_process,
        monitor,
        _http(sv["http"]),
    )
    return Rendered(text, ip_verdicts + mon_verdicts)
