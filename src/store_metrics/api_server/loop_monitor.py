"""A ticker on an event loop: how late each tick runs is how long the loop could not serve anything.

The method of the async-routes proposal (apache/airflow#75381), made cheap enough to leave on
in production: one timer callback per tick, no thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class LoopMonitor:
    """A ticker on one event loop: how late each tick wakes up is how long the loop was stalled.

    Rescheduled from the time it actually ran (never a burst of catch-up ticks after a stall).
    ``on_tick(late_ms, due)`` is called on the loop for every tick; ``due`` is when it should
    have run (``loop.time()``, i.e. ``time.monotonic()``): the loop was stalled from before ``due``
    until now.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, tick_ms: float, on_tick: Callable[[float, float], None]
    ):
        self.loop = loop
        self.tick = tick_ms / 1000.0
        self._on_tick = on_tick
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None

    @property
    def running(self) -> bool:
        return self._handle is not None

    def start(self) -> None:
        if self._handle is None:
            self._due = self.loop.time() + self.tick
            self._handle = self.loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        now = self.loop.time()
        due = self._due
        late_ms = max(0.0, (now - due) * 1000.0)
        self._due = now + self.tick
        self._handle = self.loop.call_at(self._due, self._tick)
        self._on_tick(late_ms, due)
