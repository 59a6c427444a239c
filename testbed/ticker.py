"""How long an event loop is held: a 1 ms ticker on the loop records its longest sleep.

The method of the async-routes proposal, used by the benchmarks' stall measurements (the
accessor's, the API server's, the triggerer's): an idle loop reads about 1.1-1.3 ms (the 1 ms
sleep plus the wake-up), and whatever holds the loop during a request shows up on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable


class Ticker:
    """Sleeps 1 ms in a loop on the event loop and keeps the longest sleep since ``reset``."""

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
            self.longest = max(self.longest, clock() - t0)
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
        of the sleep in progress when it returns."""
        self.reset()
        await request
        await self.next_tick()
        return self.longest * 1000.0


@contextlib.asynccontextmanager
async def ticking() -> AsyncIterator[Ticker]:
    """A ``Ticker`` running on the current event loop, stopped on the way out."""
    ticker = Ticker()
    tick_task = asyncio.create_task(ticker.run())
    try:
        yield ticker
    finally:
        tick_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tick_task
