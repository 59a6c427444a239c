"""``store-metrics check`` on a host where Airflow already runs, as docs/deploy/vm.md has you run it.

* Beside a real ``airflow triggerer`` whose trigger runner serves store-metrics' scrape endpoint on
  ``prometheus_port`` (``count_at = api_server``, the OpenTelemetry backend's Prometheus exporter):
  check cannot open that port again, says the port is served by a store-metrics endpoint of this
  host, names the triggerer's process, and exits 0.
* When something else holds the port (a real Prometheus: it answers ``/metrics``, but is no
  store-metrics endpoint; an HTTP server that does not answer ``/metrics``): exit 3, naming the
  holder's process and command line.
* Beside a real ``airflow api-server --apps execution`` (the Execution API without the core app,
  where Airflow adds no plugin middleware): check warns, naming that process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from store_metrics.commands.check import EXIT_BACKEND, EXIT_OK
from support.cli import run_cli
from testbed.airflow import AirflowHome
from testbed.ports import free_port
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def _counting_at_the_api_server(port: int) -> dict[str, str]:
    return {
        "AIRFLOW__STORE_METRICS__COUNT_AT": "api_server",
        "AIRFLOW__STORE_METRICS__BACKEND": "otel",
        "AIRFLOW__STORE_METRICS__OTEL_EXPORTER": "prometheus",
        "AIRFLOW__STORE_METRICS__PROMETHEUS_PORT": str(port),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
    }


class Started:
    """A long-running command in its own session (its children die with it), output in ``log``."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(15)
                break
        self._out.close()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli("check", **env)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    home = AirflowHome(tmp_path_factory.mktemp("busy-host") / "home")
    home.dags.mkdir(parents=True)
    home.migrate()
    return home


@pytest.fixture
def triggerer(home: AirflowHome, tmp_path: Path) -> Iterator[tuple[Started, dict[str, str], int]]:
    port = free_port()
    env = home.env(**_counting_at_the_api_server(port))
    started = Started([sys.executable, "-m", "airflow", "triggerer"], env, tmp_path / "triggerer.log")
    try:
        # The trigger runner configures store-metrics as it starts, before any trigger: its endpoint.
        wait_until(
            lambda: not started.alive() or _answers(f"http://127.0.0.1:{port}/metrics"), 180, interval=0.5
        )
        assert started.alive(), started.log.read_text()[-4000:]
        yield started, env, port
    finally:
        started.stop()


def test_check_beside_the_triggerer_says_the_port_is_served_and_exits_0(
    triggerer: tuple[Started, dict[str, str], int],
) -> None:
    _, env, port = triggerer
    done = check(env)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("scrape: port")]
    assert line.startswith(
        f"scrape: port {port} (prometheus_port, 0.0.0.0) is already served by a store-metrics"
    )
    assert "triggerer" in line and "Address already in use" not in done.stdout


def test_check_names_another_holder_of_the_port_and_exits_3(home: AirflowHome, tmp_path: Path) -> None:
    port = free_port()
    env = home.env(**_counting_at_the_api_server(port))
    # A real Prometheus answers /metrics (its own series), but is no store-metrics endpoint.
    prometheus = shutil.which("prometheus")
    assert prometheus, "Debian's prometheus (scripts/setup dev)"
    (tmp_path / "prometheus.yml").write_text("global: {}\n")
    argv = [
        prometheus,
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
    ]
    holder = Started([*argv, f"--web.listen-address=127.0.0.1:{port}"], env, tmp_path / "prometheus.log")
    try:
        wait_until(
            lambda: not holder.alive() or _answers(f"http://127.0.0.1:{port}/-/ready"), 60, interval=0.2
        )
        done = check(env)
    finally:
        holder.stop()
    assert done.returncode == EXIT_BACKEND, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("error:")]
    assert f"prometheus_port {port}" in line and f"pid {holder.proc.pid} " in line and "prometheus" in line
    assert "answers /metrics, but is no Airflow or store-metrics process" in line

    # Something that does not answer /metrics at all.
    server = Started(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], env, tmp_path / "http.log"
    )
    try:
        wait_until(lambda: not server.alive() or _answers(f"http://127.0.0.1:{port}/"), 60, interval=0.2)
        done = check(env)
    finally:
        server.stop()
    assert done.returncode == EXIT_BACKEND, done.stdout + done.stderr
    assert (
        f"pid {server.proc.pid} " in done.stdout and "does not answer /metrics as Prometheus" in done.stdout
    )


def test_check_warns_beside_an_api_server_without_the_core_app(home: AirflowHome, tmp_path: Path) -> None:
    api_port = free_port()
    env = home.env(
        **_counting_at_the_api_server(free_port()),
        AIRFLOW__API__PORT=str(api_port),
        AIRFLOW__API__HOST="127.0.0.1",
        AIRFLOW__API__WORKERS="1",
    )
    argv = [sys.executable, "-m", "airflow", "api-server", "--apps", "execution"]
    server = Started(argv, env, tmp_path / "api-server.log")
    try:
        wait_until(
            lambda: not server.alive() or _answers(f"http://127.0.0.1:{api_port}/execution/health"),
            180,
            interval=0.5,
        )
        assert server.alive(), server.log.read_text()[-4000:]
        done = check(env)
    finally:
        server.stop()
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    warnings = [line for line in done.stdout.splitlines() if line.startswith("warning:")]
    assert any(f"pid {server.proc.pid} " in w and "--apps execution" in w for w in warnings), done.stdout
    assert any("serves the Execution API without the core app" in w for w in warnings)
