"""docs/deploy/helm.md's "first number", through the Prometheus Operator's eyes: the monitors of
``kubernetes/``, turned into scrape jobs the way the Operator turns them (``support.operator``), run
by a real Prometheus 3 (the peers' newest pin) against real endpoints on made-up chart pods.

The pods are addresses on the loopback network (``127.a.b.x``), labelled as Airflow's chart 1.19.0
labels them (``tier: airflow``, ``component: ...``) and declaring the ports its containers declare
(``api-server``, ``triggerer-logs``, ``statsd-scrape``); pods the monitors must leave alone are
there too (the scheduler, the triggerer's log groomer sidecar, which declares no port). Behind them:

* ``store-metrics demo --serve`` on the API server pod's address at port 9465, where the
  PodMonitor's relabeling moves worker 0's target; the same endpoint relayed byte for byte to
  9466 (worker 1), to the triggerer pod's 9464 and to the inventory's port;
* the chart's statsd_exporter (the peers' ``chart`` pin) with the exported mappings, which
  ``store-metrics check`` (``backend = statsd``, as helm/values-store-metrics.yaml sets it) has sent
  its test increment to.

Checked: the scrape pools and ``job`` labels the Operator's configuration gives (what the Helm page
lists and what ``store-metrics check`` says), every target up at the address the relabelings make,
nothing else selected, the demo's counters under job ``airflow/store-metrics-api-server`` with
their ``namespace`` and ``pod`` labels, and the check counter under job ``airflow-statsd``.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import selectors
import socket
import socketserver
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics.commands import host_processes
from store_metrics.config import options
from store_metrics.shipped import helm
from support.cli import run_cli
from support.operator import Container, Pod, endpoint_targets, pod_targets, scrape_jobs
from support.prometheus import PrometheusServer
from support.servers import ServerProcess
from testbed import peers
from testbed.airflow import AirflowHome, clean_environ
from testbed.ports import free_port
from testbed.repository import ROOT
from testbed.waiting import wait_until

pytestmark = [pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

NAMESPACE = "airflow"
FIRST = int(options.default("server_prometheus_port"))
TRIGGERER = int(options.default("prometheus_port"))
INVENTORY = int(options.default("inventory_port"))


class Relay:
    """Listens on ``(host, port)`` and passes each connection to ``target`` and back, byte for byte."""

    def __init__(self, host: str, port: int, target: tuple[str, int]) -> None:
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with socket.create_connection(target, timeout=10) as upstream:
                    _pipe(self.request, upstream)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer((host, port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    with selectors.DefaultSelector() as selector:
        selector.register(a, selectors.EVENT_READ, b)
        selector.register(b, selectors.EVENT_READ, a)
        while True:
            for key, _ in selector.select(timeout=10):
                data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                if not data:
                    return
                key.data.sendall(data)


def _text(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return str(response.read().decode())
    except OSError:
        return ""


def _listen_or_say_who(host: str, port: int, target: tuple[str, int]) -> Relay:
    try:
        return Relay(host, port, target)
    except OSError as exc:
        holder = host_processes.port_holder(port, host, "airflow")
        pytest.fail(f"cannot listen on {host}:{port} ({exc}): held by {holder.who()}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The made-up pods with their real endpoints, and a real Prometheus 3 scraping them."""
    tmp = tmp_path_factory.mktemp("operator")
    net = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}"
    api, triggerer, statsd, inventory, scheduler = (f"{net}.{i}" for i in range(2, 7))
    stack = contextlib.ExitStack()
    with stack:
        demo = _demo(tmp, api, stack)
        for host, port in ((api, FIRST + 1), (triggerer, TRIGGERER), (inventory, INVENTORY)):
            stack.callback(_listen_or_say_who(host, port, (api, FIRST)).stop)
        statsd_web = _statsd_exporter_with_a_check_increment(tmp, statsd, stack)
        pods = [
            Pod(
                "airflow-api-server-7d9f-a",
                NAMESPACE,
                api,
                {"tier": "airflow", "component": "api-server", "release": "airflow"},
                (Container("api-server", (("api-server", 8080),)),),
            ),
            Pod(
                "airflow-triggerer-0",
                NAMESPACE,
                triggerer,
                {"tier": "airflow", "component": "triggerer", "release": "airflow"},
                (Container("triggerer", (("triggerer-logs", 8794),)), Container("triggerer-log-groomer")),
            ),
            Pod(
                "airflow-scheduler-5c6b-b",
                NAMESPACE,
                scheduler,
                {"tier": "airflow", "component": "scheduler", "release": "airflow"},
                (Container("scheduler", (("worker-logs", 8793),)),),
            ),
        ]
        statsd_pod = Pod(
            "airflow-statsd-6f5d-c",
            NAMESPACE,
            statsd,
            {"tier": "airflow", "component": "statsd", "release": "airflow"},
        )
        inventory_pod = Pod(
            "store-metrics-inventory-8b7c-d",
            NAMESPACE,
            inventory,
            {"app.kubernetes.io/name": "store-metrics-inventory"},
        )
        (tmp / "pods.json").write_text(json.dumps(pod_targets(pods)))
        (tmp / "endpoints.json").write_text(
            json.dumps(
                endpoint_targets(
                    "airflow-statsd",
                    {"tier": "airflow", "component": "statsd", "release": "airflow"},
                    ("statsd-scrape", statsd_web),
                    statsd_pod,
                    "statsd",
                )
                + endpoint_targets(
                    "store-metrics-inventory",
                    {
                        "app.kubernetes.io/name": "store-metrics-inventory",
                        "app.kubernetes.io/part-of": "store-metrics",
                    },
                    ("metrics", INVENTORY),
                    inventory_pod,
                    "inventory",
                )
            )
        )
        jobs = [
            job
            for monitor in _monitors()
            for job in scrape_jobs(
                monitor,
                NAMESPACE,
                tmp / ("pods.json" if monitor["kind"] == "PodMonitor" else "endpoints.json"),
                "3s",
            )
        ]
        # Every 3 s, with the whole interval to answer: the demo serves a few hundred series, on a
        # machine shared with other work.
        config = {"global": {"scrape_interval": "3s", "scrape_timeout": "3s"}, "scrape_configs": jobs}
        prometheus = PrometheusServer(tmp, config, role="newest")
        stack.callback(prometheus.stop)
        yield {"prometheus": prometheus, "demo": demo, "hosts": {"api": api, "triggerer": triggerer}}


def _monitors() -> list[dict[str, Any]]:
    """The ServiceMonitors and PodMonitors of both topologies and the base (the repository's export)."""
    paths = [
        ROOT / "kubernetes" / "statsd" / "servicemonitor.yaml",
        ROOT / "kubernetes" / "api-server" / "podmonitor.yaml",
        ROOT / "kubernetes" / "base" / "inventory.yaml",
    ]
    found = [d for path in paths for d in yaml.safe_load_all(path.read_text()) if d]
    return [d for d in found if d["kind"] in ("ServiceMonitor", "PodMonitor")]


def _demo(tmp: Path, host: str, stack: contextlib.ExitStack) -> str:
    """``store-metrics demo --serve`` on the API server pod's address and worker 0's port."""
    url = f"http://{host}:{FIRST}/metrics"
    command = [
        sys.executable,
        "-m",
        "store_metrics.commands.cli",
        "demo",
        "--serve",
        "--host",
        host,
        "--port",
        str(FIRST),
    ]
    log = (tmp / "demo.log").open("w")
    stack.callback(log.close)
    proc = subprocess.Popen(command, env=clean_environ(), stdout=log, stderr=subprocess.STDOUT, cwd=tmp)

    def stop() -> None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(20)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    stack.callback(stop)
    wait_until(
        lambda: proc.poll() is not None or "_task_state_store_write_total" in _text(url), 180, interval=0.5
    )
    assert proc.poll() is None, (tmp / "demo.log").read_text()[-3000:]
    return url


def _statsd_exporter_with_a_check_increment(tmp: Path, host: str, stack: contextlib.ExitStack) -> int:
    """The chart's statsd_exporter with store-metrics' mappings (the Helm values' extraMappings), fed
    the check increment by ``store-metrics check`` as the StatsD topology's values configure it."""
    values = yaml.safe_load((ROOT / "helm" / helm.FILENAME).read_text())
    mapping = tmp / "mapping.yml"
    mapping.write_text(yaml.safe_dump({"mappings": values["statsd"]["extraMappings"]}))
    udp, web = free_port(), free_port()
    command = [
        str(peers.binary("statsd_exporter", "chart")),
        f"--statsd.mapping-config={mapping}",
        f"--statsd.listen-udp=127.0.0.1:{udp}",
        "--statsd.listen-tcp=",
        f"--web.listen-address={host}:{web}",
    ]
    exporter = ServerProcess(command, tmp / "statsd_exporter.log", f"http://{host}:{web}/metrics")
    stack.callback(exporter.stop)
    env = AirflowHome(tmp / "check-home").env(
        **{f"AIRFLOW__STORE_METRICS__{k.upper()}": v for k, v in values["config"]["store_metrics"].items()},
        AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
        AIRFLOW__STORE_METRICS__PORT=str(udp),
    )
    done = run_cli("check", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    wait_until(
        lambda: "airflow_store_metrics_check_total" in _text(f"http://{host}:{web}/metrics"), 30, interval=0.2
    )
    return web


def _targets(prometheus: PrometheusServer) -> set[tuple[str, str, str, str]]:
    active = prometheus.api("targets", state="active")["activeTargets"]
    return {(t["scrapePool"], t["labels"]["job"], t["labels"]["instance"], t["health"]) for t in active}


def test_the_monitors_scrape_exactly_the_store_metrics_endpoints(cluster: dict[str, Any]) -> None:
    prometheus: PrometheusServer = cluster["prometheus"]
    api, triggerer = cluster["hosts"]["api"], cluster["hosts"]["triggerer"]
    pod_monitor, job = "podMonitor/airflow/store-metrics-api-server", "airflow/store-metrics-api-server"
    expected_api = {
        *((f"{pod_monitor}/{w}", job, f"{api}:{FIRST + w}", "up") for w in range(helm.API_SERVER_WORKERS)),
        (f"{pod_monitor}/{helm.API_SERVER_WORKERS}", job, f"{triggerer}:{TRIGGERER}", "up"),
    }

    def errors() -> str:
        active = prometheus.api("targets", state="active")["activeTargets"]
        return "; ".join(f"{t['scrapeUrl']}: {t['health']} {t['lastError']}" for t in active)

    prometheus.wait(
        lambda: expected_api <= _targets(prometheus), f"the PodMonitor's targets up ({errors()})", 60
    )
    prometheus.wait(
        lambda: all(t[3] == "up" for t in _targets(prometheus)), f"every target up ({errors()})", 60
    )
    targets = _targets(prometheus)
    assert {t for t in targets if t[0].startswith(pod_monitor)} == expected_api
    services = {(pool, job) for pool, job, _, _ in targets if pool.startswith("serviceMonitor/")}
    assert services == {
        ("serviceMonitor/airflow/store-metrics-statsd/0", "airflow-statsd"),
        ("serviceMonitor/airflow/store-metrics-inventory/0", "store-metrics-inventory"),
    }
    assert len(targets) == len(expected_api) + 2  # no scheduler, no log groomer


def test_the_demo_counts_arrive_under_the_operators_job_and_pod_labels(cluster: dict[str, Any]) -> None:
    prometheus: PrometheusServer = cluster["prometheus"]
    query = 'airflow_task_state_store_write_total{dag_id="state_store_metrics_01"}'
    prometheus.wait(lambda: len(prometheus.query(query)) >= 3, "the demo's write counter from three targets")
    by_target = {
        (
            r["metric"]["job"],
            r["metric"]["namespace"],
            r["metric"]["pod"],
            r["metric"]["container"],
            r["metric"]["endpoint"],
        )
        for r in prometheus.query(query)
        if r["metric"]["job"] == "airflow/store-metrics-api-server"
    }
    assert by_target == {
        (
            "airflow/store-metrics-api-server",
            "airflow",
            "airflow-api-server-7d9f-a",
            "api-server",
            "api-server",
        ),
        ("airflow/store-metrics-api-server", "airflow", "airflow-triggerer-0", "triggerer", "triggerer-logs"),
    }
    # The Helm page's first query, as it is written there.
    page = (ROOT / "docs" / "deploy" / "helm.md").read_text()
    (first,) = re.findall(r"`(sum by \(dag_id\) \(airflow_task_state_store_write_total[^`]*)`", page)
    assert any(r["metric"].get("dag_id") == "state_store_metrics_01" for r in prometheus.query(first))


def test_the_check_increment_arrives_under_the_statsd_services_job(cluster: dict[str, Any]) -> None:
    prometheus: PrometheusServer = cluster["prometheus"]
    query = "airflow_store_metrics_check_total"
    prometheus.wait(lambda: prometheus.query(query), "the check counter")
    (series,) = prometheus.query(query)
    labels = series["metric"]
    assert (labels["job"], labels["namespace"], labels["service"], labels["endpoint"]) == (
        "airflow-statsd",
        "airflow",
        "airflow-statsd",
        "statsd-scrape",
    )
    assert float(series["value"][1]) == 1


def test_the_pages_and_check_name_the_operators_scrape_pools_and_jobs(cluster: dict[str, Any]) -> None:
    pools = {t[0] for t in _targets(cluster["prometheus"])}
    page = (ROOT / "docs" / "deploy" / "helm.md").read_text()
    named = set(re.findall(r"(?:podMonitor|serviceMonitor)/airflow/[\w-]+/\d+", page))
    assert named and named <= pools, named - pools
    assert "job `airflow/store-metrics-api-server`" in page
    from store_metrics.commands.check import API_SERVER_JOB

    assert f"{NAMESPACE}/{API_SERVER_JOB}" in {t[1] for t in _targets(cluster["prometheus"])}
