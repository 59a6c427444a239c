"""One API server worker's task instance ids -> their attempts (caller, try): cached, looked up once,
off the loop.

A bounded LRU cache keyed by task instance id (least recently used dropped first); a task instance
not in it costs one metadata query, whoever asks for it meanwhile waits for that same query (single
flight); the query runs on a few threads of its own, never on the event loop and never in the pool
that runs the API's sync routes; after a failure, no query for ``retry_after`` seconds (the database
is not asked per request while it is down). At most ``max_pending`` task instances are being looked
up at once (``Lookups.flight``): a database that hangs rather than fails (a lock held, a
connection that never answers) holds that many queries, never one per task instance that calls.
Counting is ``store_calls``' job.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

from .. import logs
from .attribution import Lookup, Tags, TaskAttempt
from .caller import Attempt, Caller
from .stats import AttributionStats

T = TypeVar("T")


class Lookups:
    """Task instance id -> ``Attempt``, through the cache or one query (see the module)."""

    def __init__(
        self,
        lookup: Lookup,
        caller: Callable[[Tags | None], Caller],
        stats: AttributionStats,
        *,
        cache_size: int,
        threads: int,
        retry_after: float,
        max_pending: int,
    ) -> None:
        if cache_size < 1:
            raise ValueError("cache_size must be >= 1")
        self.lookup = lookup
        self._caller = caller
        self.stats = stats
        self.cache_size = cache_size
        self.threads = threads
        self.retry_after = retry_after
        self.max_pending = max_pending
        self._cache: OrderedDict[UUID, Attempt] = OrderedDict()
        self._pending: dict[UUID, asyncio.Future[Attempt]] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._executor_pid = 0
        self._failed_at = -1e9

    def __len__(self) -> int:
        return len(self._cache)

    def cached(self, ident: UUID) -> Attempt | None:
        """The cached attempt, marked as just used; ``None`` when the id is not cached."""
        attempt = self._cache.get(ident)
        if attempt is not None:
            self._cache.move_to_end(ident)
        return attempt

    @property
    def pending(self) -> int:
        """Task instances being looked up now."""
        return len(self._pending)

    def flight(self, ident: UUID) -> asyncio.Future[Attempt] | None:
        """The lookup of ``ident`` under way, or a new one (started now, on the running loop);
        ``None`` when ``max_pending`` task instances are being looked up already."""
        pending = self._pending.get(ident)
        if pending is None:
            if len(self._pending) >= self.max_pending:
                return None
            pending = asyncio.ensure_future(self._query(ident))
            self._pending[ident] = pending
            pending.add_done_callback(functools.partial(self._forget_pending, ident))
        return pending

    async def resolve(self, ident: UUID) -> Attempt:
        """The task instance's ``Attempt``: cached, or from one query (shared by every waiter);
        unknown when the lookups are at their cap."""
        attempt = self._cache.get(ident)
        if attempt is not None:
            return attempt
        pending = self.flight(ident)
        if pending is None:
            return Attempt(self._caller(None))
        return await asyncio.shield(pending)

    def _forget_pending(self, ident: UUID, _done: object) -> None:
        self._pending.pop(ident, None)

    async def _query(self, ident: UUID) -> Attempt:
        loop = asyncio.get_running_loop()
        if loop.time() - self._failed_at < self.retry_after:
            return Attempt(self._caller(None))  # the database failed a moment ago: do not ask it per request
        self.stats.queries += 1
        start = time.perf_counter()
        try:
            found = await loop.run_in_executor(self._pool(), self.lookup, ident)
        except Exception:
            self.stats.failures += 1
            self._failed_at = loop.time()
            logs.once(
                "server:lookup",
                logging.WARNING,
                "store-metrics: the API server could not look a task instance up in the metadata "
                "database; its state store calls are counted as dag_id=<unknown> until it answers",
                exc_info=True,
            )
            return Attempt(self._caller(None))
        finally:
            self.stats.query_seconds += time.perf_counter() - start
        attempt = self._cache[ident] = self._attempt(found)
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
            self.stats.evictions += 1
        return attempt

    def _attempt(self, found: TaskAttempt | Tags | None) -> Attempt:
        if isinstance(found, TaskAttempt):
            return Attempt(self._caller(found.tags), found.try_number)
        return Attempt(self._caller(found))  # tags alone (or no such task instance): try unknown

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """Run blocking ``work(*args)`` on the lookup threads (never on the event loop)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool(), work, *args)

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        pid = os.getpid()
        if self._executor is None or self._executor_pid != pid:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.threads, thread_name_prefix="store-metrics-attribution"
            )
            self._executor_pid = pid
        return self._executor

    def close(self) -> None:
        """Let the lookup threads go (queries still running finish on their own)."""
        if self._executor is not None and self._executor_pid == os.getpid():
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = None
