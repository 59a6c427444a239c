"""``count_at = api_server``: each answered state store request counted on the task side's counter,
tagged as the task instance that made it (``attribution`` says who that is, ``lookups`` finds
its tags, ``Caller`` counts).

Everything runs on the worker's event loop except the metadata query: a request whose task instance
is cached is counted at once (a dict lookup and an integer add); one whose task instance is not is
counted by a background task once the query has answered. Nothing waits for it: not the response,
which has been sent, and not the server's next request. The waiting is bounded: past
``MAX_WAITING`` requests waiting, or ``MAX_PENDING_LOOKUPS`` task instances being looked up
(a database that hangs: 20,000 requests of 500 task instances once left 20,000 waiting tasks), a
request is counted at once as ``dag_id=<unknown>`` (said once in the log, and in the shutdown line).

A retried attempt's first answered task store read is also counted once as ``retry_resumed`` or
``retry_not_resumed`` (``retries``): the worker notes each task instance's first answered read
on the loop, and once the attempt is known to be a retry, claims it for the host on a lookup thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Final
from uuid import UUID

from .. import logs
from ..catalogue import Operation, Outcome, Store
from ..contracts import Emitter
from .attribution import NULL_TI, UNKNOWN_TAGS, WATCHER_TAGS, Lookup, Tags, lookup_attempt, requester
from .caller import Attempt, Caller
from .lookups import Lookups
from .retries import FirstReads, HostClaims
from .routes import Route, Scope
from .stats import AttributionStats

if TYPE_CHECKING:
    from .tracing import RouteSpan

#: Task instances whose tags one API server worker keeps (least recently used ones are dropped).
#: An entry is the id and a reference to a tag set shared by every instance of the same task:
#: about 250 bytes, so at most ~2.5 MB per worker. A task instance's calls arrive while it runs,
#: so this is the number of task instances that may be making state store calls at one time.
CACHE_SIZE: Final = 10_000
#: Threads per worker that run the metadata queries (a burst of new task instances queues here,
#: never on the event loop nor in the pool that runs the API's own sync route handlers).
LOOKUP_THREADS: Final = 2
#: After a query failed, seconds during which unknown task instances are counted as ``<unknown>``
#: without asking the database again (so a database that is down is not asked once per request).
RETRY_AFTER: Final = 5.0
#: Task instances being looked up at once, and requests waiting for lookups, per worker: past either,
#: a request is counted as ``unknown`` at once (each waiting request costs a task, ~2.5 KB).
MAX_PENDING_LOOKUPS: Final = 64
MAX_WAITING: Final = 2_000


_TASK_GET: Final[Route] = (Store.TASK.tag, Operation.GET.value)
#: The outcomes of an answered read, and whether it found a value.
_ANSWERED: Final = {Outcome.READ_FOUND.value: True, Outcome.READ_ABSENT.value: False}


def _could_not_count() -> None:
    logs.once(
        "server:attribute",
        logging.ERROR,
        "store-metrics could not count a state store request",
        exc_info=True,
    )


class StoreCalls:
    """Counts each answered state store request on the task side's counter, tagged as its task."""

    def __init__(
        self,
        emitter: Emitter,
        lookup: Lookup = lookup_attempt,
        *,
        cache_size: int = CACHE_SIZE,
        threads: int = LOOKUP_THREADS,
        retry_after: float = RETRY_AFTER,
        max_pending: int = MAX_PENDING_LOOKUPS,
        max_waiting: int = MAX_WAITING,
        claims: HostClaims | None = None,
    ) -> None:
        self.emitter = emitter
        self.max_waiting = max_waiting
        self.stats = AttributionStats()
        self.first_reads = FirstReads(cache_size)
        self.claims = claims or HostClaims()
        self._callers: dict[tuple[tuple[str, str], ...], Caller] = {}
        self._later: set[asyncio.Task[Any]] = set()
        self.unknown = self.caller(UNKNOWN_TAGS)
        self.watcher = self.caller(WATCHER_TAGS)
        self.lookups = Lookups(
            lookup,
            lambda tags: self.unknown if tags is None else self.caller(tags),
            self.stats,
            cache_size=cache_size,
            threads=threads,
            retry_after=retry_after,
            max_pending=max_pending,
        )

    @property
    def threads(self) -> int:
        return self.lookups.threads

    # -- the request path ----------------------------------------------------------------------

    def count(
        self, scope: Scope, route: Route, status: int, outcome: str, *, span: RouteSpan | None = None
    ) -> None:
        """Count one answered request (on the event loop, after the response). Never raises.

        ``span`` is only ever given to ``TracedStoreCalls`` (traces on)."""
        try:
            self.stats.requests += 1
            ident = requester(scope, route, status)
            if ident is None or ident == NULL_TI:
                self.stats.anonymous += 1
                (self.unknown if ident is None else self.watcher).count(route, outcome)
                return
            if route == _TASK_GET and outcome in _ANSWERED:
                self.first_reads.note(ident, _ANSWERED[outcome])
            attempt = self.lookups.cached(ident)
            if attempt is not None:
                self.stats.hits += 1
                attempt.caller.count(route, outcome)
                self._settle(ident, attempt)
                return
            self.stats.misses += 1
            # The lookup starts now (its slot is taken before the next request is counted).
            if len(self._later) >= self.max_waiting or self.lookups.flight(ident) is None:
                self._over_cap(route, outcome)
                return
            task = asyncio.get_running_loop().create_task(self._count_later(ident, route, outcome))
            self._later.add(task)
            task.add_done_callback(self._later.discard)
        except Exception:
            _could_not_count()

    def _over_cap(self, route: Route, outcome: str) -> None:
        """The lookups are behind (the caps): count the request as ``unknown`` now, say so once."""
        self.stats.over_cap += 1
        self.unknown.count(route, outcome)
        logs.once(
            "server:lookup-cap",
            logging.WARNING,
            "store-metrics: the API server's metadata lookups are behind (%d requests waiting, %d task "
            "instances being looked up: the caps are %d and %d); requests past them are counted as "
            "dag_id=<unknown> until the database answers again (said once; the shutdown line counts them)",
            len(self._later),
            self.lookups.pending,
            self.max_waiting,
            self.lookups.max_pending,
        )

    async def _count_later(self, ident: UUID, route: Route, outcome: str) -> None:
        try:
            attempt = await self.lookups.resolve(ident)
            attempt.caller.count(route, outcome)
            self._settle(ident, attempt)
        except Exception:
            _could_not_count()

    def _settle(self, ident: UUID, attempt: Attempt) -> asyncio.Task[bool] | None:
        """A retried attempt whose first answered read this worker saw and has not decided: decide it
        (the task deciding it, answering whether this worker did)."""
        if not attempt.retried:
            return None
        found = self.first_reads.take(ident)
        if found is None:
            return None
        task = asyncio.get_running_loop().create_task(self._decide(ident, attempt.caller, found))
        self._later.add(task)
        task.add_done_callback(self._later.discard)
        return task

    async def _decide(self, ident: UUID, caller: Caller, found: bool) -> bool:
        try:
            if await self.lookups.run(self.claims.claim, ident, found):
                self.stats.retries_decided += 1
                caller.count_retry(found)
                return True
            self.stats.retries_claimed_elsewhere += 1
        except Exception:
            _could_not_count()
        return False

    async def drain(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until every request waiting for a lookup is counted (and every
        retried attempt it made known is decided: those start while the lookups answer)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._later:
            left = deadline - loop.time()
            if left <= 0:
                return False
            _, pending = await asyncio.wait(set(self._later), timeout=left)
            if pending:
                return False
        return True

    # -- callers, and the end ------------------------------------------------------------------

    def caller(self, tags: Tags) -> Caller:
        """The (shared) ``Caller`` of one tag set."""
        key = tuple(sorted(tags.items()))
        caller = self._callers.get(key)
        if caller is None:
            caller = self._callers[key] = Caller(self.emitter, tags)
        return caller

    def cached(self, ident: UUID) -> Caller | None:
        attempt = self.lookups.cached(ident)
        return None if attempt is None else attempt.caller

    def close(self) -> None:
        self.lookups.close()

    def summary(self) -> str:
        s = self.stats
        return (
            f"{s.requests} state store requests counted, {s.hits} cache hits, {s.misses} misses "
            f"({s.hit_rate:.1%} hit rate), {s.queries} metadata queries ({s.failures} failed, "
            f"{s.query_seconds * 1000:.1f} ms on the lookup threads), {len(self.lookups)} task "
            f"instances cached, {s.evictions} evicted, {s.anonymous} without a task instance, "
            f"{s.over_cap} counted as unknown past the lookup caps; "
            f"{s.retries_decided} retried attempts decided here, {s.retries_claimed_elsewhere} by "
            f"another worker of this host"
        )
