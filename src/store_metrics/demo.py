"""``store-metrics demo``: the upstream proposal's scenarios on a throwaway Airflow.

It needs nothing configured: a temporary ``AIRFLOW_HOME`` with SQLite, the example DAGs copied
into its DAGs folder, ``airflow db migrate``, then each scenario run with ``dag.test()`` through
the plugin (OpenTelemetry backend, Prometheus exporter). It prints the series exactly as a
Prometheus scrape of that endpoint shows them, plus Airflow's own ``resumable_job.*`` counters
(received on a local StatsD socket), and with ``--serve`` keeps the endpoint up.

Environment variables are set before Airflow is imported in this process: Airflow reads its
configuration at import.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from .example_dags import SCENARIOS

#: The proposal's runs: scenario 2 was run twice to show absent, then found.
PROPOSAL_RUNS: tuple[str, ...] = (
    "state_store_metrics_01",
    "state_store_metrics_02",
    "state_store_metrics_02",
    "state_store_metrics_03",
    "example_resumable_job",
)
_SERIES = re.compile(r"^[a-z_]+_(task|asset)_state_store_[a-z_]+_total\{")
_NOISE_LABELS = re.compile(r'(otel_scope_[a-z_]+|instance|job)="[^"]*",?')


@dataclass
class DemoResult:
    """What the demo ran and saw; the CLI prints it and the tests check it."""

    home: Path
    endpoint: str
    runs: list[tuple[str, str, float]] = field(default_factory=list)
    series: list[str] = field(default_factory=list)
    airflow_lines: list[str] = field(default_factory=list)


class _StatsdSink:
    """A UDP socket on 127.0.0.1 collecting the StatsD lines Airflow itself sends."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = int(self.sock.getsockname()[1])
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="demo-statsd-sink")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except (TimeoutError, OSError):
                continue
            self.lines.extend(line for line in data.decode("utf-8", "replace").split("\n") if line)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(1)
        self.sock.close()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _prepare_environment(home: Path, host: str, port: int, statsd_port: int | None) -> None:
    dags = home / "dags"
    dags.mkdir(parents=True)
    examples = Path(__file__).with_name("example_dags")
    for module in SCENARIOS:
        shutil.copy(examples / f"{module}.py", dags / f"{module}.py")
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__STORE_METRICS__ENABLED": "true",
        "AIRFLOW__STORE_METRICS__BACKEND": "otel",
        "AIRFLOW__STORE_METRICS__OTEL_EXPORTER": "prometheus",
        "AIRFLOW__STORE_METRICS__PROMETHEUS_HOST": host,
        "AIRFLOW__STORE_METRICS__PROMETHEUS_PORT": str(port),
        "AIRFLOW__STORE_METRICS__PREFIX": "airflow",
    }
    if statsd_port is not None:
        env.update(
            {
                "AIRFLOW__METRICS__STATSD_ON": "True",
                "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
                "AIRFLOW__METRICS__STATSD_PORT": str(statsd_port),
                "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
            }
        )
    os.environ.update(env)


@contextlib.contextmanager
def _output_to(log: TextIO) -> Iterator[None]:
    """Send this process's stdout/stderr (file descriptors included) to ``log`` for the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        log.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _load_dag(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"store_metrics_demo_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def scrape(endpoint: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(endpoint, timeout=timeout) as response:
        return str(response.read().decode("utf-8"))


def state_store_series(exposition: str) -> list[str]:
    """The state store series of a scrape, without the scope/instance/job labels (as the proposal shows)."""
    lines = []
    for line in exposition.splitlines():
        if _SERIES.match(line):
            lines.append(_NOISE_LABELS.sub("", line).replace(",}", "}"))
    return sorted(lines)


def run_demo(
    *,
    runs: int = 1,
    host: str = "127.0.0.1",
    port: int | None = None,
    home: Path | None = None,
    out: TextIO = sys.stdout,
) -> DemoResult:
    """Run the proposal's scenarios ``runs`` times and return what the endpoint shows."""

    def say(message: str) -> None:
        print(message, file=out, flush=True)

    started = time.monotonic()
    home = home or Path(tempfile.mkdtemp(prefix="store-metrics-demo-"))
    port = port or free_port(host if host != "0.0.0.0" else "127.0.0.1")
    shown_host = "127.0.0.1" if host == "0.0.0.0" else host
    endpoint = f"http://{shown_host}:{port}/metrics"
    sink = _StatsdSink() if importlib.util.find_spec("statsd") else None
    _prepare_environment(home, host, port, sink.port if sink else None)
    result = DemoResult(home=home, endpoint=endpoint)
    log_path = home / "demo.log"
    say(f"store-metrics demo: a throwaway Airflow in {home} (SQLite; Airflow's output goes to {log_path})")

    say("[1/3] airflow db migrate ...")
    t0 = time.monotonic()
    with log_path.open("a") as log:
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )
    say(f"      done in {time.monotonic() - t0:.1f} s")

    sequence = [name for _ in range(runs) for name in PROPOSAL_RUNS]
    say(
        f"[2/3] running the upstream proposal's scenarios with dag.test() through the plugin "
        f"({len(sequence)} DAG runs; the OpenTelemetry backend serves {endpoint})"
    )
    dags_dir = home / "dags"
    with log_path.open("a") as log:
        with _output_to(log):
            dags = {name: _load_dag(dags_dir / f"{name}.py") for name in SCENARIOS}
        for name in sequence:
            t0 = time.monotonic()
            with _output_to(log):
                dag_run = dags[name].test()
            state = str(getattr(getattr(dag_run, "state", None), "value", getattr(dag_run, "state", "?")))
            elapsed = time.monotonic() - t0
            result.runs.append((name, state, elapsed))
            say(f"      {name:<24} {state:<8} {elapsed:5.1f} s")

    result.series = state_store_series(scrape(endpoint))
    say(f"[3/3] the state store series a Prometheus scrape of {endpoint} returns:")
    for line in result.series:
        say(f"      {line}")
    if sink is not None:
        # Airflow's StatsD client sends at once; the sink thread may still be reading.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not any(".resumable_job." in x for x in sink.lines):
            time.sleep(0.02)
        result.airflow_lines = sorted(x for x in sink.lines if ".resumable_job." in x)
        sink.close()
        say("      Airflow's own counters alongside (its [metrics] StatsD output, InfluxDB tags):")
        for line in result.airflow_lines:
            say(f"      {line}")
    say(f"done in {time.monotonic() - started:.1f} s")
    return result


def serve_forever(endpoint: str, out: TextIO = sys.stdout) -> None:
    """Keep the process (and so the scrape endpoint) alive until SIGINT or SIGTERM."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print(f"serving {endpoint} for Prometheus; Ctrl-C to stop", file=out, flush=True)
    stop.wait()
