"""A real, throwaway Airflow 3.3 installation for tests: temp AIRFLOW_HOME, SQLite, DAG files.

Each run happens in a fresh subprocess with its own environment, so every test picks its own
``[store_metrics]`` configuration the way a deployment would (environment variables).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import store_metrics.example_dags as example_dags

TESTS = Path(__file__).parent
RUNNER = TESTS / "airflow_runner.py"


def clean_environ() -> dict[str, str]:
    """This process's environment without any Airflow or store-metrics settings."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW__", "AIRFLOW_HOME", "OTEL_", "DD_", "DATADOG_"))
    }


@dataclass
class AirflowHome:
    path: Path

    @property
    def dags(self) -> Path:
        return self.path / "dags"

    def env(self, **settings: str) -> dict[str, str]:
        env = clean_environ()
        env.update(
            {
                "AIRFLOW_HOME": str(self.path),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.path / 'airflow.db'}",
                "AIRFLOW__STORE_METRICS__FLUSH_TIMEOUT": "5",
            }
        )
        env.update(settings)
        return env

    def dag_file(self, module: str) -> Path:
        path = self.dags / f"{module}.py"
        assert path.is_file(), path
        return path

    def run(self, tmp: Path, modules: list[str], env: dict[str, str], timeout: float = 300) -> dict[str, Any]:
        """Run the DAG modules (in order) with dag.test() in a fresh process; return what it reported."""
        result = tmp / f"result-{len(list(tmp.glob('result-*.json')))}.json"
        proc = subprocess.run(
            [sys.executable, str(RUNNER), str(result), *(str(self.dag_file(m)) for m in modules)],
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
    home = AirflowHome(root)
    home.dags.mkdir(parents=True)
    examples = Path(example_dags.__file__).parent
    for module in example_dags.SCENARIOS:
        shutil.copy(examples / f"{module}.py", home.dags)
    for dag_file in (TESTS / "dags").glob("*.py"):
        shutil.copy(dag_file, home.dags)
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=home.env(),
        check=True,
        capture_output=True,
        timeout=300,
    )
    return home
