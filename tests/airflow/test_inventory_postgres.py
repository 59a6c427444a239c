"""``store-metrics inventory`` on a real PostgreSQL: exact footprint, a slow database, a stopped one.

The test starts its own PostgreSQL (Debian's ``postgresql`` binaries: ``initdb`` and ``pg_ctl`` on
a free port, its own data directory under /tmp, as user ``postgres`` when run as root), gives it
Airflow 3.3's schema with ``airflow db migrate``, fills it with the same real DAG runs and
Airflow-side writes as the SQLite tests (``support.inventory_world``), and runs
``store-metrics inventory --serve`` against it in its own process:

* the scraped gauges equal the hand-computed entries, bytes and expired counts exactly;
* a slow database (a session holding ``ACCESS EXCLUSIVE`` on ``task_state_store`` through a
  ``pg_sleep`` of 15 s, against a 1 s statement timeout) costs one log line, the loop keeps
  serving the last footprint with ``up = 0`` and recovers by itself;
* a stopped database (``pg_ctl stop``) costs one log line, the loop keeps going, and after
  ``pg_ctl start`` it reads the same footprint again.

Skipped, with the reason, only when the PostgreSQL binaries (or psycopg2) are not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.inventory_world import (
    DENIED_TO_THE_READ_ONLY_ROLE,
    EXPECTED_TASKS,
    FAST,
    Served,
    World,
    a_locked_table_costs_one_line,
    check_footprint,
    check_printed_footprint,
    check_served_and_printed,
    check_ui_reading,
    inventory,
    role_sql,
    task_labels,
)
from testbed.databases import ThrowawayPostgres
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow]
#: The inventory's world (``conftest.py``) on PostgreSQL.
ON_POSTGRES = pytest.mark.parametrize("world", ["postgres"], indirect=True)

WRITER = ("airflow_task_state_store_footprint_entries", task_labels("inventory_footprint", "writer"))


@ON_POSTGRES
def test_the_footprint_on_postgres_equals_the_hand_computed_one(world: World, tmp_path: Path) -> None:
    check_served_and_printed(world, tmp_path / "serve.log")


def _hold_lock(
    postgres: ThrowawayPostgres, seconds: float, locked: threading.Event, table: str = "task_state_store"
) -> None:
    """Hold ``table`` locked against every other session (reads too) for ``seconds``."""
    conn = postgres.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            locked.set()
            cur.execute("SELECT pg_sleep(%s)", (seconds,))
        conn.commit()
    finally:
        conn.close()


@ON_POSTGRES
def test_a_slow_database_costs_one_line_and_the_loop_recovers(
    world: World, postgres: ThrowawayPostgres, tmp_path: Path
) -> None:
    warning = a_locked_table_costs_one_line(
        world, tmp_path / "serve.log", lambda locked: _hold_lock(postgres, 15.0, locked)
    )
    assert "QueryCanceled" in warning


@ON_POSTGRES
def test_a_stopped_database_costs_one_line_and_the_loop_recovers(
    world: World, postgres: ThrowawayPostgres, tmp_path: Path
) -> None:
    with Served(world, tmp_path / "serve.log", **FAST) as served:
        served.wait_up(1.0)
        postgres.stop()
        stopped = time.time()
        door = None
        try:
            wait_until(
                lambda: served.alive() and served.up("task") == 0.0 and served.up("asset") == 0.0, 60, 0.2
            )
            # Several more intervals against a database that is not there, counted: each is a
            # connection attempt to its port, where a listener now shuts each one at once (as a
            # host with no server there refuses it, and the same kind of failure: unavailable).
            door = _ShutDoor(postgres.port)
            wait_until(lambda: served.alive() and door.knocks >= 4, 60, 0.1)
            scraped = time.time()
            down = served.samples()
            assert down[WRITER] == EXPECTED_TASKS[("inventory_footprint", "writer")].entries
            age = down[("airflow_state_store_inventory_footprint_age_seconds", (("store", "task"),))]
            # The footprint shown is the last one read (before the stop), and says how old it is.
            assert age >= scraped - stopped
            warnings = served.lines("WARNING")
            assert len(warnings) == 1, served.text()
            assert "could not reach the database" in warnings[0] and "OperationalError" in warnings[0]
        finally:
            if door is not None:
                door.close()
            postgres.start()
        samples = served.wait_up(1.0, timeout=60)
        check_footprint(samples, world)
        assert len(served.lines("WARNING")) == 1
        assert len(served.lines("works again")) == 1, served.text()
        assert served.lines("ERROR") == []


class _ShutDoor:
    """Listens on ``port`` of 127.0.0.1 (a stopped server's), counts each connection and closes it at once."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.knocks = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.knocks += 1
            conn.close()

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(5)


@ON_POSTGRES
def test_the_ui_reads_each_dag_and_the_deployment_exactly_on_postgres(world: World) -> None:
    """The State store tab's one statement per DAG, and the deployment page's, on PostgreSQL."""
    check_ui_reading(world)


@ON_POSTGRES
def test_the_helm_pages_read_only_role_reads_the_footprint_and_nothing_more(
    world: World, postgres: ThrowawayPostgres
) -> None:
    """The PostgreSQL role docs/deploy/helm.md creates for the inventory (the Secret the manifests
    name by default): the inventory reads the same footprint through it, and it may not write to
    the store nor read Airflow's other tables."""
    import psycopg2

    sql = role_sql("CREATE ROLE")
    role = re.search(r"CREATE ROLE (\w+)", sql).group(1)  # type: ignore[union-attr]
    owner = postgres.connect()
    try:
        with owner.cursor() as cur:
            cur.execute(sql)
        owner.commit()
    finally:
        owner.close()
    url = world.url.replace("://airflow@", f"://{role}@", 1)
    check_printed_footprint(inventory(world, AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=url))
    conn = psycopg2.connect(host="127.0.0.1", port=postgres.port, user=role, dbname="airflow")
    try:
        for statement in DENIED_TO_THE_READ_ONLY_ROLE:
            with conn.cursor() as cur, pytest.raises(psycopg2.errors.InsufficientPrivilege):
                cur.execute(statement)
            conn.rollback()
    finally:
        conn.close()


#: The API server's task instance lookup, in a fresh process with the world's configuration.
LOOKUP = """
import json, sys, uuid
from store_metrics.api_server.attribution import lookup_attempt
try:
    attempt = lookup_attempt(uuid.UUID(sys.argv[1]))
    print(json.dumps({"found": dict(attempt.tags) if attempt else None}))
except Exception as exc:
    print(json.dumps({"raised": type(getattr(exc, "orig", None) or exc).__name__}))
"""


#: As kubernetes/base/inventory.yaml runs the inventory: the whole file system read-only (the root
#: remounted, AIRFLOW_HOME's airflow.cfg bound read-only at /mnt) but a fresh, small /tmp. The script
#: first proves it cannot write outside /tmp (exit 3 otherwise).
READ_ONLY_ROOT = """set -e
home="$1"; shift
mount --make-rprivate /
mount --bind "$home" /mnt
mount -o remount,bind,ro /mnt
mount -o remount,bind,ro /
mount -t tmpfs -o size=32m,mode=1777 tmpfs /tmp
if touch /mnt/probe 2>/dev/null || touch /probe 2>/dev/null; then exit 3; fi
exec "$@"
"""


@ON_POSTGRES
def test_the_inventory_serves_from_a_read_only_root_filesystem(world: World, tmp_path: Path) -> None:
    """The shipped pod's ``readOnlyRootFilesystem: true`` costs nothing: the footprint is served
    exactly, with no warning, while nothing but /tmp can be written."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare (util-linux) for a mount namespace")
    wrap = ["unshare", "--mount", "sh", "-c", READ_ONLY_ROOT, "sh", str(world.home)]
    log = tmp_path / "serve.log"
    with Served(world, log, wrap=wrap, AIRFLOW_HOME="/mnt", **FAST) as served:
        samples = served.wait_up(1.0)
        check_footprint(samples, world)
        assert served.lines("WARNING") == [], served.text()
        assert served.lines("ERROR") == [], served.text()
    assert "Read-only file system" not in log.read_text()


@ON_POSTGRES
def test_the_api_servers_task_instance_lookup_gives_up_on_a_locked_table(
    world: World, postgres: ThrowawayPostgres
) -> None:
    """``count_at = api_server`` looks each new task instance up; a table locked for 30 s (a migration,
    a long transaction) cancels the lookup at its statement timeout (5 s) rather than hold one of the
    worker's two lookup threads for as long as the lock lasts (the request is then counted as unknown)."""
    conn = postgres.connect()
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM task_instance LIMIT 1")
        ti_id = str(cur.fetchone()[0])
    conn.close()
    locked = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(postgres, 30.0, locked, "task_instance"), daemon=True)
    holder.start()
    assert locked.wait(30)
    proc = subprocess.run(
        [sys.executable, "-c", LOOKUP, ti_id],
        env=world.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert holder.is_alive()  # answered while the lock was still held
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"raised": "QueryCanceled"}
    holder.join(60)
