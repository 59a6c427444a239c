"""What only the tests run on an Airflow home: ``airflow standalone``, and Airflow's own StatsD.

The home itself (``testbed.airflow.AirflowHome``, and ``testbed.airflow.make_home`` with
the scenario DAGs) is the test bed's, shared with the benchmarks. ``Standalone`` runs a whole
``airflow standalone`` on one; ``airflow_statsd_env`` sends Airflow's own ``[metrics]`` StatsD
to a receiver.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from testbed.airflow import SCENARIO_DAGS, AirflowHome
from testbed.ports import free_port
from testbed.waiting import wait_until


class Standalone:
    """``airflow standalone`` (api-server, scheduler with LocalExecutor, dag-processor, triggerer).

    Every task runs in its own short-lived process forked by the LocalExecutor, exactly as in
    a deployment; the servers listen on free ports and stop with the test.
    """

    def __init__(self, root: Path, api_port: int, settings: dict[str, str]) -> None:
        self.home = AirflowHome(root)
        self.home.dags.mkdir(parents=True)
        for dag_file in SCENARIO_DAGS.glob("*.py"):
            shutil.copy(dag_file, self.home.dags)
        self.api_port = api_port
        self.env = self.home.env(
            AIRFLOW__API__PORT=str(api_port),
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://localhost:{api_port}/execution/",
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
            AIRFLOW__CORE__PARALLELISM="8",
            # The log servers' fixed default ports (8793, 8794) are free ports here: a component of
            # a deployment still stopping, or another test's, never holds this one's.
            AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(free_port()),
            AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()),
            **settings,
        )
        # standalone starts its components as `airflow ...` subprocesses found on PATH.
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.log_path = root / "standalone.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, dag_ids: list[str], timeout: float = 240) -> None:
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "airflow", "standalone"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_until(lambda: self._healthy() or self._died(), timeout, interval=0.5)
        assert not self._died(), self.log_tail()
        wait_until(lambda: set(dag_ids) <= self._parsed_dags() or self._died(), timeout, interval=0.5)
        assert not self._died(), self.log_tail()

    def _died(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def _healthy(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.api_port}/api/v2/monitor/health", timeout=2
            ) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def _parsed_dags(self) -> set[str]:
        return {row[0] for row in self.home.query("select dag_id from dag")}

    def trigger(self, dag_id: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "airflow", "dags", "trigger", dag_id],
            env=self.env,
            check=True,
            capture_output=True,
            timeout=120,
        )

    def wait_for_runs(self, dag_id: str, count: int, timeout: float = 240) -> list[str]:
        """Wait until ``count`` runs of ``dag_id`` have finished; return their states."""

        def finished() -> list[str]:
            rows = self.home.query("select state from dag_run where dag_id = ?", dag_id)
            return [r[0] for r in rows if r[0] in ("success", "failed")]

        wait_until(lambda: len(finished()) >= count or self._died(), timeout, interval=0.5)
        assert not self._died(), self.log_tail()
        return finished()

    def log_tail(self, chars: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def stop(self) -> None:
        import signal

        if self.proc is None:
            return
        group = self.proc.pid
        if self.proc.poll() is None:
            os.killpg(group, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(group, signal.SIGKILL)
                self.proc.wait(10)
        # standalone's components (the API server among them) can outlive it for a moment. A
        # deployment restarted on the same port must not find the old API server still answering
        # (healthy, then refusing once it is gone), so wait until the whole group has exited.
        try:
            wait_until(lambda: not _group_alive(group), 30, interval=0.1)
        except AssertionError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
            wait_until(lambda: not _group_alive(group) or not self._healthy(), 10, interval=0.1)


def _group_alive(group: int) -> bool:
    """Whether a process of ``group`` still runs (zombies waiting for their parent count as gone)."""
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # After the command: state, ppid, pgrp.
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


def airflow_statsd_env(airflow_home: Path, port: int) -> dict[str, str]:
    """This environment plus Airflow's own [metrics] StatsD (InfluxDB tags) to 127.0.0.1:``port``."""
    return {
        **os.environ,
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(port),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
    }


def run_with_airflow_statsd(script: str, airflow_home: Path, port: int) -> str:
    """Run ``script`` (``python -c``) in a fresh process with ``airflow_statsd_env``; it must
    exit 0. Returns what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=airflow_statsd_env(airflow_home, port),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
