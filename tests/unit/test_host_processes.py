"""``store_metrics.commands.host_processes``: reading this host's processes and listeners from /proc.

Against this very process and real listening sockets: the listener of a port is found with its
command line, a store-metrics endpoint is told from another program's, and the port of an Airflow
API server is read from its process title as Airflow writes it. (Real ``airflow triggerer`` and
``airflow api-server --apps execution`` processes: tests/airflow/test_check_on_a_busy_host.py.)
"""

from __future__ import annotations

import http.server
import os
import sys
import threading
from collections.abc import Iterator

import pytest

from store_metrics.commands import host_processes
from store_metrics.commands.host_processes import Process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


class _Exposition(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[http.server.HTTPServer]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Exposition)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_holder_of_a_port_is_this_process(listener: http.server.HTTPServer) -> None:
    port = listener.server_address[1]
    _Exposition.body = b"# HELP up x\nup 1\n"
    holder = host_processes.port_holder(port, "0.0.0.0", "airflow")
    assert [p.pid for p in holder.processes] == [os.getpid()]
    assert holder.exposition and not holder.our_series
    # pytest is no Airflow and no store-metrics process, and serves none of store-metrics' series.
    assert not holder.store_metrics
    assert f"pid {os.getpid()} (" in holder.who()


def test_store_metrics_series_make_it_a_store_metrics_endpoint(listener: http.server.HTTPServer) -> None:
    port = listener.server_address[1]
    _Exposition.body = b'airflow_task_state_store_write_total{dag_id="d"} 1.0\n'
    assert host_processes.port_holder(port, "127.0.0.1", "airflow").store_metrics
    # Under another prefix they are someone else's.
    assert not host_processes.port_holder(port, "127.0.0.1", "myco.airflow").our_series


def test_nobody_listens_on_a_closed_port(listener: http.server.HTTPServer) -> None:
    port = listener.server_address[1]
    listener.server_close()
    holder = host_processes.port_holder(port, "0.0.0.0", "airflow")
    assert holder.processes == () and not holder.exposition and not holder.store_metrics


@pytest.mark.parametrize(
    ("argv", "port"),
    [
        (("airflow api_server -- host:0.0.0.0 port:8080", "", ""), 8080),  # Airflow's process title
        (("/venv/bin/python", "/venv/bin/airflow", "api-server", "--port", "9091"), 9091),
        (("/venv/bin/python", "-m", "airflow", "api-server", "--port=9092"), 9092),
        (("/venv/bin/python", "/venv/bin/airflow", "api-server"), 8080),  # [api] port
    ],
)
def test_the_api_server_port_comes_from_the_title_or_the_arguments(argv: tuple[str, ...], port: int) -> None:
    process = Process(1, argv)
    assert process.runs("airflow")
    assert host_processes._api_server_port(process, 8080) == port


def test_only_airflow_and_store_metrics_commands_count_as_ours() -> None:
    assert Process(1, ("/venv/bin/python", "/venv/bin/store-metrics", "inventory", "--serve")).runs(
        "airflow", "store-metrics"
    )
    assert Process(1, ("airflow triggerer",)).runs("airflow")
    assert not Process(1, ("/usr/bin/prometheus", "--config.file=airflow.yml")).runs(
        "airflow", "store-metrics"
    )
