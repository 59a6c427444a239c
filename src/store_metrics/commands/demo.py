"""``store-metrics demo``: the upstream proposal's scenarios on a throwaway Airflow.

It needs nothing configured: a temporary ``AIRFLOW_HOME`` with SQLite, the example DAGs copied
into its DAGs folder, ``airflow db migrate``, then each scenario run with ``dag.test()`` through
the plugin (OpenTelemetry backend, Prometheus exporter). It prints the series exactly as a
Prometheus scrape of that endpoint shows them, plus Airflow's own ``resumable_job.*`` counters
(received on a local StatsD socket), and with ``--serve`` keeps the endpoint up.

The same endpoint also serves every other row of the dashboard (``store_metrics.commands.demo_sources``):
the API server's route metrics and stall monitor (the plugin's middleware on the in-process
Execution API the runs talk to), an asset watcher's calls (its trigger run the triggerer's way,
three times), retried tasks (one resumes, one starts over) and a failing call (``example_retries``),
and the state store footprint (the inventory over the demo's database, read again every
``FOOTPRINT_EVERY`` seconds while serving).

While serving, it runs everything again every ``AGAIN_EVERY`` seconds: a Prometheus started beside
it (after it, as a newcomer does) never counts what a counter held at its first scrape (history to
it, by the recording rules' design), so the dashboard fills from the calls made after that.

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

from .. import example_dags
from ..example_dags import RETRIES, SCENARIOS, WATCHER
from .demo_sources import Footprint, attach_api_server_metrics, run_asset_watcher

#: The proposal's runs: scenario 2 was run twice to show absent, then found.
PROPOSAL_RUNS: tuple[str, ...] = (
    "state_store_metrics_01",
    "state_store_metrics_02",
    "state_store_metrics_02",
    "state_store_metrics_03",
    "example_resumable_job",
)
#: Runs of the asset watcher's trigger (its watermark: read absent, then found).
WATCHER_RUNS = 3
#: Seconds between two readings of the footprint while ``--serve`` keeps the endpoint up.
FOOTPRINT_EVERY = 15.0
#: Seconds between two rounds of every run while ``--serve`` keeps the endpoint up (``--again``):
#: shorter than the shipped rules' interval (1 minute), so each of their evaluations sees calls.
AGAIN_EVERY = 20.0
_SERIES = re.compile(r"^[a-z_]+_(task|asset)_state_store_[a-z_]+_total\{")
#: The other rows' families, for the summary line (watcher calls are told apart by their labels).
_OTHER_ROWS = {
    "the API server": re.compile(r"^[a-z_]+_api_server_"),
    "the footprint": re.compile(r"^[a-z_]+_(state_store_inventory_|(task|asset)_state_store_footprint_)"),
}
_NOISE_LABELS = re.compile(r'(otel_scope_[a-z_]+|instance|job)="[^"]*",?')


@dataclass
class DemoResult:
    """What the demo ran and saw; the CLI prints it and the tests check it."""

    home: Path
    endpoint: str
    runs: list[tuple[str, str, float]] = field(default_factory=list)
    series: list[str] = field(default_factory=list)
    airflow_lines: list[str] = field(default_factory=list)
    #: Series of the other rows, by row: asset watchers, the footprint, the API server.
    other_rows: dict[str, int] = field(default_factory=dict)
    #: Re-reads the footprint (``--serve`` calls it every ``FOOTPRINT_EVERY`` seconds).
    refresh_footprint: Any = None
    #: Makes every run again, quietly (``--serve`` calls it every ``--again`` seconds).
    again: Any = None


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
    examples = Path(example_dags.__file__).parent
    for module in (*SCENARIOS, WATCHER, RETRIES):
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
        # The SDK's exporter: the demo puts the API server's and the footprint's emitters on the
        # tasks' provider too (one endpoint for the whole dashboard); the native exposition serves
        # one emitter's series.
        "AIRFLOW__STORE_METRICS__SERVER_EXPOSITION": "otel",
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


def _other_dag(line: str) -> bool:
    """A series of the rows beyond the proposal's: an asset watcher's, or the retried tasks'."""
    return 'run_type="asset_watcher"' in line or f'dag_id="{RETRIES}"' in line


def state_store_series(exposition: str) -> list[str]:
    """The proposal's state store series of a scrape, without the scope/instance/job labels (as the
    proposal shows them); asset watchers' and the retried tasks' calls are left to ``other_rows``."""
    lines = []
    for line in exposition.splitlines():
        if _SERIES.match(line) and not _other_dag(line):
            lines.append(_NOISE_LABELS.sub("", line).replace(",}", "}"))
    return sorted(lines)


def other_rows(exposition: str) -> dict[str, int]:
    """How many series a scrape has for each of the dashboard's other rows."""
    samples = [line for line in exposition.splitlines() if line and not line.startswith("#")]
    rows = {"asset watchers": sum(1 for x in samples if _SERIES.match(x) and "asset_watcher" in x)}
    rows["retries and errors"] = sum(1 for x in samples if _SERIES.match(x) and f'dag_id="{RETRIES}"' in x)
    rows.update({row: sum(1 for x in samples if family.match(x)) for row, family in _OTHER_ROWS.items()})
    return rows


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
    result = DemoResult(home=home, endpoint=f"http://{shown_host}:{port}/metrics")
    sink = _StatsdSink() if importlib.util.find_spec("statsd") else None
    _prepare_environment(home, host, port, sink.port if sink else None)
    log_path = home / "demo.log"
    say(f"store-metrics demo: a throwaway Airflow in {home} (SQLite; Airflow's output goes to {log_path})")
    # Kept open for the life of the process: Airflow's log handlers made during the runs keep
    # writing to it from other threads (the in-process Execution API's event loop) afterwards.
    log = log_path.open("a", buffering=1)
    # The endpoint opens first, before the migration: a Prometheus started beside the demo scrapes
    # it (successfully, still empty) from its first scrape, so every series the runs make is new on
    # a target it watches and counts in full.
    with _output_to(log):
        footprint = _configure()
    _migrate(log, say)
    _run_everything(runs, home / "dags", log, result, say, footprint=footprint)
    exposition = scrape(result.endpoint)
    result.series = state_store_series(exposition)
    result.other_rows = other_rows(exposition)
    say(f"[3/3] the state store series a Prometheus scrape of {result.endpoint} returns:")
    for line in result.series:
        say(f"      {line}")
    rows = ", ".join(f"{n} for {row}" for row, n in result.other_rows.items())
    say(f"      and, for the dashboard's other rows, series {rows}")
    if sink is not None:
        result.airflow_lines = _airflow_lines(sink)
        say("      Airflow's own counters alongside (its [metrics] StatsD output, InfluxDB tags):")
        for line in result.airflow_lines:
            say(f"      {line}")
    say(f"done in {time.monotonic() - started:.1f} s")
    return result


def _migrate(log: TextIO, say: Any) -> None:
    say("[1/3] airflow db migrate ...")
    t0 = time.monotonic()
    command = [sys.executable, "-m", "airflow", "db", "migrate"]
    subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
    say(f"      done in {time.monotonic() - t0:.1f} s")


def _run_everything(
    runs: int, dags_dir: Path, log: TextIO, result: DemoResult, say: Any, *, footprint: Footprint
) -> None:
    """The proposal's runs, then the watcher's DAG and what feeds the dashboard's other rows."""
    sequence = [name for _ in range(runs) for name in PROPOSAL_RUNS]
    say(
        f"[2/3] running the upstream proposal's scenarios with dag.test() through the plugin "
        f"({len(sequence)} DAG runs; the OpenTelemetry backend serves {result.endpoint})"
    )
    with _output_to(log):
        dags = {name: _load_dag(dags_dir / f"{name}.py") for name in (*SCENARIOS, WATCHER, RETRIES)}
    result.refresh_footprint = footprint.refresh
    for name in sequence:
        _run(name, dags[name], log, result, say)
        footprint.refresh()  # read after every run: the footprint grows as the runs write
    say(
        f"      and the rest of the dashboard: an asset watcher's trigger run {WATCHER_RUNS} times, "
        "retried tasks (one resumes, one starts over) and a failing call, the API server's route "
        "metrics, the state store footprint"
    )
    _run(WATCHER, dags[WATCHER], log, result, say)
    with _output_to(log):
        run_asset_watcher(dags[WATCHER], WATCHER_RUNS)
    _run(RETRIES, dags[RETRIES], log, result, say)
    with _output_to(log):
        footprint.refresh()

    def again(stopping: Any = lambda: False) -> None:
        quiet = DemoResult(home=result.home, endpoint=result.endpoint)
        with _output_to(log):
            for name in (*PROPOSAL_RUNS, WATCHER, RETRIES):
                if stopping():
                    return
                _run(name, dags[name], log, quiet, lambda _: None)
            run_asset_watcher(dags[WATCHER], WATCHER_RUNS)
            footprint.refresh()

    result.again = again


def _airflow_lines(sink: _StatsdSink) -> list[str]:
    """Airflow's own ``resumable_job`` lines; its StatsD client sends at once, the sink may still read."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and not any(".resumable_job." in x for x in sink.lines):
        time.sleep(0.02)
    sink.close()
    return sorted(x for x in sink.lines if ".resumable_job." in x)


def _configure() -> Footprint:
    """The tasks' emitter from the demo's ``[store_metrics]``, now, and the API server's middleware on
    the in-process Execution API before the first run reaches it, on one provider (one endpoint);
    return the footprint's reader, publishing there too."""
    from ..config.reader import read_options
    from ..counting import runtime

    options = read_options()
    backend: Any = runtime.configure(**options.configure_kwargs()).backend  # the otel backend
    provider = backend.meter_provider
    attach_api_server_metrics(provider, options)
    return Footprint(provider, options)


def _run(name: str, dag: Any, log: TextIO, result: DemoResult, say: Any) -> None:
    t0 = time.monotonic()
    with _output_to(log):
        dag_run = dag.test()
    state = str(getattr(getattr(dag_run, "state", None), "value", getattr(dag_run, "state", "?")))
    elapsed = time.monotonic() - t0
    result.runs.append((name, state, elapsed))
    say(f"      {name:<24} {state:<8} {elapsed:5.1f} s")


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _keeping_stop_handlers() -> Iterator[None]:
    """Keep the demo's SIGINT and SIGTERM handlers through a round of DAG runs: each task run of
    ``dag.test()`` installs the Task SDK's own SIGTERM handler (it calls the operator's ``on_kill``
    and returns), which would swallow a Ctrl-C or ``kill`` meant for the demo."""
    install = signal.signal

    def keep(signum: int, handler: Any) -> Any:
        if signum in _STOP_SIGNALS:
            return signal.getsignal(signum)
        return install(signum, handler)

    signal.signal = keep  # type: ignore[assignment]
    try:
        yield
    finally:
        signal.signal = install


def serve_forever(
    endpoint: str,
    out: TextIO = sys.stdout,
    refresh: Any = None,
    again: Any = None,
    every: float = AGAIN_EVERY,
) -> None:
    """Keep the process (and so the scrape endpoint) alive until SIGINT or SIGTERM; re-read the
    footprint every ``FOOTPRINT_EVERY`` seconds and, with ``again``, make every run again every
    ``every`` seconds (0: never)."""
    stop = threading.Event()
    for signum in _STOP_SIGNALS:
        signal.signal(signum, lambda *_: stop.set())
    repeating = again is not None and every > 0
    print(f"serving {endpoint} for Prometheus; Ctrl-C to stop", file=out, flush=True)
    if repeating:
        print(
            f"running the example DAGs again every {every:g} s: a Prometheus started now counts "
            "the calls made after its first scrape",
            file=out,
            flush=True,
        )
    next_run, next_read = time.monotonic() + every, time.monotonic() + FOOTPRINT_EVERY
    while not stop.wait(max(0.0, min(next_run if repeating else next_read, next_read) - time.monotonic())):
        now = time.monotonic()
        if repeating and now >= next_run:
            with _keeping_stop_handlers(), contextlib.suppress(Exception):  # keeps serving what it has
                again(stop.is_set)
            next_run = time.monotonic() + every
        if refresh is not None and now >= next_read:
            with contextlib.suppress(Exception):
                refresh()
            next_read = time.monotonic() + FOOTPRINT_EVERY
