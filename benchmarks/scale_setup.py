"""A large deployment's task instances in a throwaway metadata database, and their task tokens.

    python -m benchmarks.scale_setup DAGS OUT.json

Runs with the Airflow home's environment (SQLite metadata database, ``[api_auth] jwt_secret``). One
DAG of ``benchmarks.scale.TASKS`` ``@task`` tasks is made the way Airflow makes it: its file in
the DAGs folder, then Airflow's own ``db migrate``, ``dags reserialize`` and ``dags trigger`` (a real
DAG run with its task instances, as the scheduler would leave them queued). Its ``dag_run`` row and
task instance rows are then copied in SQL for the other ``DAGS - 1`` DAGs (new ``dag_id``, new task
instance ids, every other column as Airflow wrote it; ``run_type`` ``scheduled``): serializing and
triggering 5,000 DAGs one by one would take most of an hour on this machine, and the API server's
attribution reads only ``task_instance`` and ``dag_run``.

``OUT.json``: ``[[task instance id, token], ...]``, DAG by DAG, a token per task instance from
Airflow's ``JWTGenerator`` (``sub`` = the task instance id,
valid for two hours), as the scheduler's executors make them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import uuid
from pathlib import Path

from benchmarks import scale

DAG_FILE = '''"""The scale benchmark's DAG: {tasks} tasks, each calling its task state store."""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

with DAG(dag_id="{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    for i in range({tasks}):

        @task(task_id=f"task_{{i:02d}}")
        def work() -> None:
            return None

        work()
'''


def _cli(*argv: str) -> None:
    from airflow.cli import cli_parser

    args = cli_parser.get_parser().parse_args(list(argv))
    args.func(args)


def _database() -> Path:
    url = os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    if not url.startswith("sqlite:///"):
        raise SystemExit(f"scale_setup copies rows in SQLite only, not {url}")
    return Path(url[len("sqlite:///") :])


def _copy(database: Path, dags: int) -> None:
    """The first DAG's run and task instances, copied for DAGs 1 .. ``dags - 1``."""
    first = scale.dag_id(0)
    with sqlite3.connect(database) as db:
        run_cols = [row[1] for row in db.execute("pragma table_info(dag_run)")]
        ti_cols = [row[1] for row in db.execute("pragma table_info(task_instance)")]
        run = list(db.execute("select * from dag_run where dag_id = ?", (first,)).fetchone())
        tis = [list(r) for r in db.execute("select * from task_instance where dag_id = ?", (first,))]
        db.execute("update dag_run set run_type = ? where dag_id = ?", (scale.RUN_TYPE, first))
        top = db.execute("select max(id) from dag_run").fetchone()[0]
        runs, rows = [], []
        for dag in range(1, dags):
            copy = dict(zip(run_cols, run, strict=True))
            copy.update(id=top + dag, dag_id=scale.dag_id(dag), run_type=scale.RUN_TYPE)
            runs.append([copy[c] for c in run_cols])
            for ti in tis:
                row = dict(zip(ti_cols, ti, strict=True))
                row.update(id=uuid.uuid4().hex, dag_id=scale.dag_id(dag))
                rows.append([row[c] for c in ti_cols])
        db.executemany(f"insert into dag_run values ({','.join('?' * len(run_cols))})", runs)
        db.executemany(f"insert into task_instance values ({','.join('?' * len(ti_cols))})", rows)


def _tokens(database: Path) -> list[list[str]]:
    from airflow.api_fastapi.auth.tokens import JWTGenerator, get_signing_args
    from airflow.configuration import conf

    generator = JWTGenerator(
        valid_for=7200,
        audience=conf.get_mandatory_list_value("execution_api", "jwt_audience")[0],
        issuer=conf.get("api_auth", "jwt_issuer", fallback=None),
        **get_signing_args(make_secret_key_if_needed=False),
    )
    with sqlite3.connect(database) as db:
        ids = [r[0] for r in db.execute("select id from task_instance order by dag_id, task_id")]
    out = []
    for raw in ids:
        ti = str(uuid.UUID(raw))
        out.append([ti, generator.generate(extras={"sub": ti})])
    return out


def main() -> None:
    dags, out = int(sys.argv[1]), Path(sys.argv[2])
    folder = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    folder.mkdir(parents=True, exist_ok=True)
    source = DAG_FILE.format(tasks=scale.TASKS, dag_id=scale.dag_id(0))
    (folder / f"{scale.dag_id(0)}.py").write_text(source, encoding="utf-8")
    _cli("db", "migrate")
    _cli("dags", "reserialize")
    _cli("dags", "trigger", scale.dag_id(0))
    database = _database()
    _copy(database, dags)
    out.write_text(json.dumps(_tokens(database)), encoding="utf-8")


if __name__ == "__main__":
    main()
