"""2. Event-loop stalls on the async accessors (``aget``, ``aset``), wrapped vs bare.

The stall harness of apache/airflow#75381 (the async state store routes), applied to the accessor:
a 1 ms ticker on the event loop (``testbed.ticker``) records its longest sleep while one request
is in flight (so an idle loop reads about 1 ms, and anything that holds the loop shows up on top).
The store does real async I/O: each call is a JSON round trip over a loopback TCP connection to
another process (``benchmarks.echo_server``), which echoes the stored value back on ``aget``, so
the value's size matters both ways. Values are integer arrays of about 0.4 KB, 59 KB and 689 KB of
JSON (``testbed.values``).

Per case and round: one cold request per variant is dropped, then 10 warm requests per variant,
interleaved request by request (bare, wrapped, bare again; the order rotates every round). The
second bare series is an A/A control: how far two identical series differ on this machine. The
paired differences of every backend are pooled per operation and size (the code the loop runs is
the same for every backend), with a bootstrap interval of their median.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypedDict

from testbed.ticker import Ticker, ticking
from testbed.values import SIZES_BYTES, int_array

from .common import BACKENDS, REPO_ROOT, TAGS, BackendSetup, UdpSink, log, median, median_ci, subprocess_env

VARIANTS: tuple[str, ...] = ("bare", "wrapped", "bare_aa")


class AsyncSocketStore:
    """An async store whose every call is a JSON round trip to ``benchmarks.echo_server``."""

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
    # The socket store has the async methods only (all this measures), not a whole accessor's.
    wrapped = instrument_asset_store(store, emitter, TAGS)  # type: ignore[type-var]
    stores = {"bare": store, "bare_aa": store, "wrapped": wrapped}
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


class StallCase(TypedDict):
    """One backend, one operation and value size: stalls in ms."""

    rounds: dict[str, list[list[float]]]  # per variant: [median, max] of each round
    added_ms: float  # median of the paired differences wrapped - bare
    ci_ms: list[float]  # 95% bootstrap interval of added_ms ([]: not recorded)
    aa_ms: float  # the same statistic for bare again - bare


class PooledCase(TypedDict):
    """One operation and value size, every backend's pairs together: stalls in ms."""

    op: str
    size: int
    pairs: int
    added_ms: float
    aa_ms: float
    ci_ms: list[float]  # 95% bootstrap interval of added_ms


class Stalls(TypedDict):
    sizes: list[int]
    rounds: int
    warm: int
    backends: dict[str, dict[str, StallCase]]  # per backend, per "op:size"
    pooled: list[PooledCase]


def _pairs(case: dict[str, list[list[float]]]) -> tuple[list[float], list[float]]:
    """The paired differences wrapped - bare and bare again - bare, request by request.

    Requests are interleaved, so the i-th wrapped request ran right next to the i-th bare one; the
    median of those per-pair differences is less exposed to slow drifts of the machine than a
    difference of two medians.
    """
    pooled = {v: [x for rnd in case[v] for x in rnd] for v in VARIANTS}
    paired = [w - b for w, b in zip(pooled["wrapped"], pooled["bare"], strict=True)]
    paired_aa = [a - b for a, b in zip(pooled["bare_aa"], pooled["bare"], strict=True)]
    return paired, paired_aa


def summarise(case: dict[str, list[list[float]]]) -> StallCase:
    paired, paired_aa = _pairs(case)
    return StallCase(
        rounds={v: [[median(rnd), max(rnd)] for rnd in case[v]] for v in VARIANTS},
        added_ms=median(paired),
        ci_ms=list(median_ci(paired)),
        aa_ms=median(paired_aa),
    )


def pool(raw: dict[str, dict[str, dict[str, list[list[float]]]]]) -> list[PooledCase]:
    """Every backend's pairs pooled per operation and size, in the order of the page (size, op)."""
    keys = sorted({k for cases in raw.values() for k in cases}, key=lambda k: (int(k.split(":")[1]), k))
    out = []
    for key in keys:
        added: list[float] = []
        aa: list[float] = []
        for cases in raw.values():
            paired, paired_aa = _pairs(cases[key])
            added += paired
            aa += paired_aa
        op, size = key.split(":")
        low, high = median_ci(added)
        out.append(
            PooledCase(
                op=op,
                size=int(size),
                pairs=len(added),
                added_ms=median(added),
                aa_ms=median(aa),
                ci_ms=[low, high],
            )
        )
    return out


def run(quick: bool) -> Stalls:
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
    raw: dict[str, dict[str, dict[str, list[list[float]]]]] = {}
    try:
        for backend in BACKENDS:
            log(f"  stalls: {backend}")
            # A short flush interval, so the worker really flushes while requests run.
            setup = BackendSetup(backend, sink, flush_interval=0.5)
            try:
                raw[backend] = asyncio.run(_measure(port, setup.emitter, sizes, rounds, warm))
            finally:
                setup.close()
    finally:
        sink.close()
        server.stdin.close()
        server.wait(5)
    backends = {b: {key: summarise(case) for key, case in cases.items()} for b, cases in raw.items()}
    return Stalls(sizes=list(sizes), rounds=rounds, warm=warm, backends=backends, pooled=pool(raw))
