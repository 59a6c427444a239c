"""4. The API server side: what the root middleware and the stall monitor cost per request.

Three measurements:

* **In process** (no network): an ASGI app that answers at once, driven directly; blocks of
  requests through the bare app and through :class:`~store_metrics.server.StateStoreRouteMetrics`
  (emitter with backend ``none``), interleaved, medians over rounds. What the middleware adds to a
  request that is not a state store request (one substring test), and to one that is.
* **Over HTTP, the proposal's method** (../shared/seeds/003_5d62acb7dce6a5f5.txt): a FastAPI app
  with the task state store routes' shapes (a ``{"value": JsonValue}`` body, sync handlers as in
  Airflow 3.3.2) served by uvicorn in this process; each request over HTTP from another thread;
  a 1 ms ticker on the server loop records its longest sleep per request. Variants interleaved
  request by request: **bare** (no middleware, no stall monitor), **instrumented** (middleware and
  the stall monitor at its default tick), **bare again** (A/A control). One cold request per
  variant dropped.
* **The stall monitor itself**: CPU time of an otherwise idle event loop for a few seconds with
  the monitor at several ticks, against none; and what it reports for a loop blocked 200 ms.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import statistics
import threading
import time
import uuid
from typing import Any

from pydantic import BaseModel, JsonValue

from .common import free_port, log, median
from .stalls import SIZES_BYTES, Ticker

VARIANTS: tuple[str, ...] = ("bare", "instrumented", "bare_aa")
TICKS_MS: tuple[float, ...] = (1.0, 5.0, 10.0)
BLOCK_MS = 200.0


def _metrics(tick_ms: float = 10.0) -> Any:
    from store_metrics.runtime import create_emitter
    from store_metrics.server import ServerMetrics

    emitter = create_emitter("none", flush_interval=60)
    return ServerMetrics(emitter, "bench-1", tick_ms=tick_ms, threshold_ms=100)


# -- in process -------------------------------------------------------------------------------------


async def _instant_app(scope: Any, receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": b'{"value":1}'})


def in_process(quick: bool) -> dict[str, Any]:
    from store_metrics.server import StateStoreRouteMetrics

    metrics = _metrics()
    wrapped = StateStoreRouteMetrics(_instant_app, metrics=metrics)
    n, rounds = (2_000, 5) if quick else (20_000, 15)
    paths = {
        "other request (pass-through)": "/api/v2/dags/example/dagRuns",
        "state store request (task get)": f"/execution/store/ti/{uuid.uuid4()}/key",
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        return None

    async def block(app: Any, path: str) -> float:
        scope = {"type": "http", "method": "GET", "path": path, "root_path": "", "headers": []}
        t0 = time.perf_counter_ns()
        for _ in range(n):
            await app(scope, receive, send)
        return (time.perf_counter_ns() - t0) / n

    async def measure() -> dict[str, Any]:
        # The monitor is measured on its own (below); a block of requests that never yields
        # would only look like a stall to it.
        wrapped._watching = asyncio.get_running_loop()
        out: dict[str, Any] = {}
        for label, path in paths.items():
            await block(wrapped, path)  # warm: series made, caches filled
            added, bare_ns, ours_ns = [], [], []
            for r in range(rounds):
                order = ((_instant_app, "bare"), (wrapped, "ours"))
                times = {}
                for app, name in order if r % 2 == 0 else order[::-1]:
                    times[name] = await block(app, path)
                bare_ns.append(times["bare"])
                ours_ns.append(times["ours"])
                added.append(times["ours"] - times["bare"])
            out[label] = {"bare_ns": median(bare_ns), "ours_ns": median(ours_ns), "added_ns": median(added)}
        return out

    try:
        result = asyncio.run(measure())
    finally:
        metrics.emitter.close(1)
    return {"requests": n, "rounds": rounds, "cases": result}


# -- over HTTP, the proposal's method ---------------------------------------------------------------


def compact_array(json_bytes: int) -> list[int]:
    """An integer array whose JSON as sent (no spaces) is as close as possible to ``json_bytes``."""
    lo, hi = 1, json_bytes
    while lo < hi:
        mid = (lo + hi) // 2
        if len(json.dumps(list(range(mid)), separators=(",", ":"))) < json_bytes:
            lo = mid + 1
        else:
            hi = mid
    return list(range(lo))


class PutBody(BaseModel):
    value: JsonValue


class Value(BaseModel):
    value: JsonValue


def _store_app() -> Any:
    """FastAPI routes shaped like Airflow 3.3.2's task state store routes (sync handlers)."""
    from fastapi import FastAPI, HTTPException

    app = FastAPI()
    rows: dict[str, str] = {}

    @app.get("/execution/store/ti/{ti}/{key:path}")
    def get_value(ti: uuid.UUID, key: str) -> Value:
        row = rows.get(key)
        if row is None:
            raise HTTPException(404, detail={"reason": "not_found"})
        return Value(value=json.loads(row))

    @app.put("/execution/store/ti/{ti}/{key:path}", status_code=204)
    def set_value(ti: uuid.UUID, key: str, body: PutBody) -> None:
        rows[key] = json.dumps(body.value)

    @app.delete("/execution/store/ti/{ti}/{key:path}", status_code=204)
    def delete_value(ti: uuid.UUID, key: str) -> None:
        rows.pop(key, None)

    return app


class _Server:
    """uvicorn in a thread: ``/bare/...`` reaches the app alone, anything else through the middleware."""

    def __init__(self) -> None:
        import uvicorn

        from store_metrics.server import StateStoreRouteMetrics

        inner = _store_app()
        self.metrics = _metrics()
        instrumented = StateStoreRouteMetrics(inner, metrics=self.metrics)
        self.ticker = Ticker()
        self.loop: asyncio.AbstractEventLoop | None = None
        started = threading.Event()

        async def dispatch(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "lifespan":
                self.loop = asyncio.get_running_loop()
                self._tick_task = asyncio.create_task(self.ticker.run())
                started.set()
                await inner(scope, receive, send)
            elif scope["path"].startswith("/bare/"):
                await inner({**scope, "path": scope["path"][5:]}, receive, send)
            else:
                await instrumented(scope, receive, send)

        self.port = free_port()
        config = uvicorn.Config(
            dispatch, host="127.0.0.1", port=self.port, log_level="error", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="bench-uvicorn", daemon=True)
        self.thread.start()
        assert started.wait(30), "uvicorn did not start"
        while not self.server.started:
            time.sleep(0.01)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def on_loop(self, fn: Any) -> None:
        assert self.loop is not None
        done = threading.Event()

        def call() -> None:
            fn()
            done.set()

        self.loop.call_soon_threadsafe(call)
        assert done.wait(10)

    def request(
        self, variant: str, method: str, path: str, body: bytes | None
    ) -> tuple[int, bytes, float, float]:
        """One request; returns status, body, latency ms, longest ticker sleep ms (the stall)."""
        assert self.loop is not None
        # The instrumented variant runs with the stall monitor, as in production; bare without.
        if variant == "instrumented":
            self.on_loop(lambda: self.metrics.watch(self.loop))
        else:
            self.on_loop(self.metrics.unwatch)
        self.on_loop(self.ticker.reset)
        prefix = "" if variant == "instrumented" else "/bare"
        headers = {"content-type": "application/json"} if body is not None else {}
        t0 = time.perf_counter()
        self.conn.request(method, prefix + path, body=body, headers=headers)
        response = self.conn.getresponse()
        data = response.read()
        latency = (time.perf_counter() - t0) * 1000.0
        asyncio.run_coroutine_threadsafe(self.ticker.next_tick(), self.loop).result(10)
        return response.status, data, latency, self.ticker.longest * 1000.0

    def close(self) -> None:
        self.conn.close()
        self.server.should_exit = True
        self.thread.join(10)
        self.metrics.emitter.close(1)


def over_http(quick: bool) -> dict[str, Any]:
    sizes = SIZES_BYTES[:2] if quick else SIZES_BYTES
    rounds, warm = (1, 3) if quick else (2, 10)
    server = _Server()
    ti = uuid.uuid4()
    cases: dict[str, Any] = {}
    try:
        bodies = {n: json.dumps({"value": compact_array(n)}, separators=(",", ":")).encode() for n in sizes}
        for n in sizes:  # the values the GETs read back
            server.request("bare", "PUT", f"/execution/store/ti/{ti}/get-{n}", bodies[n])
        plan = [("GET", n) for n in sizes] + [("PUT", n) for n in sizes] + [("DELETE", 0)]
        for method, n in plan:
            case: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
            for r in range(rounds):
                order = VARIANTS[r % 3 :] + VARIANTS[: r % 3]
                for i in range(warm + 1):
                    for variant in order:
                        key = f"get-{n}" if method == "GET" else f"set-{n}"
                        body = bodies[n] if method == "PUT" else None
                        status, data, latency, stall = server.request(
                            variant, method, f"/execution/store/ti/{ti}/{key}", body
                        )
                        assert status == (200 if method == "GET" else 204), (status, data[:200])
                        if method == "GET":
                            assert len(data) > n * 0.9
                        if i:  # the first (cold) request of each variant is dropped
                            case[variant].append((latency, stall))
            cases[f"{method}:{n}"] = summarise(case)
            log(f"  server over HTTP: {method} {n} B")
    finally:
        server.close()
    counted = {k: v for k, v in server.metrics.emitter.snapshot().items() if k[0].endswith(".requests")}
    return {
        "sizes": list(sizes),
        "rounds": rounds,
        "warm": warm,
        "cases": cases,
        "counted": sum(counted.values()),
    }


def summarise(case: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    """Medians per variant and the added latency / stall as medians of paired differences."""
    lat = {v: [x[0] for x in case[v]] for v in VARIANTS}
    stall = {v: [x[1] for x in case[v]] for v in VARIANTS}
    return {
        "latency_ms": {v: median(lat[v]) for v in VARIANTS},
        "stall_ms": {v: median(stall[v]) for v in VARIANTS},
        "stall_max_ms": {v: max(stall[v]) for v in VARIANTS},
        "added_latency_ms": median(a - b for a, b in zip(lat["instrumented"], lat["bare"], strict=True)),
        "added_stall_ms": median(a - b for a, b in zip(stall["instrumented"], stall["bare"], strict=True)),
        "aa_latency_ms": median(a - b for a, b in zip(lat["bare_aa"], lat["bare"], strict=True)),
        "aa_stall_ms": median(a - b for a, b in zip(stall["bare_aa"], stall["bare"], strict=True)),
        "n": len(lat["bare"]),
    }


# -- the stall monitor ------------------------------------------------------------------------------


def monitor(quick: bool) -> dict[str, Any]:
    from store_metrics.server import LoopMonitor

    seconds, reps = (0.5, 1) if quick else (2.0, 3)

    async def idle(tick_ms: float | None) -> float:
        loop = asyncio.get_running_loop()
        late: list[float] = []
        mon = LoopMonitor(loop, tick_ms, lambda ms, due: late.append(ms)) if tick_ms else None
        if mon:
            mon.start()
        t0 = time.process_time()
        await asyncio.sleep(seconds)
        cpu = time.process_time() - t0
        if mon:
            mon.stop()
        return cpu

    async def blocked(tick_ms: float) -> float:
        loop = asyncio.get_running_loop()
        late: list[float] = []
        mon = LoopMonitor(loop, tick_ms, lambda ms, due: late.append(ms))
        mon.start()
        await asyncio.sleep(0.05)
        time.sleep(BLOCK_MS / 1000)
        await asyncio.sleep(0.05)
        mon.stop()
        return max(late)

    cpu: dict[str, list[float]] = {"none": [], **{f"{t:g}": [] for t in TICKS_MS}}
    for _ in range(reps):
        for tick in (None, *TICKS_MS):
            cpu["none" if tick is None else f"{tick:g}"].append(asyncio.run(idle(tick)) / seconds * 100)
    measured = {f"{t:g}": [asyncio.run(blocked(t)) for _ in range(reps)] for t in TICKS_MS}
    # What the server-side emitter costs per tick on top (one histogram record / gauge observe).
    metrics = _metrics()
    try:
        n = 200_000
        t0 = time.perf_counter_ns()
        for _ in range(n):
            metrics.on_tick(0.2, 0.0)
        per_tick_ns = (time.perf_counter_ns() - t0) / n
    finally:
        metrics.emitter.close(1)
    return {
        "seconds": seconds,
        "reps": reps,
        "cpu_percent": {k: statistics.median(v) for k, v in cpu.items()},
        "blocked_ms": {k: statistics.median(v) for k, v in measured.items()},
        "on_tick_ns": per_tick_ns,
    }


def run(quick: bool) -> dict[str, Any]:
    log("  server: in process")
    result = {"in_process": in_process(quick)}
    log("  server: the stall monitor")
    result["monitor"] = monitor(quick)
    log("  server: over HTTP")
    result["http"] = over_http(quick)
    return result


# -- the page ---------------------------------------------------------------------------------------

TARGET_PASS_THROUGH_NS = 1000.0
#: 1% of the cheapest real state store request (the proposal measured 2-3 ms for a 0.4 KB GET).
TARGET_STORE_REQUEST_NS = 25_000.0
TARGET_STALL_MS = 0.05
TARGET_MONITOR_CPU_PERCENT = 1.0


def _verdict(met: bool | None) -> str:
    return "**not resolved**" if met is None else ("**met**" if met else "**missed**")


def render_section(result: dict[str, Any]) -> tuple[str, list[list[str]]]:
    """The page's section 4 (Markdown) and its verdict rows (target, measured, verdict)."""
    from store_metrics.options import default as option_default

    DEFAULT_STALL_TICK_MS = option_default("stall_tick_ms")

    from .common import md_table

    verdicts: list[list[str]] = []
    text = [
        "## 4. API server side: route metrics middleware and stall monitor",
        "",
        "What `StateStoreRouteMetrics` (the plugin's FastAPI root middleware) and the event-loop stall "
        "monitor cost an API server worker. Method and module: `benchmarks/server.py`.",
    ]
    ip = result.get("in_process")
    if ip:
        rows = []
        for label, case in ip["cases"].items():
            rows.append(
                [label, f"{case['bare_ns']:,.0f}", f"{case['ours_ns']:,.0f}", f"**{case['added_ns']:,.0f}**"]
            )
        passing = ip["cases"]["other request (pass-through)"]["added_ns"]
        store = ip["cases"]["state store request (task get)"]["added_ns"]
        verdicts += [
            [
                f"4. other requests: ≤ {TARGET_PASS_THROUGH_NS / 1000:g} µs added per request (in process)",
                f"{passing:,.0f} ns",
                _verdict(passing <= TARGET_PASS_THROUGH_NS),
            ],
            [
                f"4. state store requests: ≤ {TARGET_STORE_REQUEST_NS / 1000:g} µs added per request "
                "(in process; 1% of a 2.5 ms request)",
                f"{store / 1000:,.1f} µs",
                _verdict(store <= TARGET_STORE_REQUEST_NS),
            ],
            [
                f"4. (bound) loop time the middleware adds to a state store request ≤ {TARGET_STALL_MS} ms",
                f"{store / 1e6:.4f} ms (its whole added time runs on the loop)",
                _verdict(store / 1e6 <= TARGET_STALL_MS),
            ],
        ]
        text += [
            "",
            "### Per request, in process",
            "",
            f"An ASGI app that answers at once, called {ip['requests']:,} times per block in one event loop "
            f"(no network), bare and through the middleware (emitter backend `none`), blocks interleaved, "
            f"{ip['rounds']} rounds, medians; *added* is the median of the per-round differences. Other "
            "requests pay one `type` test, one flag test and one substring test; a state store request pays "
            "the route classification, two wrapped ASGI callables, four series updates (count, duration, "
            "request and response size).",
            "",
            md_table(["request", "bare ns", "with middleware ns", "added ns"], rows, "lrrr"),
        ]
    mon = result.get("monitor")
    if mon:
        tick = f"{DEFAULT_STALL_TICK_MS:g}"
        base = mon["cpu_percent"]["none"]
        rows = [
            [
                f"{t} ms" + (" (default)" if t == tick else ""),
                f"{mon['cpu_percent'][t]:.2f}",
                f"{mon['cpu_percent'][t] - base:+.2f}",
                f"{mon['blocked_ms'][t]:.1f}",
            ]
            for t in (f"{x:g}" for x in TICKS_MS)
        ]
        cpu = mon["cpu_percent"][tick] - base
        blocked = mon["blocked_ms"][tick]
        verdicts += [
            [
                f"4. stall monitor at the default tick ({tick} ms): "
                f"≤ {TARGET_MONITOR_CPU_PERCENT:g}% of a core, idle loop",
                f"{cpu:+.2f}%",
                _verdict(cpu <= TARGET_MONITOR_CPU_PERCENT),
            ],
            [
                f"4. a {BLOCK_MS:.0f} ms blocked loop reads within one tick ({tick} ms)",
                f"{blocked:.1f} ms",
                _verdict(BLOCK_MS - DEFAULT_STALL_TICK_MS <= blocked <= BLOCK_MS + 5),
            ],
        ]
        text += [
            "",
            "### The stall monitor",
            "",
            f"CPU of this process (`time.process_time`) while its event loop does nothing else for "
            f"{mon['seconds']:g} s, with the monitor at each tick and without (median of {mon['reps']}), as "
            f"% of one core; and the stall the monitor reports for a loop blocked {BLOCK_MS:.0f} ms by "
            f"`time.sleep` (a stall is measured as how late a tick runs, so it reads up to one tick short). "
            f"An idle loop pays mostly for waking up; a busy one is awake anyway and pays the callback: "
            f"{mon['on_tick_ns']:,.0f} ns per tick for the histogram and the gauge.",
            "",
            md_table(
                ["tick", "CPU % of a core", "added vs none", f"{BLOCK_MS:.0f} ms block reads (ms)"],
                rows,
                "lrrr",
            ),
            "",
            f"Default tick: {tick} ms. Stalls that matter here are tens to hundreds of ms (the proposal's "
            f"59 KB and 689 KB values): {tick} ms measures them to within {tick} ms for "
            f"{cpu:+.2f}% of an idle core here, against "
            + ", ".join(
                f"{mon['cpu_percent'][f'{t:g}'] - base:+.2f}% at {t:g} ms"
                for t in TICKS_MS
                if f"{t:g}" != tick
            )
            + ". Node.js's event-loop delay monitor also defaults to a 10 ms resolution.",
        ]
    hp = result.get("http")
    if hp:
        from .stalls import size_label

        rows = []
        worst = worst_aa = 0.0
        for key, case in hp["cases"].items():
            method, n = key.split(":")
            lat, stall, peak = case["latency_ms"], case["stall_ms"], case["stall_max_ms"]
            rows.append(
                [
                    method,
                    size_label(int(n)) if method != "DELETE" else "-",
                    f"{lat['bare']:.2f} / {lat['instrumented']:.2f}",
                    f"{case['added_latency_ms']:+.3f} (A/A {case['aa_latency_ms']:+.3f})",
                    f"{stall['bare']:.2f} / {peak['bare']:.2f}",
                    f"{stall['instrumented']:.2f} / {peak['instrumented']:.2f}",
                    f"{case['added_stall_ms']:+.3f} (A/A {case['aa_stall_ms']:+.3f})",
                ]
            )
            worst = max(worst, case["added_stall_ms"])
            worst_aa = max(worst_aa, abs(case["aa_stall_ms"]))
        text += [
            "",
            "### Over HTTP, the proposal's method",
            "",
            "A FastAPI app with the task state store routes' shapes (sync handlers, a "
            '`{"value": JsonValue}` body, integer arrays of the given JSON size as sent), served by '
            "uvicorn in this process; every request over HTTP (keep-alive) from another thread; a 1 ms "
            "ticker on the server loop records its longest sleep while the request is in flight (an idle "
            "loop reads ~1.1-1.3 ms). Variants interleaved request by request: *bare* (no middleware, no "
            "stall monitor), *instrumented* (middleware, and the stall monitor at its default tick), *bare "
            f"again* (A/A). {hp['rounds']} round(s) of {hp['warm']} warm requests per variant and case, one "
            "cold request per variant dropped. *Added*: median of paired differences instrumented - bare; "
            "the A/A figure is the same statistic for bare again - bare, what this machine shows when "
            "nothing differs. "
            f"The instrumented server counted {hp['counted']:,} state store requests.",
            "",
            md_table(
                [
                    "request",
                    "value",
                    "latency bare / instrumented ms",
                    "latency added ms",
                    "stall bare median / max ms",
                    "stall instrumented median / max ms",
                    "stall added ms",
                ],
                rows,
                "llrrrrr",
            ),
            "",
            f"Largest median stall added over HTTP: {worst:+.3f} ms; the A/A control moves up to "
            f"{worst_aa:.3f} ms in the same run. The middleware itself can add at most its in-process time "
            "(above) to a request's time on the loop; the instrumented variant also runs the stall monitor, "
            "whose ticks wake the loop (and take the GIL from the handler's thread) during longer requests.",
        ]
    return "\n".join(text), verdicts
