"""``store-metrics inventory`` on a real MariaDB, through SQLAlchemy's ``mysql`` dialect: exact footprint.

MySQL is not packaged for Debian 12; its ``mariadb-server`` speaks the same dialect, and the
inventory reaches it with a plain ``mysql+mysqldb://`` URL, as it would a MySQL server (so the
statements carry the ``/*+ MAX_EXECUTION_TIME */`` hint and use ``octet_length``, and the columns
are Airflow's MySQL variants: ``MEDIUMTEXT`` values, ``TIMESTAMP(6)`` times, ``utf8mb3_bin`` ids).
Airflow imports ``mysqlclient`` for any ``mysql`` URL, whatever the driver, and its async engine
needs ``aiomysql``: all three drivers come with the ``dev`` extra.

The test starts its own MariaDB (``testbed.databases.ThrowawayMariaDB``: ``mariadb-install-db``
and ``mariadbd`` with their own data directory, socket and error log under /tmp, on a free port),
gives it Airflow 3.3's schema with Airflow's own ``airflow db migrate``, fills it with the same
real DAG runs and Airflow-side writes as the SQLite and PostgreSQL tests
(``support.inventory_world``: expired entries, a two-day-old one, non-ASCII values, a
worker-side backend's references, asset state), and runs ``store-metrics inventory --serve``
(through ``mysqlclient`` and through ``pymysql``) and the one-shot ``store-metrics inventory``
against it in their own processes, as an operator would. The scraped gauges must equal the
hand-computed entries, bytes and expired counts exactly.

MariaDB (10.11) ignores the ``MAX_EXECUTION_TIME`` hint, which is MySQL's: the inventory sets
MariaDB's own ``max_statement_time`` for the query instead, and a table held locked by another
session (``LOCK TABLES ... WRITE`` for 15 s, against a 1 s timeout) costs one log line while the
loop keeps serving the last footprint and recovers.

Not skipped: without the MariaDB binaries (``apt-get install mariadb-server``, which
``scripts/setup dev`` does) or the drivers, the test fails and says so.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from pathlib import Path

import pytest

from support.inventory_world import (
    DENIED_TO_THE_READ_ONLY_ROLE,
    World,
    a_locked_table_costs_one_line,
    check_printed_footprint,
    check_served_and_printed,
    expected_totals,
    inventory,
    role_sql,
)
from testbed.databases import ThrowawayMariaDB

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
#: The inventory's world (``conftest.py``) on MariaDB.
ON_MARIADB = pytest.mark.parametrize("world", ["mariadb"], indirect=True)


def test_the_server_is_mariadb_reached_through_the_mysql_dialect(mariadb: ThrowawayMariaDB) -> None:
    from sqlalchemy import create_engine

    assert "MariaDB" in mariadb.version()
    engine = create_engine(mariadb.url)
    try:
        with engine.connect():
            assert engine.dialect.name == "mysql"
            assert engine.dialect.is_mariadb
    finally:
        engine.dispose()


@ON_MARIADB
def test_the_rows_are_those_the_expectations_count(world: World, mariadb: ThrowawayMariaDB) -> None:
    task_entries, task_expired, asset_entries = expected_totals()
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            # TIMESTAMP columns and NOW() are both read in the session's time zone: comparable as they are.
            cur.execute("SELECT count(*), sum(expires_at < NOW(6)) FROM task_state_store")
            assert tuple(int(v) for v in cur.fetchone()) == (task_entries, task_expired)
            cur.execute("SELECT count(*) FROM asset_state_store")
            assert int(cur.fetchone()[0]) == asset_entries
    finally:
        conn.close()


@ON_MARIADB
@pytest.mark.parametrize("driver", ["mysqldb", "pymysql"])
def test_the_footprint_on_mariadb_equals_the_hand_computed_one(
    world: World, mariadb: ThrowawayMariaDB, driver: str, tmp_path: Path
) -> None:
    through = dataclasses.replace(world, url=mariadb.url_for(driver))
    check_served_and_printed(through, tmp_path / "serve.log")


def _hold_lock(mariadb: ThrowawayMariaDB, seconds: float, locked: threading.Event) -> None:
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("LOCK TABLES task_state_store WRITE")
            locked.set()
            cur.execute("SELECT SLEEP(%s)", (seconds,))
            cur.execute("UNLOCK TABLES")
    finally:
        conn.close()


@ON_MARIADB
def test_a_slow_database_costs_one_line_and_the_loop_recovers(
    world: World, mariadb: ThrowawayMariaDB, tmp_path: Path
) -> None:
    warning = a_locked_table_costs_one_line(
        world, tmp_path / "serve.log", lambda locked: _hold_lock(mariadb, 15.0, locked)
    )
    assert "max_statement_time" in warning


@ON_MARIADB
def test_the_helm_pages_read_only_user_reads_the_footprint_and_nothing_more(
    world: World, mariadb: ThrowawayMariaDB
) -> None:
    """The MySQL/MariaDB user docs/deploy/helm.md creates for the inventory: the inventory reads the
    same footprint as it, and it may not write to the store nor read Airflow's other tables."""
    import MySQLdb

    sql = role_sql("CREATE USER")
    user, password = re.search(r"CREATE USER '(\w+)'@'%' IDENTIFIED BY '([^']+)'", sql).groups()  # type: ignore[union-attr]
    owner = mariadb._connect_root()
    try:
        with owner.cursor() as cur:
            for statement in filter(None, (s.strip() for s in sql.split(";"))):
                cur.execute(statement)
        owner.commit()
    finally:
        owner.close()
    url = mariadb.url.replace("://airflow@", f"://{user}:{password}@", 1)
    check_printed_footprint(inventory(dataclasses.replace(world, url=url)))
    conn = MySQLdb.connect(
        host="127.0.0.1", port=mariadb.port, user=user, password=password, database="airflow"
    )
    try:
        for statement in DENIED_TO_THE_READ_ONLY_ROLE:
            with conn.cursor() as cur, pytest.raises(MySQLdb.OperationalError, match="denied"):
                cur.execute(statement)
    finally:
        conn.close()
