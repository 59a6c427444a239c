"""A real, throwaway Airflow installation: a temporary ``AIRFLOW_HOME``, its database, DAG files.

Each command runs in a fresh process with its own environment (``AirflowHome.env``), so
every test and benchmark picks its own ``[store_metrics]`` configuration the way a deployment
does: environment variables. The metadata database is SQLite in the home unless a URL is given
(a throwaway PostgreSQL or MariaDB: ``testbed.databases``). ``AirflowHome.run`` runs DAG
files with ``dag.test()`` (``testbed.dag_runner``); ``make_home`` makes one with the
scenario DAGs: the upstream proposal's examples (shipped in the package) and ``testbed/dags/scenarios/``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store_metrics import example_dags
from testbed.repository import python_path

#: Every DAG file the tests deploy into Airflow, one folder a purpose; the benchmarks run the
#: scenarios (the product's own DAGs, the proposal's examples, are the package's:
#: ``store_metrics.example_dags``; a DAG a benchmark sizes per run is written from its template).
DAGS = Path(__file__).resolve().parent / "dags"
#: The DAGs that tests and benchmarks run with ``dag.test()`` and under ``airflow standalone``,
#: beside the proposal's examples: errors, mapped tasks, two assets, async stores, concurrency.
SCENARIO_DAGS = DAGS / "scenarios"


def clean_environ() -> dict[str, str]:
    """This process's environment without any Airflow, OpenTelemetry or Datadog settings."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW__", "AIRFLOW_HOME", "OTEL_", "DD_", "DATADOG_"))
    }


@dataclass
class AirflowHome:
    path: Path
    #: The metadata database's SQLAlchemy URL; empty: SQLite, ``airflow.db`` in the home.
    db_url: str = ""

    @property
    def dags(self) -> Path:
        return self.path / "dags"

    @property
    def database(self) -> str:
        return self.db_url or f"sqlite:///{self.path / 'airflow.db'}"

    def env(self, **settings: str) -> dict[str, str]:
        """A clean environment for this home, the repository on ``PYTHONPATH``, plus ``settings``."""
        env = clean_environ()
        env.update(
            {
                "AIRFLOW_HOME": str(self.path),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.database,
                "AIRFLOW__STORE_METRICS__FLUSH_TIMEOUT": "5",
                # A task's Execution API request that outlasts the client's timeout (5 s) is sent
                # again (execution_api_retries): the API server then serves, and counts, two requests
                # for one call. On a loaded 2-core machine an API server on SQLite can wait 5 s for the
                # database lock (its event loop stalled 5.0 s with a state store read in flight: two
                # more read requests than calls, in a cold CI dry run).
                "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
                "PYTHONPATH": python_path(),
            }
        )
        env.update(settings)
        return env

    def migrate(self, **settings: str) -> None:
        """``airflow db migrate`` on this home's database."""
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            env=self.env(**settings),
            check=True,
            capture_output=True,
            timeout=300,
        )

    def query(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        """Rows of a read-only query of this home's SQLite metadata database (none before it exists)."""
        db = self.path / "airflow.db"
        if not db.exists():
            return []
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                return conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError:  # not migrated yet, or busy
            return []

    def columns(self, table: str) -> set[str]:
        """The column names of ``table`` in this home's metadata database."""
        return {str(row[1]) for row in self.query(f"pragma table_info({table})")}

    def dag_file(self, module: str) -> Path:
        path = self.dags / f"{module}.py"
        assert path.is_file(), path
        return path

    def run(self, tmp: Path, modules: list[str], env: dict[str, str], timeout: float = 300) -> dict[str, Any]:
        """Run the DAG modules (in order) with dag.test() in a fresh process; return what it reported."""
        result = tmp / f"result-{len(list(tmp.glob('result-*.json')))}.json"
        proc = subprocess.run(
            [sys.executable, "-m", "testbed.dag_runner", str(result), *map(str, map(self.dag_file, modules))],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        log = result.with_suffix(".log")
        log_text = log.read_text() if log.exists() else ""
        assert proc.returncode == 0, f"runner failed:\n{proc.stdout}\n{proc.stderr}\n{log_text[-5000:]}"
        data: dict[str, Any] = json.loads(result.read_text())
        data["log"] = log_text + proc.stdout + proc.stderr
        return data


def make_home(root: Path) -> AirflowHome:
    """A migrated home at ``root`` (SQLite) with every scenario DAG in its DAGs folder."""
    home = AirflowHome(root)
    home.dags.mkdir(parents=True)
    examples = Path(example_dags.__file__).parent
    for module in example_dags.SCENARIOS:
        shutil.copy(examples / f"{module}.py", home.dags)
    for dag_file in SCENARIO_DAGS.glob("*.py"):
        shutil.copy(dag_file, home.dags)
    home.migrate()
    return home


def map_index_column(columns: set[str]) -> str:
    """The column of a task instance's (or its task store's) map index: Airflow 3.4 renamed it."""
    return "region_index" if "region_index" in columns else "map_index"
