"""A small per-worker cache: each answer kept for ``ttl`` seconds, one load at a time per key.

Every API server worker has its own (nothing is shared between processes). Many browsers opening
the same DAG's tab at once cost one query: the first request loads, the others wait for its
answer (single flight per key). Nothing runs in the background: an entry is only refreshed when a
request asks for it after it expired, so a worker nobody looks at does nothing. At most ``size``
keys are kept, the least recently used dropped first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


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
