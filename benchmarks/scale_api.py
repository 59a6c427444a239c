"""12. Scale with ``count_at = api_server``: one API server worker holding a large deployment's series.

``count_at = api_server`` with ``backend = otel`` and ``otel_exporter = prometheus`` (the recommended
Prometheus path, docs/count-at-api-server.md): every worker keeps a cumulative series per task and
outcome and serves them on its own ``/metrics``, capped at ``max_series`` (its default) per process.

A throwaway Airflow home (SQLite) holds the deployment's task instances and tokens
(``benchmarks.scale_setup``). Two arms read the same figures at each size (cumulative):

* **real**: ``airflow api-server --workers 1`` with the plugin, and each task instance's three calls
  over HTTP (``benchmarks.scale_client``): the worker's RSS, its ``/metrics`` (bytes, scrape time
  with gzip as Prometheus asks), how long a request to the same worker waits while a scrape runs
  (``/api/v2/monitor/health``, polled during the scrape), named and ``overflow`` series. At about
  10 ms of CPU per request here, sizes stop at ``REAL_SIZES``.
* **probe**: the worker's counting stack over a stand-in for Airflow's routes
  (``benchmarks.scale_api_probe``), up to 5,000 DAGs: where ``max_series`` bites, and what the
  user then sees.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TypedDict

from store_metrics.api_server.store_calls import CACHE_SIZE
from store_metrics.config.options import default
from testbed.airflow import AirflowHome
from testbed.ports import free_port
from testbed.waiting import settle

from . import scale
from .common import REPO_ROOT, log
from .load_airflow import JWT_SECRET, ApiServer

REAL_SIZES: tuple[int, ...] = (100, 250, 1_000)
PROBE_SIZES: tuple[int, ...] = (100, 250, 500, 1_000, 2_000, 5_000)
QUICK_REAL: tuple[int, ...] = (20,)
QUICK_PROBE: tuple[int, ...] = (20, 50)
#: Scrapes per size.
SCRAPES = 3
#: Task instances whose calls are in flight at once (the client's concurrency).
CONCURRENCY = 8
COUNTED = "airflow_task_state_store_"
OVERFLOW = 'dag_id="overflow"'


class RealSize(TypedDict):
    dags: int
    requests: int
    answers: dict[str, int]
    failures: dict[str, int]
    client_seconds: float
    server_cpu_ms_per_request: float
    rss: int
    named_series: int
    overflow_series: int
    metrics_bytes: int
    scrape_seconds: list[float]
    wait_during_scrape_ms: list[float]  # the longest request to the same worker during each scrape
    wait_idle_ms: float  # the same request's median with no scrape running


class ScaleApi(TypedDict):
    quick: bool
    tasks: int
    max_series: int
    cache_size: int
    setup_seconds: float
    real_startup_seconds: float
    real_idle_rss: int
    real: list[RealSize]
    probe: list[dict[str, Any]]
    load_average: list[float]


def named_and_overflow(text: str) -> tuple[int, int, int]:
    """Task side's series in a ``/metrics`` text: named ones, ``overflow`` ones, and the calls counted
    under ``overflow``."""
    named = overflow = calls = 0
    for line in text.splitlines():
        if line.startswith(COUNTED):
            if OVERFLOW in line:
                overflow += 1
                calls += int(float(line.rsplit(" ", 1)[1]))
            else:
                named += 1
    return named, overflow, calls


def _settings(port: int) -> dict[str, str]:
    return {
        "AIRFLOW__STORE_METRICS__COUNT_AT": "api_server",
        "AIRFLOW__STORE_METRICS__BACKEND": "otel",
        "AIRFLOW__STORE_METRICS__OTEL_EXPORTER": "prometheus",
        "AIRFLOW__STORE_METRICS__PROMETHEUS_HOST": "127.0.0.1",
        "AIRFLOW__STORE_METRICS__SERVER_PROMETHEUS_PORT": str(port),
    }


def _child(argv: list[str], env: dict[str, str], timeout: float) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        output = f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        raise RuntimeError(f"{argv[0]} failed ({proc.returncode}):\n{output}")


def _waits_during_scrape(metrics_url: str, probe_url: str) -> tuple[float, float]:
    """One scrape (gzip) while another thread sends ``probe_url`` requests back to back: the scrape's
    seconds and the longest probe (ms)."""
    done = threading.Event()
    waits: list[float] = []

    def probe() -> None:
        while not done.is_set():
            waits.append(scale.fetch(probe_url, timeout=60.0)[1] * 1000)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        _, seconds = scale.fetch(metrics_url, gzip=True)
    finally:
        done.set()
        thread.join(60.0)
    return seconds, max(waits, default=0.0)


def _measure_real(server: ApiServer, port: int, dags: int, client: dict[str, Any], cpu: float) -> RealSize:
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    probe_url = f"http://127.0.0.1:{server.port}/api/v2/monitor/health"
    expected = min(dags * scale.SERIES_PER_DAG, default("max_series"))

    def named() -> int:
        return named_and_overflow(scale.fetch(metrics_url)[0].decode("utf-8"))[0]

    settle(named, quiet=2.0, timeout=60.0 + expected / 1000, interval=0.5)
    idle = [scale.fetch(probe_url)[1] * 1000 for _ in range(20)]
    scrapes = [_waits_during_scrape(metrics_url, probe_url) for _ in range(SCRAPES)]
    text = scale.fetch(metrics_url)[0].decode("utf-8")
    counted, overflow, _ = named_and_overflow(text)
    requests = sum(client["answers"].values())
    return RealSize(
        dags=dags,
        requests=requests,
        answers=client["answers"],
        failures=client["failures"],
        client_seconds=round(client["seconds"], 1),
        server_cpu_ms_per_request=round(cpu * 1000 / max(1, requests), 2),
        rss=server.rss(),
        named_series=counted,
        overflow_series=overflow,
        metrics_bytes=len(text.encode("utf-8")),
        scrape_seconds=[round(s, 4) for s, _ in scrapes],
        wait_during_scrape_ms=[round(w, 1) for _, w in scrapes],
        wait_idle_ms=round(statistics.median(idle), 1),
    )


def _real(home: AirflowHome, tokens: list[list[str]], sizes: tuple[int, ...], work: Path) -> dict[str, Any]:
    port = free_port()
    server = ApiServer("scale", home, _settings(port), workers=1)
    server.start()
    try:
        server.wait_ready()
        idle_rss = server.rss()
        measured: list[RealSize] = []
        done = 0
        for dags in sizes:
            plan = work / f"plan-{dags}.json"
            out = work / f"client-{dags}.json"
            tis = tokens[done * scale.TASKS : dags * scale.TASKS]
            plan.write_text(json.dumps({"base_url": server.base_url, "concurrency": CONCURRENCY, "tis": tis}))
            cpu = server.cpu()
            _child(["benchmarks.scale_client", str(plan), str(out)], os.environ.copy(), 3600.0)
            cpu = server.cpu() - cpu
            size = _measure_real(server, port, dags, json.loads(out.read_text()), cpu)
            log(
                f"  scale_api: real worker, {dags:,} DAGs: {size['named_series']:,} series, RSS "
                f"{size['rss'] / 2**20:.0f} MiB, scrape {max(size['scrape_seconds']):.2f} s, "
                f"{size['requests'] / size['client_seconds']:.0f} req/s"
            )
            measured.append(size)
            done = dags
        return {"startup": server.startup_s, "idle_rss": idle_rss, "sizes": measured}
    finally:
        server.stop()


def run(quick: bool) -> ScaleApi:
    real_sizes, probe_sizes = (QUICK_REAL, QUICK_PROBE) if quick else (REAL_SIZES, PROBE_SIZES)
    largest = max(*real_sizes, *probe_sizes)
    with tempfile.TemporaryDirectory(prefix="store-metrics-bench-scale-api-") as tmp:
        work = Path(tmp)
        home = AirflowHome(work / "home")
        home.dags.mkdir(parents=True)
        tokens_file = work / "tokens.json"
        log(f"  scale_api: {largest:,} DAGs x {scale.TASKS} task instances and their tokens")
        started = time.monotonic()
        env = home.env(AIRFLOW__STORE_METRICS__BACKEND="none", AIRFLOW__API_AUTH__JWT_SECRET=JWT_SECRET)
        _child(["benchmarks.scale_setup", str(largest), str(tokens_file)], env, 900.0)
        setup = time.monotonic() - started
        tokens: list[list[str]] = json.loads(tokens_file.read_text(encoding="utf-8"))
        real = _real(home, tokens, real_sizes, work)
        log(f"  scale_api: probe, {', '.join(f'{s:,}' for s in probe_sizes)} DAGs")
        out = work / "probe.json"
        probe_env = home.env(AIRFLOW__API_AUTH__JWT_SECRET=JWT_SECRET, **_settings(free_port()))
        sizes_arg = ",".join(map(str, probe_sizes))
        _child(["benchmarks.scale_api_probe", str(tokens_file), sizes_arg, str(out)], probe_env, 3600.0)
        probe = json.loads(out.read_text(encoding="utf-8"))["sizes"]
    return ScaleApi(
        quick=quick,
        tasks=scale.TASKS,
        max_series=default("max_series"),
        cache_size=CACHE_SIZE,
        setup_seconds=round(setup, 1),
        real_startup_seconds=round(real["startup"], 1),
        real_idle_rss=real["idle_rss"],
        real=real["sizes"],
        probe=probe,
        load_average=list(os.getloadavg()),
    )
