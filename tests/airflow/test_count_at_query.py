"""``count_at = api_server``: the metadata query that names the task behind a request, on Airflow's tables.

A throwaway Airflow home (SQLite, made by ``airflow.utils.db.upgradedb``: what ``airflow db
migrate`` runs) gets a few rows written straight into its real ``dag_bundle``, ``team``,
``dag_bundle_team``, ``dag``, ``dag_run`` and ``task_instance`` tables, with a different value in
every tag column of every row, so that a query that reads one column for another (``dag_id`` for
``task_id``, ``operator`` for ``run_type``, ``team_name`` for anything) gives different tags and
fails here. The two DAG runs share one ``run_id``, so a join on ``run_id`` alone would give a task
the other run's ``run_type``.

A fresh process with that home's configuration (``[core] multi_team`` on, and one with it off)
counts one state store request per task instance through ``StoreCalls``
and its real lookup (``lookup_task_instance``), and reports the series it
counted. The same query under the real API server app and ``airflow standalone`` is in
``test_count_at_cost.py`` and ``test_count_at_standalone.py`` (slow); this one is quick.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest

from testbed.airflow import AirflowHome

pytestmark = pytest.mark.airflow

#: A task of a DAG whose bundle belongs to a team.
TEAM_TI = uuid.UUID("0199d1a0-0000-7000-8000-00000000000a")
#: A task of a DAG whose bundle belongs to no team.
SHARED_TI = uuid.UUID("0199d1a0-0000-7000-8000-00000000000b")
#: No such task instance.
MISSING_TI = uuid.UUID("0199d1a0-0000-7000-8000-00000000000c")
#: Both DAG runs have this run_id (unique per DAG only).
RUN_ID = "shared_run_id__2026-01-01"

TEAM_TAGS = {
    "dag_id": "dag_of_team",
    "task_id": "task_of_team",
    "run_type": "backfill",
    "operator": "OperatorOfTeam",
    "team_name": "team_payments",
}
SHARED_TAGS = {
    "dag_id": "dag_shared",
    "task_id": "task_shared",
    "run_type": "asset_triggered",
    "operator": "OperatorShared",
}
UNKNOWN = {"dag_id": "<unknown>", "task_id": "<unknown>", "run_type": "<unknown>", "operator": "<unknown>"}


def rows() -> list[tuple[str, list[Any]]]:
    """One bundle with a team and one without, a DAG in each, a run of each, a task instance of each."""
    statements: list[tuple[str, list[Any]]] = [("INSERT INTO team (name) VALUES ('team_payments')", [])]
    dags = [
        ("dag_of_team", "bundle_of_team", "backfill", TEAM_TI, "task_of_team", "OperatorOfTeam"),
        ("dag_shared", "bundle_shared", "asset_triggered", SHARED_TI, "task_shared", "OperatorShared"),
    ]
    for dag_id, bundle, run_type, ti, task_id, operator in dags:
        statements += [
            ("INSERT INTO dag_bundle (name, active) VALUES (?, 1)", [bundle]),
            (
                "INSERT INTO dag (dag_id, is_paused, is_stale, bundle_name, timetable_type, "
                "partition_mapper_info, max_active_tasks, max_consecutive_failed_dag_runs, "
                "has_task_concurrency_limits) VALUES (?, 0, 0, ?, 'NullTimetable', '{}', 16, 0, 0)",
                [dag_id, bundle],
            ),
            (
                "INSERT INTO dag_run (dag_id, run_id, run_type, run_after, state) "
                "VALUES (?, ?, ?, '2026-01-01 00:00:00', 'running')",
                [dag_id, RUN_ID, run_type],
            ),
            (
                "INSERT INTO task_instance (id, task_id, dag_id, run_id, try_number, pool, pool_slots, "
                "operator, custom_operator_name, state) "
                "VALUES (?, ?, ?, ?, 1, 'default_pool', 1, ?, '@task', 'running')",
                [ti.hex, task_id, dag_id, RUN_ID, operator],
            ),
        ]
    statements.append(
        (
            "INSERT INTO dag_bundle_team (dag_bundle_name, team_name) VALUES (?, ?)",
            ["bundle_of_team", "team_payments"],
        )
    )
    return statements


#: ``migrate DB READY ROWS IDS...``: make the metadata database (what ``airflow db migrate`` runs),
#: write the rows, say so (the READY file), count. ``after READY IDS...``: wait for that, count.
_COUNT = textwrap.dedent(
    """
    import asyncio, json, sqlite3, sys, time, uuid
    from pathlib import Path
    from types import SimpleNamespace
    from store_metrics.counting.runtime import create_emitter
    from store_metrics.api_server import StoreCalls, lookup_task_instance

    if sys.argv[1] == "migrate":
        db, ready, statements, *ids = sys.argv[2:]
        from airflow.utils.db import upgradedb
        upgradedb()
        with sqlite3.connect(db) as conn:
            for sql, params in json.loads(statements):
                conn.execute(sql, params)
        Path(ready).touch()
    else:
        ready, *ids = sys.argv[2:]
        from testbed.waiting import wait_until
        wait_until(lambda: Path(ready).exists(), 120, 0.02)  # the other process made the database
    ids = [uuid.UUID(arg) for arg in ids]
    emitter = create_emitter("none", flush_interval=60)
    calls = StoreCalls(emitter)  # its lookup: the real metadata query

    async def run():
        for ti in ids:
            # What the Execution API leaves on the scope of a request it verified.
            scope = {"type": "http", "path": f"/execution/store/ti/{ti}/k", "root_path": "",
                     "headers": [], "ti_token": SimpleNamespace(id=ti)}
            calls.count(scope, ("task", "get"), 200, "read_found")
        assert await calls.drain(60)

    asyncio.run(run())
    series = [[name, dict(tags), n] for (name, tags), n in emitter.snapshot().items()]
    looked_up = {str(ti): lookup_task_instance(ti) for ti in ids}
    emitter.close(1)
    print(json.dumps({"series": series, "lookup": looked_up, "failures": calls.stats.failures}))
    """
)


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, dict[str, Any]]:
    """For ``[core] multi_team`` on and off: one ``read_found`` request per task instance, counted in
    a fresh process each, with the home's configuration; what each counted.

    Both start at once: the first makes the database, the second waits for it (so that its imports
    overlap the first one's work).
    """
    home = AirflowHome(tmp_path_factory.mktemp("count-at-query"))
    home.dags.mkdir()
    ready = str(home.path / "ready")
    ids = [str(TEAM_TI), str(SHARED_TI), str(MISSING_TI)]
    argv = {
        True: ["migrate", str(home.path / "airflow.db"), ready, json.dumps(rows()), *ids],
        False: ["after", ready, *ids],
    }
    procs = {
        multi_team: subprocess.Popen(
            [sys.executable, "-c", _COUNT, *argv[multi_team]],
            env=home.env(AIRFLOW__CORE__MULTI_TEAM=str(multi_team)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for multi_team in (True, False)
    }
    results = {}
    try:
        for multi_team, proc in procs.items():
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, out[-3000:] + err[-5000:]
            results[multi_team] = json.loads(out.splitlines()[-1])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def found(tags: dict[str, str]) -> list[Any]:
    return ["task_state_store.read_found", tags, 1]


def test_each_request_is_counted_with_its_own_tasks_values_in_every_tag_column(
    counted: dict[bool, dict[str, Any]],
) -> None:
    result = counted[True]
    assert result["failures"] == 0
    # Every column read for what it is: a query that swapped any two would give other tags.
    assert sorted(result["series"], key=str) == sorted(
        [found(TEAM_TAGS), found(SHARED_TAGS), found(UNKNOWN)], key=str
    )
    assert result["lookup"] == {str(TEAM_TI): TEAM_TAGS, str(SHARED_TI): SHARED_TAGS, str(MISSING_TI): None}
    # The tags' order is the task side's (dag_id, task_id, run_type, operator, team_name).
    assert list(result["lookup"][str(TEAM_TI)]) == list(TEAM_TAGS)


def test_without_multi_team_no_request_carries_a_team_name(counted: dict[bool, dict[str, Any]]) -> None:
    result = counted[False]
    assert result["failures"] == 0
    without_team = {k: v for k, v in TEAM_TAGS.items() if k != "team_name"}
    assert sorted(result["series"], key=str) == sorted(
        [found(without_team), found(SHARED_TAGS), found(UNKNOWN)], key=str
    )
    assert result["lookup"][str(TEAM_TI)] == without_team
