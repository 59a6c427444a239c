"""A small per-worker cache: each answer kept for ``ttl`` seconds, one load at a time per key.

Every API server worker has its own (nothing is shared between processes). Many browsers opening
the same DAG's tab at once cost one query: the first request loads, the others wait for its
answer (single flight per key). Nothing runs in the background: an entry is only refreshed when a
request asks for it after it expired, so a worker nobody looks at does nothing. At most ``size``
keys are kept, the least recently used dropped first.

The views ask through ``TtlCache.get_async``: the load runs on the views' own few threads
(``Pool``), and every request waits on the event loop, never on a thread, and for a bounded
time: a request that finds a load under way waits at most ``wait`` seconds for it, the one that
started it at most ``own_wait``; then ``Unanswered`` (the views show the last answer, or say
there is none yet). A hung Prometheus or database therefore holds one of the views' threads per
key, never Airflow's, and no request waits on it for long. At most ``cap`` loads are under way or
queued at once (``Busy`` past that): the pending work is bounded, whatever arrives.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Unanswered(Exception):
    """No answer within the time a request waits (the load goes on; a later request gets it)."""


class Busy(Exception):
    """The views' pool holds as many loads as it may: this one was not started."""


class Pool:
    """The views' own threads, with at most ``cap`` jobs under way or queued (``Busy`` past it)."""

    def __init__(self, threads: int, cap: int) -> None:
        self.threads = threads
        self.cap = cap
        self._executor = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="store-metrics-ui")
        self._pending = 0
        self._lock = threading.Lock()

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def submit(self, work: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._pending >= self.cap:
                raise Busy(f"the views already have {self.cap} reads under way or queued")
            self._pending += 1
        future = self._executor.submit(work, *args)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: object) -> None:
        with self._lock:
            self._pending -= 1

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` on the pool, awaited on the event loop."""
        return await asyncio.wrap_future(self.submit(work, *args))


@dataclass(frozen=True)
class Cached(Generic[T]):
    value: T
    #: ``time.monotonic()`` when it was loaded.
    loaded: float


class TtlCache(Generic[T]):
    """``get(key, load)``: the value loaded less than ``ttl`` seconds ago, else ``load()``'s."""

    def __init__(self, ttl: float, size: int = 256, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.size = size
        self._clock = clock
        self._entries: OrderedDict[Hashable, Cached[T]] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Lock] = {}
        #: The loads under way on a ``Pool``, by key (``get_async``).
        self._flights: dict[Hashable, concurrent.futures.Future[Cached[T]]] = {}
        #: How many times ``load`` ran (tests and the benchmark read it).
        self.loads = 0

    def _fresh(self, key: Hashable) -> Cached[T] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or self._clock() - entry.loaded >= self.ttl:
                return None
            self._entries.move_to_end(key)
            return entry

    def get(self, key: Hashable, load: Callable[[], T]) -> Cached[T]:
        entry = self._fresh(key)
        if entry is not None:
            return entry
        with self._lock:
            gate = self._loading.setdefault(key, threading.Lock())
        with gate:
            entry = self._fresh(key)  # loaded by the request this one waited for
            if entry is not None:
                return entry
            try:
                entry = Cached(load(), self._clock())
            finally:
                with self._lock:
                    self.loads += 1
                    self._loading.pop(key, None)
            with self._lock:
                self._entries[key] = entry
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
            return entry

    def peek(self, key: Hashable) -> Cached[T] | None:
        """The entry kept for ``key``, fresh or not (a failed load shows the last good one)."""
        with self._lock:
            return self._entries.get(key)

    async def get_async(
        self, key: Hashable, load: Callable[[], T], pool: Pool, *, wait: float, own_wait: float
    ) -> Cached[T]:
        """``get``, the load on ``pool`` and every wait on the event loop, bounded (see the module).

        Raises ``Unanswered`` when the wait is over, ``Busy`` when the pool is full.
        """
        entry = self._fresh(key)
        if entry is not None:
            return entry
        with self._lock:
            flight = self._flights.get(key)
            started = flight is None
            if flight is None:
                flight = pool.submit(self.get, key, load)
                self._flights[key] = flight
        if started:
            flight.add_done_callback(lambda done: self._landed(key, done))
        patience = own_wait if started else wait
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(flight)), patience)
        except asyncio.TimeoutError:
            whose = "its read" if started else "another request's read of it"
            raise Unanswered(f"no answer within {patience:g} s ({whose} goes on)") from None

    def _landed(self, key: Hashable, done: concurrent.futures.Future[Cached[T]]) -> None:
        with self._lock:
            if self._flights.get(key) is done:
                del self._flights[key]
