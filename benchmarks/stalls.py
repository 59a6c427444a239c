"""2. Event-loop stalls on the async accessors (``aget``, ``aset``), wrapped vs bare.

Method of ../shared/seeds/003_5d62acb7dce6a5f5.txt, applied to the accessor: a 1 ms ticker on
the event loop records its longest sleep while one request is in flight (so an idle loop reads
about 1 ms, and anything that holds the loop shows up on top). The store does real async I/O:
each call is a JSON round trip over a loopback TCP connection to another process
(``benchmarks.echo_server``), which echoes the stored value back on ``aget``, so the value's
size matters both ways. Values are integer arrays of about 0.4 KB, 59 KB and 689 KB of JSON.

Per case and round: one cold request per variant is dropped, then 10 warm requests per variant,
interleaved request by request (bare, wrapped, bare again; the order rotates every round). The
second bare series is an A/A control: how far two identical series differ on this machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

from .common import BACKENDS, REPO_ROOT, TAGS, BackendSetup, UdpSink, log, median, subprocess_env

VARIANTS: tuple[str, ...] = ("bare", "wrapped", "bare_aa")
SIZES_BYTES: tuple[int, ...] = (400, 58_900, 688_900)


def int_array(json_bytes: int) -> list[int]:
    """An integer array whose JSON text is as close as possible to ``json_bytes`` long."""
    lo, hi = 1, json_bytes
    while lo < hi:
        mid = (lo + hi) // 2
        if len(json.dumps(list(range(mid)))) < json_bytes:
            lo = mid + 1
        else:
            hi = mid
    return list(range(lo))


def size_label(n: int) -> str:
    return f"{n / 1000:.1f} KB"


class AsyncSocketStore:
    """An async store whose every call is a JSON round trip to :mod:`benchmarks.echo_server`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def connect(cls, port: int) -> AsyncSocketStore:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def _call(self, message: dict[str, Any]) -> Any:
        body = json.dumps(message).encode()
        self._writer.write(len(body).to_bytes(4, "big") + body)
        await self._writer.drain()
        size = int.from_bytes(await self._reader.readexactly(4), "big")
        return json.loads(await self._reader.readexactly(size))

    async def aget(self, key: str, default: Any = None) -> Any:
        answer = await self._call({"op": "get", "key": key})
        return answer["value"] if answer["found"] else default

    async def aset(self, key: str, value: Any, *, retention: Any = None) -> None:
        await self._call({"op": "set", "key": key, "value": value})

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()


class Ticker:
    """Sleeps 1 ms in a loop on the event loop and keeps the longest sleep since :meth:`reset`."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._waiters: list[asyncio.Future[None]] = []

    def reset(self) -> None:
        self.longest = 0.0

    async def run(self) -> None:
        clock = time.perf_counter
        while True:
            t0 = clock()
            await asyncio.sleep(0.001)
            slept = clock() - t0
            self.longest = max(self.longest, slept)
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    async def next_tick(self) -> None:
        """Wait until the sleep in progress ends (it may have started during the request)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        await future

    async def stall_ms(self, request: Awaitable[None]) -> float:
        """The longest sleep (ms) while ``request`` (a coroutine not yet started) runs, up to the end
        of the sleep in progress when it returns (it may have started during the request)."""
        self.reset()
        await request
        await self.next_tick()
        return self.longest * 1000.0


@contextlib.asynccontextmanager
async def ticking() -> AsyncIterator[Ticker]:
    """A :class:`Ticker` running on the current event loop, stopped on the way out."""
    ticker = Ticker()
    tick_task = asyncio.create_task(ticker.run())
    try:
        yield ticker
    finally:
        tick_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tick_task


async def interleaved(
    ticker: Ticker, request: Callable[[str], Awaitable[None]], rounds: int, warm: int
) -> dict[str, list[list[float]]]:
    """One case: the stall (ms) of each ``request(variant)``, per variant and round.

    Per round: one cold request per variant, dropped, then ``warm`` requests per variant,
    interleaved request by request; the order of the variants rotates every round.
    """
    case: dict[str, list[list[float]]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        order = VARIANTS[r % 3 :] + VARIANTS[: r % 3]
        for v in order:  # cold request, dropped
            await ticker.stall_ms(request(v))
        per_round: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(warm):
            for v in order:
                per_round[v].append(await ticker.stall_ms(request(v)))
        for v in VARIANTS:
            case[v].append(per_round[v])
    return case


async def _measure(port: int, emitter: Any, sizes: tuple[int, ...], rounds: int, warm: int) -> dict[str, Any]:
    from store_metrics import instrument_asset_store

    store = await AsyncSocketStore.connect(port)
    stores = {"bare": store, "bare_aa": store, "wrapped": instrument_asset_store(store, emitter, TAGS)}
    values = {n: int_array(n) for n in sizes}
    out: dict[str, Any] = {}
    async with ticking() as ticker:
        for n, value in values.items():
            await store.aset(f"get-{n}", value)
        await ticker.next_tick()

        async def request(variant: str, *, op: str, n: int) -> None:
            s = stores[variant]
            if op == "aget":
                got = await s.aget(f"get-{n}")
                assert len(got) == len(values[n])
            else:
                await s.aset(f"set-{n}", values[n])

        for op in ("aget", "aset"):
            for n in sizes:
                out[f"{op}:{n}"] = await interleaved(ticker, partial(request, op=op, n=n), rounds, warm)
    await store.close()
    return out


def summarise(case: dict[str, list[list[float]]]) -> dict[str, Any]:
    """Per round median / max per variant, and the added stall as a median of paired differences.

    Requests are interleaved, so the i-th wrapped request ran right next to the i-th bare one;
    the median of those per-pair differences is less exposed to slow drifts of the machine than
    a difference of two medians. The A/A figure is the same statistic for bare vs bare.
    """
    pooled = {v: [x for rnd in case[v] for x in rnd] for v in VARIANTS}
    paired = [w - b for w, b in zip(pooled["wrapped"], pooled["bare"], strict=True)]
    paired_aa = [a - b for a, b in zip(pooled["bare_aa"], pooled["bare"], strict=True)]
    return {
        "rounds": {v: [(median(rnd), max(rnd)) for rnd in case[v]] for v in VARIANTS},
        "median": {v: median(pooled[v]) for v in VARIANTS},
        "max": {v: max(pooled[v]) for v in VARIANTS},
        "added_ms": median(paired),
        "aa_ms": median(paired_aa),
        "paired_ms": paired,
        "paired_aa_ms": paired_aa,
    }


def run(quick: bool) -> dict[str, Any]:
    sizes = SIZES_BYTES[:2] if quick else SIZES_BYTES
    rounds, warm = (1, 3) if quick else (3, 10)
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.echo_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=subprocess_env(),
    )
    assert server.stdout is not None and server.stdin is not None
    port = int(server.stdout.readline())
    sink = UdpSink()
    out: dict[str, Any] = {"sizes": list(sizes), "rounds": rounds, "warm": warm, "backends": {}}
    try:
        for backend in BACKENDS:
            log(f"  stalls: {backend}")
            # A short flush interval, so the worker really flushes while requests run.
            setup = BackendSetup(backend, sink, flush_interval=0.5)
            try:
                raw = asyncio.run(_measure(port, setup.emitter, sizes, rounds, warm))
            finally:
                setup.close()
            out["backends"][backend] = {key: summarise(case) for key, case in raw.items()}
    finally:
        sink.close()
        server.stdin.close()
        server.wait(5)
    return out
