"""4. The API server side: what the root middleware and the stall monitor cost per request.

Three measurements:

* **In process** (no network): an ASGI app that answers at once, driven directly; blocks of
  requests through the bare app and through ``StateStoreRouteMetrics``
  (emitter with backend ``none``), interleaved, medians over rounds. What the middleware adds to a
  request that is not a state store request (one substring test), and to one that is.
* **Over HTTP, the proposal's method** (the stall harness of apache/airflow#75381): a FastAPI app
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
from typing import Any, TypedDict

from pydantic import BaseModel, JsonValue

from testbed.ports import free_port
from testbed.ticker import Ticker
from testbed.values import COMPACT, SIZES_BYTES, int_array

from .common import log, median

VARIANTS: tuple[str, ...] = ("bare", "instrumented", "bare_aa")
TICKS_MS: tuple[float, ...] = (1.0, 5.0, 10.0)
BLOCK_MS = 200.0


class InProcessCase(TypedDict):
    bare_ns: float
    ours_ns: float
    added_ns: float  # median of the per-round differences


class InProcess(TypedDict):
    requests: int  # per block
    rounds: int
    cases: dict[str, InProcessCase]


class Monitor(TypedDict):
    seconds: float  # of idle loop per reading
    reps: int
    default_tick_ms: float  # [store_metrics] stall_tick_ms's default
    block_ms: float  # how long the loop was blocked for the accuracy reading
    cpu_percent: dict[str, float]  # per tick ("none" without the monitor), % of one core
    blocked_ms: dict[str, float]  # per tick: the stall reported for the blocked loop
    on_tick_ns: float  # the server-side emitter's work per tick


class HttpCase(TypedDict):
    latency_ms: dict[str, float]  # per variant, medians
    stall_ms: dict[str, float]
    stall_max_ms: dict[str, float]
    added_latency_ms: float  # medians of paired differences instrumented - bare
    added_stall_ms: float
    aa_latency_ms: float  # the same for bare again - bare
    aa_stall_ms: float
    n: int


class OverHttp(TypedDict):
    sizes: list[int]
    rounds: int
    warm: int
    cases: dict[str, HttpCase]  # per "METHOD:size"
    counted: int  # state store requests the instrumented server counted


class Server(TypedDict):
    in_process: InProcess
    monitor: Monitor
    http: OverHttp


def _metrics(tick_ms: float = 10.0) -> Any:
    from store_metrics.api_server import ServerMetrics
    from store_metrics.counting.runtime import create_emitter

    emitter = create_emitter("none", flush_interval=60)
    return ServerMetrics(emitter, "bench-1", tick_ms=tick_ms, threshold_ms=100)


# -- in process -------------------------------------------------------------------------------------


async def _instant_app(scope: Any, receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": b'{"value":1}'})


def in_process(quick: bool) -> InProcess:
    from store_metrics.api_server import StateStoreRouteMetrics

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

    async def measure() -> dict[str, InProcessCase]:
        # The monitor is measured on its own (below); a block of requests that never yields
        # would only look like a stall to it.
        wrapped._watching = asyncio.get_running_loop()
        out: dict[str, InProcessCase] = {}
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
            out[label] = InProcessCase(
                bare_ns=median(bare_ns), ours_ns=median(ours_ns), added_ns=median(added)
            )
        return out

    try:
        result = asyncio.run(measure())
    finally:
        metrics.emitter.close(1)
    return InProcess(requests=n, rounds=rounds, cases=result)


# -- over HTTP, the proposal's method ---------------------------------------------------------------


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

        from store_metrics.api_server import StateStoreRouteMetrics

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


def over_http(quick: bool) -> OverHttp:
    sizes = SIZES_BYTES[:2] if quick else SIZES_BYTES
    rounds, warm = (1, 3) if quick else (2, 10)
    server = _Server()
    ti = uuid.uuid4()
    cases: dict[str, Any] = {}
    try:
        bodies = {
            n: json.dumps({"value": int_array(n, COMPACT)}, separators=(",", ":")).encode() for n in sizes
        }
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
    return OverHttp(sizes=list(sizes), rounds=rounds, warm=warm, cases=cases, counted=sum(counted.values()))


def summarise(case: dict[str, list[tuple[float, float]]]) -> HttpCase:
    """Medians per variant and the added latency / stall as medians of paired differences."""
    lat = {v: [x[0] for x in case[v]] for v in VARIANTS}
    stall = {v: [x[1] for x in case[v]] for v in VARIANTS}
    return HttpCase(
        latency_ms={v: median(lat[v]) for v in VARIANTS},
        stall_ms={v: median(stall[v]) for v in VARIANTS},
        stall_max_ms={v: max(stall[v]) for v in VARIANTS},
        added_latency_ms=median(a - b for a, b in zip(lat["instrumented"], lat["bare"], strict=True)),
        added_stall_ms=median(a - b for a, b in zip(stall["instrumented"], stall["bare"], strict=True)),
        aa_latency_ms=median(a - b for a, b in zip(lat["bare_aa"], lat["bare"], strict=True)),
        aa_stall_ms=median(a - b for a, b in zip(stall["bare_aa"], stall["bare"], strict=True)),
        n=len(lat["bare"]),
    )


# -- the stall monitor ------------------------------------------------------------------------------


def monitor(quick: bool) -> Monitor:
    from store_metrics.api_server import LoopMonitor
    from store_metrics.config.options import default

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
    return Monitor(
        seconds=seconds,
        reps=reps,
        default_tick_ms=float(default("stall_tick_ms")),
        block_ms=BLOCK_MS,
        cpu_percent={k: statistics.median(v) for k, v in cpu.items()},
        blocked_ms={k: statistics.median(v) for k, v in measured.items()},
        on_tick_ns=per_tick_ns,
    )


def run(quick: bool) -> Server:
    log("  server: in process")
    process = in_process(quick)
    log("  server: the stall monitor")
    mon = monitor(quick)
    log("  server: over HTTP")
    return Server(in_process=process, monitor=mon, http=over_http(quick))
