"""Airflow's metadata database as the inventory reads it: its engine, a statement timeout, errors.

The inventory uses Airflow's own engine (``airflow.settings.engine``: the URL, connect arguments,
pool and ``pool_pre_ping`` of ``[database]``), so it reaches the database exactly as the
scheduler does and reconnects on its own after the database comes back.

Each query (``Database.read`` for the inventory, ``Database.fetch`` for any aggregate
statement, e.g. the UI's per-DAG one) runs in its own short transaction, rolled back, under a
statement timeout; read-only on PostgreSQL only (the other dialects get the timeout alone, so the
role it connects as should only ``SELECT``):

* PostgreSQL — ``SET TRANSACTION READ ONLY`` and ``SET LOCAL statement_timeout`` (the server
  cancels the statement, lock waits included; ``LOCAL`` ends with the transaction, so the pooled
  connection is left as it was);
* MySQL — the optimizer hint ``/*+ MAX_EXECUTION_TIME(ms) */`` on the ``SELECT`` (MySQL 5.7.8+);
* MariaDB — which reads that hint as a comment — the session's ``max_statement_time``, put back
  to the server's default afterwards so the pooled connection is left as it was;
* SQLite — a progress handler that interrupts the statement past its deadline.

``problem_of`` sorts a failure into one of a few kinds (``timeout``, ``unavailable``,
``failed``) so the inventory can say each kind once.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, overload

from sqlalchemy import CompoundSelect, Connection, Engine, Select
from sqlalchemy.exc import DBAPIError, OperationalError

from ..catalogue import Store
from .queries import statement

#: A statement ``Database.fetch`` runs: a ``SELECT`` or a ``UNION`` of them.
Query = Select[Any] | CompoundSelect[Any]

#: SQLite calls the progress handler every this many virtual machine instructions.
_SQLITE_PROGRESS_STEPS = 10_000


@dataclass(frozen=True)
class Reading:
    """The rows of one aggregate query, and what it cost."""

    store: Store
    rows: Sequence[Sequence[Any]]
    #: When the query was sent (UTC, wall clock): ages and expiry are relative to it.
    at: dt.datetime
    duration_ms: float


def timed_statement(store: Store, ms: int) -> Select[Any]:
    """``store``'s aggregate query; on MySQL with the ``MAX_EXECUTION_TIME`` hint (other dialects
    ignore it: their timeout is set on the transaction or the connection)."""
    return with_mysql_timeout(statement(store), ms)


@overload
def with_mysql_timeout(stmt: Select[Any], ms: int) -> Select[Any]: ...
@overload
def with_mysql_timeout(stmt: CompoundSelect[Any], ms: int) -> CompoundSelect[Any]: ...
def with_mysql_timeout(stmt: Query, ms: int) -> Query:
    """``stmt`` with MySQL's ``MAX_EXECUTION_TIME`` hint (other dialects ignore it). In a ``UNION``
    it follows the first ``SELECT`` and bounds the whole statement (MySQL's optimizer hints)."""
    hint = f"/*+ MAX_EXECUTION_TIME({ms}) */"
    if isinstance(stmt, CompoundSelect):
        first, *rest = stmt.selects
        assert isinstance(first, Select)
        return CompoundSelect(stmt.keyword, first.prefix_with(hint, dialect="mysql"), *rest)
    return stmt.prefix_with(hint, dialect="mysql")


class Database:
    """Runs the inventory's aggregate queries on ``engine``, each under ``timeout`` seconds."""

    def __init__(self, engine: Engine, timeout: float) -> None:
        self.engine = engine
        self.timeout = float(timeout)

    @classmethod
    def from_airflow(cls, timeout: float) -> Database:
        """Airflow's own engine (``import airflow`` configures it from ``[database]``)."""
        from airflow import settings

        if settings.engine is None:
            settings.configure_orm()  # type: ignore[no-untyped-call]
        engine: Engine = settings.get_engine()  # type: ignore[no-untyped-call]
        return cls(engine, timeout)

    @property
    def dialect(self) -> str:
        return str(self.engine.dialect.name)

    def describe(self) -> str:
        url = self.engine.url
        where = f"{url.host}:{url.port or ''}/{url.database}" if url.host else str(url.database)
        return f"{self.dialect} {where}"

    @property
    def timeout_ms(self) -> int:
        return max(1, int(self.timeout * 1000))

    def read(self, store: Store, now: dt.datetime | None = None) -> Reading:
        """Run ``store``'s aggregate query; raise what the database raised (see ``problem_of``)."""
        at = now or dt.datetime.now(dt.timezone.utc)
        params = {"now": at} if store is Store.TASK else {}
        rows, duration_ms = self.fetch(statement(store), params)
        return Reading(store, rows, at, duration_ms)

    def fetch(self, stmt: Query, params: Mapping[str, Any]) -> tuple[list[tuple[Any, ...]], float]:
        """Rows of ``stmt`` and its duration in ms, read-only under the timeout; raises what the
        database raised (see ``problem_of``)."""
        ms = self.timeout_ms
        with self.engine.connect() as conn:
            try:
                start = time.perf_counter()
                with self._timeout(conn, ms):
                    rows = [tuple(row) for row in conn.execute(with_mysql_timeout(stmt, ms), dict(params))]
                duration_ms = (time.perf_counter() - start) * 1000.0
            finally:
                # Read-only: nothing to keep. A broken connection must not hide the query's own error.
                with suppress(Exception):
                    conn.rollback()
        return rows, duration_ms

    @contextmanager
    def _timeout(self, conn: Connection, ms: int) -> Iterator[None]:
        with statement_timeout(conn, ms):
            yield


@contextmanager
def statement_timeout(conn: Connection, ms: int) -> Iterator[None]:
    """The statements ``conn`` runs in this block (its transaction) read-only and cancelled after
    ``ms`` milliseconds, on each dialect's terms (see the module); MySQL's is a hint on the statement
    (``with_mysql_timeout``). Also what the API server's task instance lookups run under."""
    dialect = conn.dialect
    if dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION READ ONLY")
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {ms}")
        yield
    elif dialect.name == "sqlite":
        raw = conn.connection.dbapi_connection
        deadline = time.monotonic() + ms / 1000.0
        if isinstance(raw, sqlite3.Connection):
            raw.set_progress_handler(lambda: int(time.monotonic() > deadline), _SQLITE_PROGRESS_STEPS)
        try:
            yield
        finally:
            if isinstance(raw, sqlite3.Connection):
                raw.set_progress_handler(None, 0)
    elif getattr(dialect, "is_mariadb", False):
        conn.exec_driver_sql(f"SET SESSION max_statement_time = {ms / 1000.0:.3f}")
        try:
            yield
        finally:
            with suppress(Exception):
                conn.exec_driver_sql("SET SESSION max_statement_time = DEFAULT")
    else:
        yield


#: The kinds of problem the inventory tells apart (each is logged once until the next success).
TIMEOUT = "timeout"
UNAVAILABLE = "unavailable"
FAILED = "failed"

_TIMEOUT_TEXTS = ("statement timeout", "canceling statement", "interrupted", "max_execution_time")
# MySQL: ER_QUERY_TIMEOUT (3024), MariaDB: ER_STATEMENT_TIMEOUT (1969), and the client's "lost
# connection" / "can't connect" codes.
_MYSQL_TIMEOUTS = {3024, 1969}
_MYSQL_GONE = {2002, 2003, 2005, 2006, 2013}


def problem_of(exc: BaseException) -> str:
    """``timeout`` (the statement timeout fired), ``unavailable`` (no connection) or ``failed``."""
    orig: BaseException = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    text = str(orig).lower()
    if getattr(orig, "pgcode", None) == "57014" or any(t in text for t in _TIMEOUT_TEXTS):
        return TIMEOUT
    code = orig.args[0] if orig.args and isinstance(orig.args[0], int) else None
    if code in _MYSQL_TIMEOUTS:
        return TIMEOUT
    if code in _MYSQL_GONE:
        return UNAVAILABLE
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return UNAVAILABLE
    if isinstance(exc, OperationalError) or isinstance(orig, (ConnectionError, TimeoutError)):
        return UNAVAILABLE
    return FAILED


def short(exc: BaseException) -> str:
    """One line saying what went wrong, without SQLAlchemy's statement dump and background link."""
    orig: BaseException = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    first = (str(orig).strip().splitlines() or [""])[0]
    return f"{type(orig).__name__}: {first}" if first else type(orig).__name__
