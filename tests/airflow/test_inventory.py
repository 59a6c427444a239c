"""``store-metrics inventory`` on SQLite: the footprint of real DAG runs, exactly; bounding; exports.

The database is a real Airflow 3.3 metadata database (``airflow db migrate``), filled by real
``dag.test()`` runs (one of them through a worker-side custom state store backend, so its entries
hold references) and by Airflow's own server-side backend; the command runs in its own process as
an operator would run it, and the gauges are read from its scrape endpoint or from a real UDP
socket. ``support.inventory_world`` holds the DAGs and the hand-computed expectations; the same
world is checked on PostgreSQL and MariaDB in ``test_inventory_postgres.py`` and
``test_inventory_mariadb.py`` (the ``world`` fixture: ``conftest.py``).
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from store_metrics import catalogue
from store_metrics.catalogue import OTHER, Kind, Store
from store_metrics.inventory.footprint import Group, bound, footprint_of
from store_metrics.inventory.table import age
from store_metrics.naming import tag_value
from support.inventory_world import (
    EXPECTED_ASSETS,
    EXPECTED_TASKS,
    Served,
    World,
    asset_labels,
    check_footprint,
    check_ui_reading,
    expected_totals,
    inventory,
    task_labels,
)
from testbed.airflow import clean_environ, map_index_column
from testbed.endpoints import SilentTcpServer
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
FAST = {"AIRFLOW__STORE_METRICS__INVENTORY_INTERVAL": "0.5"}


# -- the catalogue and the bounding, without a database ---------------------------------------------------


def test_footprint_gauges_are_catalogued_gauges_never_by_key_or_run() -> None:
    names = [m.name for m in catalogue.FOOTPRINT_METRICS]
    assert names == [
        "task_state_store.footprint.entries",
        "task_state_store.footprint.bytes",
        "task_state_store.footprint.oldest_age",
        "task_state_store.footprint.newest_age",
        "task_state_store.footprint.external_entries",
        "task_state_store.footprint.expired_entries",
        "asset_state_store.footprint.entries",
        "asset_state_store.footprint.bytes",
        "asset_state_store.footprint.oldest_age",
        "asset_state_store.footprint.newest_age",
        "asset_state_store.footprint.external_entries",
    ]
    for metric in catalogue.INVENTORY_METRICS:
        assert metric.kind is Kind.GAUGE
        assert not {"key", "run_id", "map_index"} & set(metric.all_tags)
        assert catalogue.get(metric.name) is metric
        assert metric in catalogue.CATALOGUE_TABLE and metric in catalogue.ALL_METRICS
    assert catalogue.get("task_state_store.footprint.entries").all_tags == ("dag_id", "task_id")
    assert catalogue.get("asset_state_store.footprint.bytes").all_tags == ("asset",)
    assert catalogue.get("state_store_inventory.up").all_tags == ("store",)
    prom = {m.name: m.prometheus_name() for m in catalogue.INVENTORY_METRICS}
    assert prom["task_state_store.footprint.bytes"] == "airflow_task_state_store_footprint_bytes"
    assert (
        prom["task_state_store.footprint.oldest_age"]
        == "airflow_task_state_store_footprint_oldest_age_seconds"
    )
    assert prom["asset_state_store.footprint.entries"] == "airflow_asset_state_store_footprint_entries"
    assert (
        prom["state_store_inventory.query.duration"]
        == "airflow_state_store_inventory_query_duration_milliseconds"
    )
    # The task side's counters are unchanged: the inventory adds, it does not rename.
    assert [m.name for m in catalogue.METRICS][-1] == "store_metrics.check"


def _g(entries: int, stored: int, external: int = 0, expired: int | None = 0) -> Group:
    return Group(entries, stored, external, NOW - dt.timedelta(hours=entries), NOW, expired)


def test_bound_keeps_the_top_dags_and_tasks_by_bytes_and_sums_the_rest_under_other() -> None:
    groups = {
        ("big", "a"): _g(1, 1000),
        ("big", "b"): _g(2, 500),
        ("big", "c"): _g(3, 10, expired=2),
        ("mid", "a"): _g(4, 900),
        ("small", "a"): _g(5, 100, external=1),
        ("tiny", "a"): _g(6, 1, expired=1),
    }
    kept = bound(Store.TASK, groups, top=2)
    assert set(kept) == {("big", "a"), ("big", "b"), ("big", OTHER), ("mid", "a"), (OTHER, OTHER)}
    assert kept[("big", OTHER)] == groups[("big", "c")]
    rest = kept[(OTHER, OTHER)]
    assert (rest.entries, rest.stored_bytes, rest.external, rest.expired) == (11, 101, 1, 1)
    assert rest.value_bytes is None  # one of its entries holds a reference: bytes unknown
    assert rest.oldest == NOW - dt.timedelta(hours=6)
    # Nothing is lost: the bounded groups add up to the table.
    total = sum(g.entries for g in kept.values()), sum(g.stored_bytes for g in kept.values())
    assert total == (21, 2511)
    assert sum(g.expired or 0 for g in kept.values()) == 3
    # The bound holds whatever the table holds: top x (top + 1) + 1 task groups at most.
    many = {(f"dag{d}", f"task{t}"): _g(1, d * 100 + t) for d in range(30) for t in range(30)}
    for top in (1, 3, 10):
        assert len(bound(Store.TASK, many, top)) <= top * (top + 1) + 1
        assert sum(g.entries for g in bound(Store.TASK, many, top).values()) == 900


def test_assets_keep_the_top_n_and_the_rest_under_other() -> None:
    groups = {(f"asset{i}",): _g(1, i, expired=None) for i in range(10)}
    kept = bound(Store.ASSET, groups, top=3)
    assert set(kept) == {("asset9",), ("asset8",), ("asset7",), (OTHER,)}
    assert kept[(OTHER,)].entries == 7 and kept[(OTHER,)].stored_bytes == sum(range(7))
    assert kept[(OTHER,)].expired is None


def test_keys_keep_their_identity_and_become_labels_by_the_tag_value_rule() -> None:
    """Two DAGs the old rule made one stay two; a missing name is the plugin's ``<unknown>`` where it
    becomes a label, and a DAG named ``other`` is no ``<other>`` bucket."""
    rows = [
        ("donn\u00e9es_2024", "t\u00e2che", 2, 20, 0, NOW, NOW, 1),
        ("donn_es_2024", "t_che", 3, 30, 0, NOW - dt.timedelta(days=1), NOW, 0),
        ("ok", None, 1, 5, 1, NOW, NOW, 0),
        ("other", "other", 1, 7, 0, NOW, NOW, 0),
    ]
    fp = footprint_of(Store.TASK, rows, NOW, 1.0, top=10)
    assert set(fp.groups) == {
        ("donn\u00e9es_2024", "t\u00e2che"),
        ("donn_es_2024", "t_che"),
        ("ok", catalogue.UNKNOWN),
        ("other", "other"),
    }
    assert fp.distinct == 4
    assert (fp.groups[("donn_es_2024", "t_che")].entries, fp.groups[("donn_es_2024", "t_che")].expired) == (
        3,
        0,
    )
    labels = {tuple(tag_value(v) for v in key) for key in fp.groups}
    assert labels == set(fp.groups)  # every one of them a label value as it is


def test_ages_read_compactly() -> None:
    assert [age(s) for s in (None, 0, 45, 725, 3600, 18120, 86400 * 3 + 4 * 3600)] == [
        "-",
        "0s",
        "45s",
        "12m 5s",
        "1h",
        "5h 2m",
        "3d 4h",
    ]


def test_the_table_shows_the_largest_first_with_other_last_and_exact_totals() -> None:
    from store_metrics.inventory.table import render_store

    groups = {("small", "t"): _g(1, 10), (OTHER, OTHER): _g(9, 9000), ("big", "t"): _g(2, 2000, expired=1)}
    fp = footprint_of(Store.TASK, [], NOW, 3.4, top=2)
    fp = type(fp)(Store.TASK, groups, NOW, 3.4, distinct=12)
    lines = render_store(fp, NOW, top=2)
    assert lines[0] == (
        "task state store: 12 entries, 11,010 bytes, in 12 DAG tasks; read in 3 ms; "
        "the top 2 by bytes shown, the rest under <other>"
    )
    assert [line.split()[:4] for line in lines[1:]] == [
        ["dag_id", "task_id", "entries", "bytes"],
        ["big", "t", "2", "2,000"],
        ["small", "t", "1", "10"],
        ["<other>", "<other>", "9", "9,000"],
    ]
    assert lines[2].split()[4:] == ["2h", "0s", "1", "0"]


def test_neither_the_plugin_nor_the_api_server_side_loads_the_inventory(tmp_path: Path) -> None:
    # One inventory per deployment: what every task process and every API server worker loads must
    # not query the tables (each would report the same totals).
    script = (
        "import sys\n"
        "import store_metrics.integration.plugin, store_metrics.api_server\n"
        "import store_metrics.api_server.metrics\n"
        "print(sorted(m for m in sys.modules if m.startswith('store_metrics.inventory')))\n"
    )
    env = {**clean_environ(), "AIRFLOW_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_sizes_are_computed_in_sql_for_each_dialect(tmp_path: Path) -> None:
    # Compiled against each dialect with Airflow's own table definitions (in a fresh process: importing
    # Airflow's models configures Airflow from its environment).
    script = (
        "from sqlalchemy.dialects import mysql, postgresql, sqlite\n"
        "from store_metrics.catalogue import Store\n"
        "from store_metrics.inventory.database import timed_statement\n"
        "for d in (sqlite.dialect(), postgresql.dialect(), mysql.dialect()):\n"
        "    for s in Store:\n"
        "        sql = str(timed_statement(s, 1500).compile(dialect=d))\n"
        "        print(d.name, s.value, sql.replace(chr(10), ' '))\n"
    )
    env = {**clean_environ(), "AIRFLOW_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    sql = {tuple(line.split(" ", 2)[:2]): line.split(" ", 2)[2] for line in out.splitlines()}
    assert len(sql) == 6
    for (dialect, store), text in sql.items():
        # ``value`` appears only inside a size or a prefix function: its text never leaves the database.
        wrapped = re.findall(r"(\w+)\((?:\w+\.)?value\b", text)
        assert len(wrapped) == len(re.findall(r"\bvalue\b", text)) >= 3, text
        assert set(wrapped) <= {"octet_length", "CAST", "substr"}, text
        assert "FROM task_state_store" in text if store == "task_state_store" else "asset_state_store" in text
        assert "GROUP BY" in text
        if dialect == "sqlite":
            assert "length(CAST(" in text and "AS BLOB))" in text and "octet_length" not in text
        else:
            assert "octet_length(" in text
        assert ("MAX_EXECUTION_TIME(1500)" in text) == (dialect == "mysql"), text
        assert ("expires_at <" in text) == (store == "task_state_store")


# -- a real Airflow on SQLite -----------------------------------------------------------------------------


@pytest.mark.airflow
@pytest.mark.slow
def test_serve_reports_exactly_what_the_dag_runs_wrote(world: World, tmp_path: Path) -> None:
    with Served(world, tmp_path / "serve.log", **FAST) as served:
        samples = served.wait_up(1.0)
        check_footprint(samples, world)
        for store in ("task", "asset"):
            labels = (("store", store),)
            assert samples[("airflow_state_store_inventory_footprint_age_seconds", labels)] < 5
            assert samples[("airflow_state_store_inventory_query_duration_milliseconds", labels)] > 0
        # It keeps reading: both tables are read again, several times, and the footprint stays.
        served.wait_for_reads("asset", 3)
        again = served.wait_for_reads("task", 3)
        assert again[("airflow_state_store_inventory_footprint_age_seconds", (("store", "task"),))] < 5
        check_footprint(again, world)
        assert served.lines("WARNING") == [] and served.lines("ERROR") == []
        served.close()
        assert served.proc.returncode == 0
        stopped = served.lines("stopped after")
        assert len(stopped) == 1 and int(stopped[0].split("after ")[1].split()[0]) >= 3


@pytest.mark.airflow
@pytest.mark.slow
def test_one_shot_prints_the_footprint_largest_first(world: World) -> None:
    proc = inventory(world)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    tasks, expired, assets = expected_totals()
    task_bytes = sum(w.bytes or 0 for w in EXPECTED_TASKS.values())
    external = sum(w.external for w in EXPECTED_TASKS.values())
    assert out.startswith(
        f"task state store: {tasks} entries in 5 DAG tasks, {external} entries hold a custom backend's "
        "reference (bytes unknown); read in "
    ), out
    rows = [line.split() for line in out.split("asset state store")[0].splitlines()[2:] if line.strip()]
    # Largest first by stored bytes: 5,054 B; two references; 67 B; 18 B; 13 B.
    assert [r[:2] for r in rows] == [
        ["inventory_footprint", "writer"],
        ["inventory_offloaded", "offloaded"],
        ["inventory_footprint", "mapped"],
        ["inventory_footprint", "admin_note"],
        ["inventory_footprint", "cleaner"],
    ]
    by_key = {(r[0], r[1]): r for r in rows}
    for key, want in EXPECTED_TASKS.items():
        row = by_key[key]
        assert row[2] == f"{want.entries:,}"
        assert row[3] == ("unknown" if want.bytes is None else f"{want.bytes:,}")
        assert row[-2:] == [f"{want.expired:,}", f"{want.external:,}"]
    assert by_key[("inventory_footprint", "admin_note")][4] == "2d"  # its oldest entry: two days old
    assert sum(int(by_key[k][-2]) for k in by_key) == expired
    assert task_bytes == 5054 + 67 + 18 + 13
    assert (
        f"asset state store: {assets} entries in 3 assets, 1 entry holds a custom backend's reference" in out
    )
    asset_rows = [line.split() for line in out.split("asset state store")[1].splitlines()[2:] if line.strip()]
    assert [r[0] for r in asset_rows] == ["inventory/orders", "inventory/offloaded", "inventory/events"]
    assert proc.stderr.count("WARNING") == 0


@pytest.mark.airflow
@pytest.mark.slow
def test_top_one_keeps_one_dag_and_one_asset_and_other_holds_the_rest(world: World, tmp_path: Path) -> None:
    with Served(world, tmp_path / "serve.log", AIRFLOW__STORE_METRICS__INVENTORY_TOP="1", **FAST) as served:
        samples = served.wait_up(1.0)
    entries = "airflow_task_state_store_footprint_entries"
    groups = {labels: value for (name, labels), value in samples.items() if name == entries}
    writer = EXPECTED_TASKS[("inventory_footprint", "writer")]
    rest_of_dag = [w for (d, t), w in EXPECTED_TASKS.items() if d == "inventory_footprint" and t != "writer"]
    offloaded = EXPECTED_TASKS[("inventory_offloaded", "offloaded")]
    assert groups == {
        task_labels("inventory_footprint", "writer"): writer.entries,
        task_labels("inventory_footprint", OTHER): sum(w.entries for w in rest_of_dag),
        task_labels(OTHER, OTHER): offloaded.entries,
    }
    got_bytes = samples[
        ("airflow_task_state_store_footprint_bytes", task_labels("inventory_footprint", OTHER))
    ]
    assert got_bytes == sum(w.bytes or 0 for w in rest_of_dag)
    # The other/other bucket holds references: its bytes are unknown, so it has no bytes series.
    assert ("airflow_task_state_store_footprint_bytes", task_labels(OTHER, OTHER)) not in samples
    assert samples[("airflow_task_state_store_footprint_expired_entries", task_labels(OTHER, OTHER))] == 1
    asset_entries = {
        labels: v for (n, labels), v in samples.items() if n == "airflow_asset_state_store_footprint_entries"
    }
    assert asset_entries == {
        asset_labels("inventory/orders"): 2,
        asset_labels(OTHER): EXPECTED_ASSETS["inventory/events"].entries
        + EXPECTED_ASSETS["inventory/offloaded"].entries,
    }


@pytest.mark.airflow
@pytest.mark.slow
def test_export_through_the_statsd_backend_sends_the_same_gauges(
    world: World, tmp_path: Path, udp_receiver: UdpReceiver
) -> None:
    settings = {
        "AIRFLOW__STORE_METRICS__INVENTORY_EXPORT": "backend",
        "AIRFLOW__STORE_METRICS__BACKEND": "statsd",
        "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
        "AIRFLOW__STORE_METRICS__PORT": str(udp_receiver.port),
        "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "0.5",
        "AIRFLOW__STORE_METRICS__PREFIX": "myco.airflow",
        **FAST,
    }
    writer = "myco.airflow.task_state_store.footprint.entries,dag_id=inventory_footprint,task_id=writer:5|g"
    with Served(world, tmp_path / "serve.log", **settings) as served:
        wait_until(lambda: served.alive() and writer in udp_receiver.lines(), 60, 0.1)
        first = udp_receiver.lines().count(writer)
        # Sent again every flush_interval, so receivers that expire idle series keep it.
        wait_until(lambda: udp_receiver.lines().count(writer) >= first + 2, 30, 0.1)
    lines = set(udp_receiver.lines())
    for (dag_id, task_id), want in EXPECTED_TASKS.items():
        tags = f"dag_id={dag_id},task_id={task_id}"
        assert f"myco.airflow.task_state_store.footprint.entries,{tags}:{want.entries}|g" in lines
        assert f"myco.airflow.task_state_store.footprint.expired_entries,{tags}:{want.expired}|g" in lines
        bytes_lines = [
            ln for ln in lines if ln.startswith(f"myco.airflow.task_state_store.footprint.bytes,{tags}:")
        ]
        assert bytes_lines == (
            []
            if want.bytes is None
            else [f"myco.airflow.task_state_store.footprint.bytes,{tags}:{want.bytes}|g"]
        )
    for asset, want in EXPECTED_ASSETS.items():
        assert f"myco.airflow.asset_state_store.footprint.entries,asset={asset}:{want.entries}|g" in lines
    assert "myco.airflow.state_store_inventory.up,store=task:1|g" in lines
    assert not any("key" in ln.split(":")[0] or "run_id" in ln for ln in lines)


@pytest.mark.airflow
@pytest.mark.slow
def test_export_through_the_otel_backend_gives_the_catalogue_series(world: World, tmp_path: Path) -> None:
    settings = {
        "AIRFLOW__STORE_METRICS__INVENTORY_EXPORT": "backend",
        "AIRFLOW__STORE_METRICS__BACKEND": "otel",
        "AIRFLOW__STORE_METRICS__OTEL_EXPORTER": "prometheus",
        "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "0.5",
        **FAST,
    }
    with Served(world, tmp_path / "serve.log", **settings) as served:

        def read() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            try:
                raw = served.samples()
            except OSError:
                return {}
            # The OpenTelemetry exporter adds its scope labels; the series are otherwise the same.
            return {
                (name, tuple(kv for kv in labels if not kv[0].startswith("otel_"))): value
                for (name, labels), value in raw.items()
            }

        wait_until(
            lambda: (
                served.alive() and read().get(("airflow_state_store_inventory_up", (("store", "asset"),)))
            ),
            60,
            0.2,
        )
        samples = read()
    check_footprint(samples, world)
    assert samples[("airflow_state_store_inventory_up", (("store", "task"),))] == 1.0


@pytest.mark.airflow
@pytest.mark.slow
def test_a_statement_timeout_on_sqlite_costs_one_line_and_exit_code_3(world: World, tmp_path: Path) -> None:
    # A copy of the database with 200,000 more rows: the aggregate takes far longer than 1 ms.
    db = tmp_path / "big.db"
    shutil.copy(Path(world.url.removeprefix("sqlite:///")), db)
    with sqlite3.connect(db) as conn:
        run_id, dag_run_id = conn.execute("select run_id, id from dag_run limit 1").fetchone()
        # Airflow 3.4 renamed map_index (its new region_id has a default).
        index = map_index_column({row[1] for row in conn.execute("pragma table_info(task_state_store)")})
        conn.execute(
            "with recursive n(i) as (select 1 union all select i + 1 from n where i < 200000) "
            "insert into task_state_store "
            f"(dag_run_id, task_id, {index}, key, dag_id, run_id, value, updated_at) "
            "select ?, 'bulk', -1, 'k' || i, 'bulk_dag', ?, '\"' || hex(randomblob(20)) || '\"', "
            "'2026-01-01 00:00:00.000000' from n",
            (dag_run_id, run_id),
        )
    copy = World(world.home, f"sqlite:///{db}")
    proc = inventory(copy, AIRFLOW__STORE_METRICS__INVENTORY_TIMEOUT="0.001")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "task state store: could not be read (timeout: OperationalError: interrupted)" in proc.stdout
    warnings = [ln for ln in proc.stderr.splitlines() if "WARNING" in ln]
    assert len(warnings) == 1 and "statement timeout (0.001 s)" in warnings[0], proc.stderr
    # With a realistic timeout the same database reads fine.
    proc = inventory(copy, "--top", "1")
    assert proc.returncode == 0, proc.stderr
    assert "task state store: 200,014 entries in 6 DAG tasks, 2 entries hold" in proc.stdout
    assert proc.stdout.splitlines()[2].split()[:3] == ["bulk_dag", "bulk", "200,000"]


@pytest.mark.slow  # two fresh processes that import Airflow: about 10 s
def test_bad_inventory_options_are_refused_naming_the_option(tmp_path: Path) -> None:
    # Refused before any database is touched: this one does not even exist.
    world = World(tmp_path, f"sqlite:///{tmp_path / 'absent.db'}")
    proc = inventory(world, AIRFLOW__STORE_METRICS__INVENTORY_TOP="0")
    assert proc.returncode == 1
    assert (
        "[store_metrics] inventory_top = '0' is not valid: accepted values are an integer >= 1" in proc.stderr
    )
    proc = inventory(world, AIRFLOW__STORE_METRICS__INVENTORY_EXPORT="pushgateway")
    assert proc.returncode == 1
    assert "accepted values are prometheus, backend" in proc.stderr


@pytest.mark.slow
def test_a_query_that_never_returns_is_said_once_and_the_endpoint_keeps_answering(tmp_path: Path) -> None:
    pytest.importorskip("psycopg2")
    hole = SilentTcpServer()
    try:
        world = World(tmp_path, f"postgresql+psycopg2://airflow@127.0.0.1:{hole.port}/airflow")
        settings = {"AIRFLOW__STORE_METRICS__INVENTORY_TIMEOUT": "0.5", **FAST}
        with Served(world, tmp_path / "serve.log", **settings) as served:
            # No statement timeout can fire while the connection is still being opened: the watchdog
            # says so once, after twice the timeout plus its grace (11 s here).
            wait_until(lambda: served.alive() and served.lines("has not returned"), 40, 0.2)
            assert served.samples() == {}  # nothing read yet, and nothing made up; the endpoint answers
            served.close()
            assert served.proc.returncode == 0
            # Its last line, written after everything else: the whole log is in. Once over its life
            # (how many watchdog ticks after the first say nothing more: the in-process test below).
            assert served.lines("stopped after 0 collections")
            assert len(served.lines("has not returned")) == 1
            assert served.lines("ERROR") == []
    finally:
        hole.close()


def test_the_watchdog_says_a_stuck_query_once_however_many_ticks_follow(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The serve loop in process, its collector stuck on a host that never answers (a real psycopg2
    connection to a black hole). Its ticks are counted through ``on_tick``: after the watchdog's
    line, twenty more ticks say nothing more. The grace is shortened so that this takes a second."""
    pytest.importorskip("psycopg2")
    import threading

    from sqlalchemy import create_engine

    from store_metrics import logs
    from store_metrics.inventory import serve
    from store_metrics.inventory.collect import LOG_KEY, Collector, Snapshot
    from store_metrics.inventory.database import Database

    monkeypatch.setattr(serve, "STUCK_GRACE", 0.2)
    caplog.set_level("WARNING", logger="store_metrics")
    logs.forget(serve.STUCK_KEY)
    hole = SilentTcpServer()
    engine = create_engine(f"postgresql+psycopg2://airflow@127.0.0.1:{hole.port}/airflow")
    ticks: list[Snapshot] = []
    loop = serve.ServeLoop(
        Collector(Database(engine, timeout=0.1), top=10), interval=0.1, tick=0.02, on_tick=ticks.append
    )
    stop = threading.Event()
    runner = threading.Thread(target=loop.run, args=(stop,))

    def stuck_lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "has not returned" in r.getMessage()]

    runner.start()
    try:
        wait_until(stuck_lines, 30)
        said_at = len(ticks)
        wait_until(lambda: len(ticks) >= said_at + 20, 30)
        assert len(stuck_lines()) == 1, stuck_lines()
        assert loop.collections == 0  # still stuck: nothing re-armed the line
    finally:
        stop.set()
        runner.join(10)
        hole.close()  # the stuck connection fails, the collector thread sees stop set and ends
        for thread in threading.enumerate():
            if thread.name == "store-metrics-inventory":
                thread.join(10)
        logs.forget(LOG_KEY)
    assert not runner.is_alive()


@pytest.mark.airflow
@pytest.mark.slow
def test_the_ui_reads_each_dag_and_the_deployment_exactly(world: World) -> None:
    """The State store tab's one statement per DAG, and the deployment page's, on SQLite."""
    check_ui_reading(world)
