"""The ``--serve`` loop: read the tables every interval, report the snapshot, never stop on errors.

Two threads:

* the **collector thread** reads both tables (``Collector.collect``), then waits
  ``interval`` seconds, and again: at most one aggregate query per table per interval, however
  long a query takes;
* the **calling thread** ticks every ``tick`` seconds: it hands the latest snapshot to
  ``on_tick`` (the backend publisher, when exporting through one) and watches the collector
  thread: a query that has not returned after twice the statement timeout (a database host that
  swallows packets, where no timeout fires) is said once.

Anything a collection, an exporter or the watchdog raises is logged once per kind and the loop
goes on; only ``stop`` ends it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .. import logs
from .collect import LOG_KEY, Collector, Snapshot

STUCK_KEY = f"{LOG_KEY}stuck"
#: A query running this much longer than twice its statement timeout is reported as stuck.
STUCK_GRACE = 10.0


class ServeLoop:
    """Collects every ``interval`` s; calls ``on_tick(snapshot)`` every ``tick`` s."""

    def __init__(
        self,
        collector: Collector,
        interval: float,
        *,
        tick: float = 1.0,
        on_tick: Callable[[Snapshot], object] | None = None,
    ) -> None:
        self.collector = collector
        self.interval = interval
        self.tick = tick
        self.on_tick = on_tick
        self.collections = 0
        self._busy_since: float | None = None

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set."""
        worker = threading.Thread(
            target=self._collect_forever, args=(stop,), name="store-metrics-inventory", daemon=True
        )
        worker.start()
        while not stop.wait(self.tick):
            self._guarded("tick", self._tick)
        worker.join(timeout=1.0)

    def _collect_forever(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._busy_since = time.monotonic()
            self._guarded("collect", self.collector.collect)
            self._busy_since = None
            self.collections += 1
            logs.forget(STUCK_KEY)
            if stop.wait(self.interval):
                return

    def _tick(self) -> None:
        busy = self._busy_since
        limit = 2 * self.collector.database.timeout + STUCK_GRACE
        if busy is not None and time.monotonic() - busy > limit:
            logs.once(
                STUCK_KEY,
                logging.WARNING,
                "store-metrics inventory: a query to %s has not returned for more than %.0f s (no "
                "statement timeout fired: is the database host reachable?); the last footprint read is "
                "still served",
                self.collector.database.describe(),
                limit,
            )
        if self.on_tick is not None:
            self.on_tick(self.collector.snapshot)

    @staticmethod
    def _guarded(what: str, step: Callable[[], object]) -> None:
        try:
            step()
        except Exception as exc:
            logs.once(
                f"{LOG_KEY}crash:{what}:{type(exc).__name__}",
                logging.ERROR,
                "store-metrics inventory: %s failed (%s); the loop goes on",
                what,
                exc,
                exc_info=True,
            )
