"""Which of Airflow's tables store-metrics reads, and how its reads are bounded (SECURITY.md's claims).

The tables come from the statements themselves (every table each one names, joins included), as
the State store views, ``store-metrics inventory`` and ``count_at = api_server`` build them against
Airflow's own models. The transaction: a real PostgreSQL refuses a write inside the inventory's
transaction (read-only); SQLite gets a statement deadline only (a write there goes through, which is
why SECURITY.md asks for a role that may only ``SELECT``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import DBAPIError

from store_metrics.catalogue import Store
from store_metrics.inventory.database import Database
from store_metrics.inventory.queries import (
    asset_statement,
    asset_users_statement,
    dag_statement,
    dag_totals_statement,
    statement,
)
from support.sql_tables import tables
from testbed.databases import ThrowawayPostgres

#: What the State store tab and page read (SECURITY.md names them).
UI_TABLES = {
    "task_state_store",
    "asset_state_store",
    "asset",
    "dag_schedule_asset_reference",
    "task_outlet_asset_reference",
    "task_inlet_asset_reference",
}


def test_the_state_store_views_read_six_tables_and_the_inventory_three() -> None:
    ui = [dag_statement(), dag_totals_statement(), asset_statement(), asset_users_statement()]
    assert set().union(*map(tables, ui)) == UI_TABLES
    inventory = [statement(Store.TASK), statement(Store.ASSET)]
    assert set().union(*map(tables, inventory)) == {"task_state_store", "asset_state_store", "asset"}


def test_count_at_api_server_reads_the_attempt_and_its_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancehistory import TaskInstanceHistory

    from store_metrics.api_server import attribution

    assert tables(attribution._attempt_statement(TaskInstance, TaskInstance.id)) == {
        "task_instance",
        "dag_run",
    }
    history = attribution._attempt_statement(TaskInstanceHistory, TaskInstanceHistory.task_instance_id)
    assert tables(history) == {"task_instance_history", "dag_run"}
    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    multi_team = tables(attribution._attempt_statement(TaskInstance, TaskInstance.id))
    assert multi_team == {"task_instance", "dag_run", "dag", "dag_bundle", "dag_bundle_team", "team"}


def test_on_postgresql_the_transaction_is_read_only(postgres: ThrowawayPostgres) -> None:
    database = Database(create_engine(f"postgresql+psycopg2://airflow@127.0.0.1:{postgres.port}/airflow"), 5)
    refused = pytest.raises(DBAPIError, match="cannot execute CREATE TABLE in a read-only transaction")
    with database.engine.connect() as conn, database._timeout(conn, 1000), refused:
        conn.exec_driver_sql("CREATE TABLE planted (i int)")


def test_on_sqlite_only_a_deadline_bounds_it(tmp_path: Path) -> None:
    database = Database(create_engine(f"sqlite:///{tmp_path / 'airflow.db'}"), 5)
    with database.engine.connect() as conn, database._timeout(conn, 1000):
        conn.exec_driver_sql("CREATE TABLE planted (i int)")  # not refused: give the role SELECT only
        assert conn.exec_driver_sql("SELECT count(*) FROM planted").scalar() == 0
