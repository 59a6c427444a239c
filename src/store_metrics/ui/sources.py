"""Where the pages' numbers come from, per API server worker: the options, the database, Prometheus.

One ``Sources`` per worker (made at the first request, never at import). Each answer is
cached for ``ui_cache_ttl`` seconds (``TtlCache``): a DAG's footprint per DAG, the
deployment's once, the calls per DAG and window. A query that fails never raises out of here: the
answer carries the problem (and the last good value, if there was one), and the problem is logged
once until the source works again (``store_metrics.logs.Outage``).

What the pages show of a failure is its kind (``DATABASE_PROBLEMS``, the kinds of
``prometheus``): any signed-in user reads it, so never a host, a user name, an address or a
server's own message. The details go to the API server's log.

The views use the ``*_now`` coroutines: each read runs on the views' own few threads
(``Pool``, ``THREADS``), never on the API server's shared thread pool (where
Airflow's own sync routes run) nor on its event loop, and no request waits long for one
(``get_async``): a request waits at most ``WAIT`` seconds for another's
read of the same thing, and ``ui_timeout`` and ``GRACE`` for its own; past that it is answered
with the last answer, if any, saying it is not fresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from .. import logs
from ..config.reader import OptionValues, read_options
from ..errors import ConfigError
from ..inventory.database import FAILED, TIMEOUT, UNAVAILABLE, Database, problem_of, short
from .cache import Busy, Pool, TtlCache, Unanswered
from .calls import Calls, InventoryHealth, read_calls, read_inventory_health
from .prometheus import Prometheus, PrometheusError
from .reading import DagFootprint, Deployment, read_dag, read_deployment

T = TypeVar("T")
LOG_KEY = "ui:"
#: What the pages show of a failed database read, by ``problem_of``.
DATABASE_PROBLEMS: Final[dict[str, str]] = {
    TIMEOUT: "the metadata database did not answer within ui_timeout",
    UNAVAILABLE: "the metadata database could not be reached",
    FAILED: "the metadata database could not run the query",
}
#: Threads per API server worker that read for the views, and how many reads may be under way or
#: queued at once (distinct things: requests for the same thing share one read).
THREADS = 4
PENDING_CAP = 32
#: Seconds a request waits for another request's read of the same thing (then: the last answer).
WAIT = 1.0
#: Seconds a request waits for its own read beyond ``ui_timeout`` (the read's own bound).
GRACE = 1.0


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A value (``None`` if never read), the problem of its last load (empty: none), and its age."""

    value: T | None
    problem: str
    #: Seconds since the value was read (0 when it has just been).
    age: float


@dataclass(frozen=True)
class _Loaded(Generic[T]):
    value: T | None
    problem: str
    #: ``time.monotonic()`` when ``value`` was read (it may be older than the load, after a failure).
    read: float


class Sources:
    """The pages' data for one worker."""

    def __init__(self, options: OptionValues, problem: str = "") -> None:
        self.options = options
        #: Why the configuration did not load (the defaults are used then).
        self.config_problem = problem
        self._database: Database | None = None
        ttl = options.ui_cache_ttl
        self._dags: TtlCache[_Loaded[DagFootprint]] = TtlCache(ttl)
        self._deployment: TtlCache[_Loaded[Deployment]] = TtlCache(ttl, size=1)
        self._calls: TtlCache[_Loaded[Calls]] = TtlCache(ttl)
        self._health: TtlCache[_Loaded[InventoryHealth]] = TtlCache(ttl, size=1)
        self.pool = Pool(THREADS, PENDING_CAP)
        self._tables = _Source("database", "reading the state store tables")
        self._prometheus = _Source("prometheus", f"querying Prometheus at {options.ui_prometheus_url}")

    @classmethod
    def from_config(cls) -> Sources:
        try:
            return cls(read_options())
        except ConfigError as exc:
            logs.once(f"{LOG_KEY}config", logging.ERROR, "store-metrics UI: %s; using the defaults", exc)
            return cls(OptionValues(), problem=str(exc))

    @property
    def database(self) -> Database:
        if self._database is None:
            self._database = Database.from_airflow(self.options.ui_timeout)
        return self._database

    @property
    def prometheus_url(self) -> str:
        return self.options.ui_prometheus_url

    @property
    def prometheus(self) -> Prometheus:
        return Prometheus.from_options(self.options)

    # -- the metadata database ------------------------------------------------------------------

    def dag(self, dag_id: str) -> Answer[DagFootprint]:
        return self._answer(self._dags, dag_id, lambda: read_dag(self.database, dag_id), self._tables)

    def deployment(self) -> Answer[Deployment]:
        top = self.options.inventory_top
        return self._answer(
            self._deployment, "all", lambda: read_deployment(self.database, top), self._tables
        )

    # -- Prometheus -----------------------------------------------------------------------------

    def calls(self, dag_id: str, window: str) -> Answer[Calls] | None:
        """The DAG's calls in ``window``; ``None`` without ``ui_prometheus_url``."""
        if not self.prometheus_url:
            return None
        s = self.options
        return self._answer(
            self._calls,
            (dag_id, window),
            lambda: read_calls(self.prometheus, dag_id, window, s.prefix, s.ui_prometheus_selector),
            self._prometheus,
        )

    def inventory_health(self) -> Answer[InventoryHealth] | None:
        if not self.prometheus_url:
            return None
        s = self.options
        return self._answer(
            self._health,
            "all",
            lambda: read_inventory_health(self.prometheus, s.prefix, s.ui_prometheus_selector),
            self._prometheus,
        )

    # -- the same, for the views: off Airflow's threads, bounded waits ---------------------------

    async def dag_now(self, dag_id: str) -> Answer[DagFootprint]:
        return await self._answer_now(
            self._dags, dag_id, lambda: read_dag(self.database, dag_id), self._tables
        )

    async def deployment_now(self) -> Answer[Deployment]:
        top = self.options.inventory_top
        return await self._answer_now(
            self._deployment, "all", lambda: read_deployment(self.database, top), self._tables
        )

    async def calls_now(self, dag_id: str, window: str) -> Answer[Calls] | None:
        if not self.prometheus_url:
            return None
        s = self.options
        return await self._answer_now(
            self._calls,
            (dag_id, window),
            lambda: read_calls(self.prometheus, dag_id, window, s.prefix, s.ui_prometheus_selector),
            self._prometheus,
        )

    async def inventory_health_now(self) -> Answer[InventoryHealth] | None:
        if not self.prometheus_url:
            return None
        s = self.options
        return await self._answer_now(
            self._health,
            "all",
            lambda: read_inventory_health(self.prometheus, s.prefix, s.ui_prometheus_selector),
            self._prometheus,
        )

    # -- both -----------------------------------------------------------------------------------

    def _answer(
        self, cache: TtlCache[_Loaded[T]], key: object, read: Callable[[], T], source: _Source
    ) -> Answer[T]:
        return _as_answer(cache.get(key, _loader(cache, key, read, source)).value)

    async def _answer_now(
        self, cache: TtlCache[_Loaded[T]], key: object, read: Callable[[], T], source: _Source
    ) -> Answer[T]:
        load = _loader(cache, key, read, source)
        try:
            entry = await cache.get_async(
                key,
                load,
                self.pool,
                wait=min(WAIT, self.options.ui_timeout),
                own_wait=self.options.ui_timeout + GRACE,
            )
        except (Unanswered, Busy) as exc:
            last = cache.peek(key)
            problem = f"{source.what}: {exc}"
            if last is None:
                return Answer(None, problem, 0.0)
            return Answer(last.value.value, problem, max(0.0, time.monotonic() - last.value.read))
        return _as_answer(entry.value)


def _loader(
    cache: TtlCache[_Loaded[T]], key: object, read: Callable[[], T], source: _Source
) -> Callable[[], _Loaded[T]]:
    """What loads ``key`` into ``cache``: ``read()``, or on failure the last good value with the problem."""

    def load() -> _Loaded[T]:
        try:
            value = read()
        except Exception as exc:
            last = cache.peek(key)
            kept = last.value if last is not None else _Loaded[T](None, "", time.monotonic())
            return _Loaded(kept.value, source.failed(exc), kept.read)
        source.worked()
        return _Loaded(value, "", time.monotonic())

    return load


def _as_answer(loaded: _Loaded[T]) -> Answer[T]:
    return Answer(loaded.value, loaded.problem, max(0.0, time.monotonic() - loaded.read))


class _Source:
    """The database or Prometheus: each kind of failure said once, and its end."""

    def __init__(self, name: str, what: str) -> None:
        self.what = what
        self.outage = logs.Outage(f"{LOG_KEY}{name}:")

    def failed(self, exc: Exception) -> str:
        """Log the failure, with its details, once per kind and outage; return its kind, as the
        pages show it."""
        if isinstance(exc, PrometheusError):
            kind, shown, detail = exc.kind, str(exc), exc.detail
        else:
            kind = problem_of(exc)
            shown, detail = DATABASE_PROBLEMS[kind], short(exc)
        self.outage.failed(
            kind,
            logging.WARNING,
            "store-metrics UI: %s failed (%s: %s); the pages show the last good answer, if any, and "
            "that %s (said once until it works again)",
            self.what,
            kind,
            detail,
            shown,
        )
        return shown

    def worked(self) -> None:
        self.outage.recovered("store-metrics UI: %s works again", self.what)


_sources: Sources | None = None
_lock = threading.Lock()


def sources() -> Sources:
    """This worker's ``Sources``, made on first use."""
    global _sources
    with _lock:
        if _sources is None:
            _sources = Sources.from_config()
        return _sources
