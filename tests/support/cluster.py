"""Airflow's components started one by one, as a deployment runs them: for executors other than Local.

``Cluster`` runs ``airflow api-server``, ``scheduler`` and ``dag-processor`` (and, for the
CeleryExecutor, ``airflow celery worker`` processes and a real ``redis-server``) on free ports
with a throwaway ``AIRFLOW_HOME`` on SQLite. Every process gets its own session (process group)
and log file; ``Cluster.stop`` kills the groups, so nothing outlives the test. Every wait
polls a condition with a deadline (``testbed.waiting.wait_until``).

The DAG files come from ``testbed/dags/executors/`` (not ``testbed/dags/scenarios/``, which the
``dag.test()`` and ``airflow standalone`` tests copy whole).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from support.deploy import EXECUTOR_DAGS
from testbed.airflow import AirflowHome, map_index_column
from testbed.ports import free_port
from testbed.waiting import wait_until


def dag_module(dag_id: str) -> ModuleType:
    """The DAG file ``dags/<dag_id>.py`` as a module: its call counts are the expected totals' source."""
    spec = importlib.util.spec_from_file_location(f"{dag_id}_dag", EXECUTOR_DAGS / f"{dag_id}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Process:
    """One long-running command in its own session, its output in ``log``."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path, cwd: Path) -> None:
        self.name = name
        self.log = log
        self._out: IO[bytes] = log.open("ab")
        self.proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, chars: int = 4000) -> str:
        return f"--- {self.name} (exit {self.proc.poll()}) {self.log} ---\n{self.text()[-chars:]}"

    def stop(self, grace: float = 20) -> None:
        """SIGTERM the whole process group; after ``grace`` seconds, SIGKILL whatever is left of it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(grace)
        # The leader may be gone while processes it started (same group) are not.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self._out.close()


class Redis:
    """A real ``redis-server`` on a free port, no persistence, its files in ``root``."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        binary = shutil.which("redis-server")
        assert binary, "redis-server not found: `scripts/setup dev` installs Debian's redis-server"
        argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(root), "--daemonize", "no"]
        self.process = Process("redis", argv, dict(os.environ), root / "redis.log", root)
        wait_until(lambda: self.ping() or not self.process.alive, 20, interval=0.05)
        assert self.process.alive and self.ping(), self.process.tail()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        self.process.stop(grace=5)


class Cluster:
    """api-server, scheduler and dag-processor, started separately, plus whatever workers a test adds."""

    def __init__(self, root: Path, dag_files: list[str], settings: dict[str, str]) -> None:
        self.root = root
        self.home = AirflowHome(root / "home")
        self.home.dags.mkdir(parents=True)
        for name in dag_files:
            shutil.copy(EXECUTOR_DAGS / name, self.home.dags)
        self.logs = root / "logs"
        self.logs.mkdir()
        self.api_port = free_port()
        # The home's PYTHONPATH has tests/: hostname callables and the test executor live in `support`.
        self.env = self.home.env(
            AIRFLOW__API__PORT=str(self.api_port),
            AIRFLOW__API__HOST="127.0.0.1",
            AIRFLOW__API__WORKERS="1",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{self.api_port}/execution/",
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
            AIRFLOW__CORE__AUTH_MANAGER=(
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
            # One secret for every component: the scheduler signs the task tokens the API checks.
            AIRFLOW__API_AUTH__JWT_SECRET="store-metrics-test-secret-" + os.urandom(8).hex(),
            AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(free_port()),
            AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()),
            AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="1",
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
            **settings,
        )
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.processes: list[Process] = []

    # -- processes ------------------------------------------------------------------------------------

    def spawn(self, name: str, args: list[str], **env: str) -> Process:
        process = Process(
            name,
            [sys.executable, "-m", "airflow", *args],
            {**self.env, **env},
            self.logs / f"{name}.log",
            self.root,
        )
        self.processes.append(process)
        return process

    def start(self, dag_ids: list[str], timeout: float = 180, **api_server_env: str) -> None:
        """Migrate the database, start the three components, wait until healthy and the DAGs are parsed.

        ``api_server_env``: environment the API server gets on top of ``env`` (only it).
        """
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            env=self.env,
            check=True,
            capture_output=True,
            timeout=300,
        )
        self.spawn("api-server", ["api-server"], **api_server_env)
        self.spawn("scheduler", ["scheduler"])
        self.spawn("dag-processor", ["dag-processor"])
        self.wait(self._health_ok, timeout, "api-server, scheduler and dag-processor healthy")
        self.wait(lambda: set(dag_ids) <= self.parsed_dags(), timeout, f"DAGs {dag_ids} parsed")

    def wait(self, condition: Any, timeout: float, what: str) -> None:
        """Wait for ``condition``; fail at once with the logs if any process died meanwhile."""
        try:
            wait_until(lambda: self.dead() or condition(), timeout, interval=0.25)
        except AssertionError:
            raise AssertionError(f"not within {timeout} s: {what}\n{self.tails()}") from None
        assert not self.dead(), f"died while waiting for: {what}\n{self.tails()}"

    def dead(self) -> list[Process]:
        return [p for p in self.processes if not p.alive]

    def tails(self, chars: int = 3000) -> str:
        return "\n".join(p.tail(chars) for p in self.processes)

    def stop_processes(self, processes: list[Process]) -> None:
        for process in processes:  # all at once first, then wait for each
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.proc.pid, signal.SIGTERM)
        for process in processes:
            process.stop()
            self.processes.remove(process)

    def stop(self) -> None:
        self.stop_processes(list(self.processes))

    # -- the API -------------------------------------------------------------------------------------

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def _health_ok(self) -> bool:
        try:
            health = self.api("GET", "/api/v2/monitor/health")
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return all(health.get(c, {}).get("status") == "healthy" for c in ("scheduler", "dag_processor"))

    def trigger(self, dag_id: str, run_id: str) -> None:
        self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None})

    # -- the metadata database (read-only) ------------------------------------------------------------

    def query(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        return self.home.query(sql, *args)

    def parsed_dags(self) -> set[str]:
        return {row[0] for row in self.query("select dag_id from serialized_dag")}

    def run_states(self, dag_id: str) -> dict[str, str]:
        return dict(self.query("select run_id, state from dag_run where dag_id = ?", dag_id))  # type: ignore[arg-type]

    def wait_for_runs(self, dag_id: str, run_ids: list[str], timeout: float) -> dict[str, str]:
        """Wait until every run in ``run_ids`` has finished; return their states."""

        def finished() -> bool:
            states = self.run_states(dag_id)
            return all(states.get(r) in ("success", "failed") for r in run_ids)

        self.wait(finished, timeout, f"runs {run_ids} of {dag_id} finished")
        states = self.run_states(dag_id)
        return {r: states[r] for r in run_ids}

    def task_instances(self, dag_id: str) -> list[dict[str, Any]]:
        index = map_index_column(self.home.columns("task_instance"))
        rows = self.query(
            f"select run_id, task_id, {index}, state, hostname, pid, try_number from task_instance "
            f"where dag_id = ? order by run_id, task_id, {index}",
            dag_id,
        )
        keys = ("run_id", "task_id", "map_index", "state", "hostname", "pid", "try_number")
        return [dict(zip(keys, row, strict=True)) for row in rows]
