"""The scaled-out Collector tier (collector/otel-collector-front.yaml in front of
collector/otel-collector-backend.yaml; docs/scaling-out.md), through the real programs.

Task processes (the ``otel`` backend, OTLP/HTTP, delta temporality, one process after another as a
DAG's tasks run) send to a front Collector whose loadbalancing exporter routes each stream to one of
two backend Collectors (deltatocumulative, the Prometheus exporter); Prometheus (the newest pin)
scrapes each backend as a target of its own with the exported job and rules, recording every second.

* Each series is served by exactly one backend, as its total; the rules record exactly the calls
  made, per series; both backends hold series (the routing spreads them).
* One backend restarted, with a task process reporting while it is down: the front keeps that
  process's deltas for it (its otlp exporter's queue and retries) and delivers them when it is back.
  What the restart loses is what the backend held in memory, the totals it served: it serves only
  the deltas it received since. Prometheus scraped those totals before the stop, and the rules
  count a series gone from its target and back in full: recorded calls stay exact.
* The counterexample: the shipped single-Collector config on two Collectors behind a plain
  round-robin load balancer. Each Collector holds a part of every series and serves that part as the
  total, so the layout's check (each series served whole by one Collector) fails on it.

The layout runs on the Collector pins built with the loadbalancing exporter (0.152.0: testbed/peers.py
says why 0.165.0 is built without it); the counterexample on both.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from store_metrics import catalogue
from store_metrics.shipped import export
from support import e2e
from support.peer_servers import Collector, OtlpProxy, scrape
from support.prometheus import PrometheusServer, scraping_job
from support.servers import ServerProcess
from testbed import peers
from testbed.ports import free_port
from testbed.repository import python_path
from testbed.waiting import wait_until

pytestmark = [pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

METRIC = catalogue.get("task_state_store.write")
SERIES = METRIC.prometheus_name("airflow")
#: One DAG per series: enough streams that both backends get some (all on one: 2**-39).
DAGS = [f"tier_dag_{i:02d}" for i in range(40)]
JOB = "store-metrics-otel-collector"
WAIT = 90.0
#: The Collector pins (by role) built with the loadbalancing exporter.
TIER_ROLES = [
    pin.roles[0] for pin in peers.pins_for("otelcol") if peers.LOADBALANCING not in peers.omitted(pin)
]

#: One task process: configures the otel backend (OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT, delta
#: temporality), counts the given writes per DAG, flushes, exits.
TASK_PROCESS = """
import json, sys
import store_metrics
from store_metrics import catalogue
counts = json.loads(sys.argv[1])
emitter = store_metrics.configure("otel", exporter="otlp", temporality="delta", flush_interval=3600)
metric = catalogue.get("task_state_store.write")
for dag_id, n in counts.items():
    tags = {"dag_id": dag_id, "task_id": "write", "run_type": "scheduled", "operator": "PythonOperator"}
    emitter.counter(metric, tags).add(n)
assert emitter.flush(10.0)
"""


def task_process(endpoint: str, counts: Mapping[str, int], tmp: Path) -> None:
    """One task process reporting ``counts`` (DAG -> writes) to ``endpoint``; waits until it exits."""
    env = {
        **os.environ,
        "PYTHONPATH": python_path(),
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "airflow",
    }
    with (tmp / "task-processes.log").open("a") as log:
        done = subprocess.run(
            [sys.executable, "-c", TASK_PROCESS, json.dumps(dict(counts))],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, (tmp / "task-processes.log").read_text()[-2000:]


def run_counts(run: int) -> dict[str, int]:
    """What task process ``run`` (1, 2, ...) counts: a different number per DAG and per run."""
    return {dag: (i % 5 + 1) * run for i, dag in enumerate(DAGS)}


def total(runs: Sequence[int]) -> dict[str, float]:
    return {dag: float(sum(run_counts(run)[dag] for run in runs)) for dag in DAGS}


def served(url: str) -> dict[str, float]:
    """The write counter per DAG a Collector's Prometheus exporter serves."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(scrape(url)):
        for sample in family.samples:
            if sample.name == SERIES:
                out[sample.labels["dag_id"]] = sample.value
    return out


def assert_served_whole(parts: Sequence[Mapping[str, float]], expected: Mapping[str, float]) -> None:
    """The layout's promise: each series is served by exactly one Collector, as its total."""
    for dag, value in expected.items():
        holders = [part[dag] for part in parts if dag in part]
        assert holders == [value], (dag, holders, value)


# -- the programs ---------------------------------------------------------------------------------


def collector_command(role: str, config: dict[str, Any], path: Path) -> list[str]:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return [str(peers.binary("otelcol", role)), f"--config={path}"]


class Backend(ServerProcess):
    """A backend Collector: collector/otel-collector-backend.yaml on free ports of 127.0.0.1."""

    def __init__(self, tmp: Path, role: str, exported: Path, name: str) -> None:
        self.grpc_port, self.web_port = free_port(), free_port()
        config = yaml.safe_load((exported / "collector" / "otel-collector-backend.yaml").read_text())
        config["receivers"]["otlp"]["protocols"] = {"grpc": {"endpoint": f"127.0.0.1:{self.grpc_port}"}}
        config["exporters"]["prometheus"]["endpoint"] = self.target
        config["service"]["telemetry"] = {"metrics": {"level": "none"}}
        command = collector_command(role, config, tmp / f"{name}.yaml")
        super().__init__(command, tmp / f"{name}.log", self.url)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.web_port}"

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"


class Front(ServerProcess):
    """The front Collector: collector/otel-collector-front.yaml exported with the static resolver
    naming the backends (``--set collector_backends=...``), OTLP/HTTP on a free port; its own
    telemetry on another (what it is ready by)."""

    def __init__(self, tmp: Path, role: str, backends: Sequence[Backend]) -> None:
        self.http_port, self.telemetry_port = free_port(), free_port()
        hosts = ",".join(f"127.0.0.1:{b.grpc_port}" for b in backends)
        files = export.render_all(changes={"collector_backends": hosts}, tests=False)
        config = yaml.safe_load(files[export.COLLECTOR / "otel-collector-front.yaml"])
        assert config["exporters"]["loadbalancing"]["resolver"] == {
            "static": {"hostnames": [f"127.0.0.1:{b.grpc_port}" for b in backends]}
        }
        config["receivers"]["otlp"]["protocols"] = {"http": {"endpoint": f"127.0.0.1:{self.http_port}"}}
        config["service"]["telemetry"] = {
            "metrics": {
                "level": "basic",
                "readers": [
                    {"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": self.telemetry_port}}}}
                ],
            }
        }
        command = collector_command(role, config, tmp / "front.yaml")
        super().__init__(command, tmp / "front.log", f"http://127.0.0.1:{self.telemetry_port}/metrics")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


class RoundRobin(OtlpProxy):
    """A plain load balancer for OTLP/HTTP on 127.0.0.1, as a Kubernetes Service balances: each
    connection (a task process's exporter keeps one) to the next of ``upstreams`` in turn, its
    requests forwarded unchanged."""

    protocol_version = "HTTP/1.1"  # keep-alive: one connection per task process

    def __init__(self, upstreams: Sequence[str]) -> None:
        self.turn = 0
        super().__init__(upstreams)

    def connected(self) -> list[str]:
        upstream = self.upstreams[self.turn % len(self.upstreams)]
        self.turn += 1
        return [upstream]


def prometheus(tmp: Path, exported: Path, targets: Sequence[str]) -> PrometheusServer:
    """Prometheus 3 (newest) with the exported Collector job aimed at each backend, the exported
    task-side rules, scraping and evaluating every second."""
    (tmp / "prometheus").mkdir()
    return scraping_job(tmp / "prometheus", exported, JOB, list(targets), role="newest")


def recorded(prom: PrometheusServer, since: float) -> dict[str, float]:
    """The writes the rules recorded per DAG since ``since``."""
    rng = f"{int(time.time() - since) + 2}s"
    query = f'sum by (dag_id) (sum_over_time({e2e.CALLS}{{outcome="write"}}[{rng}]))'
    return {s["metric"]["dag_id"]: float(s["value"][1]) for s in prom.query(query) if float(s["value"][1])}


def last_scraped(prom: PrometheusServer) -> dict[str, float]:
    """The write counter per DAG Prometheus last scraped, summed over the backends."""
    return {s["metric"]["dag_id"]: float(s["value"][1]) for s in prom.query(f"sum by (dag_id) ({SERIES})")}


@contextlib.contextmanager
def stopped_on_exit(*servers: Any) -> Iterator[None]:
    try:
        yield
    finally:
        for server in reversed(servers):
            with contextlib.suppress(Exception):
                server.stop() if hasattr(server, "stop") else server.close()


# -- the layout -----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", TIER_ROLES)
def test_each_series_reaches_one_backend_whole_and_a_backend_restart_loses_no_call(
    role: str, tmp_path: Path, e2e_export: Path
) -> None:
    backends = [Backend(tmp_path, role, e2e_export, f"backend-{i}") for i in range(2)]
    front = Front(tmp_path, role, backends)
    prom = prometheus(tmp_path, e2e_export, [b.target for b in backends])
    with stopped_on_exit(*backends, front, prom):
        started = time.time()
        prom.wait(lambda: prom.scalar(f'count(up{{job="{JOB}"}} == 1)') == 2, "both backends scraped")

        # Three task processes, one after another: every series whole on one backend.
        for run in (1, 2, 3):
            task_process(front.endpoint, run_counts(run), tmp_path)
        expected = total([1, 2, 3])
        wait_until(lambda: last_scraped(prom) == expected, timeout=WAIT, interval=0.5)
        parts = [served(b.url) for b in backends]
        assert_served_whole(parts, expected)
        assert all(parts), f"the routing sent every series to one backend: {parts}"
        prom.wait(lambda: recorded(prom, started) == expected, "the rules record every write")

        # Backend 1 stops; a fourth task process reports while it is down; it comes back.
        down, kept = backends[1], served(backends[1].url)
        down.stop()
        task_process(front.endpoint, run_counts(4), tmp_path)
        down.restart()
        expected = total([1, 2, 3, 4])
        # What the restart lost: the totals it held. It serves only the deltas it got since (the
        # fourth process's, kept for it by the front and delivered once it was back).
        fourth = {dag: float(run_counts(4)[dag]) for dag in kept}
        wait_until(lambda: served(down.url) == fourth, timeout=WAIT, interval=0.5)
        wait_until(lambda: served(backends[0].url) == {dag: expected[dag] for dag in parts[0]}, timeout=WAIT)
        # No call lost: Prometheus held the old totals, the rules count the series back in full.
        prom.wait(lambda: recorded(prom, started) == expected, "the rules record every write", WAIT)


# -- the counterexample: a plain split ------------------------------------------------------------


@pytest.mark.parametrize("role", ["newest", "minimum"])
def test_a_plain_round_robin_split_serves_no_series_whole(role: str, tmp_path: Path) -> None:
    """Two Collectors with the single-Collector config (otel-collector.yaml) behind a plain
    round-robin load balancer: each task process's deltas land on one or the other, so each holds a
    part of every series and serves it as if it were the total. (Prometheus, summing over the
    Collectors as the rules do, would still add the parts up: docs/scaling-out.md says what the
    split costs.)"""
    shipped = tmp_path / "otel-collector.yaml"
    shipped.write_text((export.render_all(tests=False))[export.COLLECTOR / "otel-collector.yaml"])
    collectors = []
    for i in range(2):
        (tmp_path / f"c{i}").mkdir()
        collectors.append(Collector(tmp_path / f"c{i}", role, shipped))
    balancer = RoundRobin([c.otlp_endpoint for c in collectors])
    with stopped_on_exit(*collectors, balancer):
        for run in (1, 2, 3):
            task_process(balancer.endpoint, run_counts(run), tmp_path)
        expected = total([1, 2, 3])

        def parts() -> list[dict[str, float]]:
            return [served(c.url()) for c in collectors]

        wait_until(
            lambda: {d: sum(p.get(d, 0.0) for p in parts()) for d in DAGS} == expected,
            timeout=WAIT,
            interval=0.5,
        )
        split = parts()
        # Every series on both Collectors, neither part its total ...
        assert all(set(part) == set(DAGS) for part in split), split
        assert all(part[dag] < expected[dag] for part in split for dag in DAGS)
        # ... so the layout's check fails on a plain split.
        with pytest.raises(AssertionError):
            assert_served_whole(split, expected)
