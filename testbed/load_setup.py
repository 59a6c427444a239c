"""Real task instances and real Execution API tokens for the load generator (run in a subprocess).

    python -m testbed.load_setup prepare N OUT.json   # db migrate, the DAG, reserialize, trigger, tokens
    python -m testbed.load_setup tokens DAG_ID OUT.json   # tokens for the latest run of DAG_ID

Runs with the deployment's environment (``AIRFLOW_HOME``, ``[api_auth] jwt_secret``, DAGs folder),
one Airflow import for every step:

* ``prepare`` writes ``DAG_ID`` (``N`` no-op tasks ``client_<i>``, each with the asset
  ``store_metrics_load_<i>`` as outlet) into the DAGs folder, then runs Airflow's own CLI commands
  in this process: ``db migrate``, ``dags reserialize`` (the DAG, its tasks and its assets in the
  database, assets active) and ``dags trigger`` (a real DAG run with its task instances, as the
  core API's trigger makes them; nothing needs to run them).
* Both write, for each task instance of the run, its id, its asset and an Execution API token
  for it: Airflow's ``JWTGenerator`` with the configured
  signing key, audience and issuer, exactly as the scheduler's executors and the API server make
  them (``sub`` = the task instance id; no ``scope`` claim, so ``execution``, the scope a task's
  supervisor holds while it runs). Valid for ``--valid-for`` seconds (default one hour), so the
  API server never has to reissue one during a run.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

DAG_ID = "store_metrics_load"
ASSET_PREFIX = "store_metrics_load_"

DAG_FILE = '''"""The load benchmark's DAG: one no-op task per load client, each with an asset of its own."""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Asset, task

CLIENTS = %(clients)d

with DAG(dag_id="%(dag_id)s", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    for i in range(CLIENTS):

        @task(task_id=f"client_{i}", outlets=[Asset(f"%(prefix)s{i}")])
        def client() -> None:
            return None

        client()
'''


def dag_source(clients: int) -> str:
    return DAG_FILE % {"clients": clients, "dag_id": DAG_ID, "prefix": ASSET_PREFIX}


def _cli(*argv: str) -> None:
    from airflow.cli import cli_parser

    args = cli_parser.get_parser().parse_args(list(argv))
    args.func(args)


def tokens(dag_id: str, valid_for: float) -> list[dict[str, str]]:
    """One entry per task instance of the latest run of ``dag_id``: id, task id, asset, token."""
    from airflow.api_fastapi.auth.tokens import JWTGenerator, get_signing_args
    from airflow.configuration import conf
    from airflow.models import DagRun, TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    generator = JWTGenerator(
        valid_for=valid_for,
        audience=conf.get_mandatory_list_value("execution_api", "jwt_audience")[0],
        issuer=conf.get("api_auth", "jwt_issuer", fallback=None),
        **get_signing_args(make_secret_key_if_needed=False),
    )
    with create_session() as session:
        run_id = session.scalar(
            select(DagRun.run_id).where(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).limit(1)
        )
        rows = session.execute(
            select(TaskInstance.id, TaskInstance.task_id).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id
            )
        ).all()
    out = []
    for ti_id, task_id in sorted(rows, key=lambda r: int(r[1].rsplit("_", 1)[-1])):
        out.append(
            {
                "ti": str(ti_id),
                "task_id": str(task_id),
                "asset": f"{ASSET_PREFIX}{task_id.rsplit('_', 1)[-1]}",
                "token": generator.generate(extras={"sub": str(ti_id)}),
            }
        )
    return out


def prepare(clients: int, valid_for: float) -> dict[str, Any]:
    dags = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    dags.mkdir(parents=True, exist_ok=True)
    (dags / f"{DAG_ID}.py").write_text(dag_source(clients), encoding="utf-8")
    _cli("db", "migrate")
    _cli("dags", "reserialize")
    _cli("dags", "trigger", DAG_ID)
    return {"dag_id": DAG_ID, "clients": tokens(DAG_ID, valid_for)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--valid-for", type=float, default=3600.0)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("clients", type=int)
    p.add_argument("out", type=Path)
    t = sub.add_parser("tokens")
    t.add_argument("dag_id")
    t.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "prepare":
        result = prepare(args.clients, args.valid_for)
    else:
        result = {"dag_id": args.dag_id, "clients": tokens(args.dag_id, args.valid_for)}
    args.out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
