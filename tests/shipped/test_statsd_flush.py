"""One flush of a 5,000-DAG deployment's series arrives whole at statsd_exporter.

An API server worker with ``count_at = api_server`` and ``backend = statsd`` sends every series that
moved in one flush: 150,000 lines for 5,000 DAGs x 10 tasks x 3 calls. statsd_exporter at the
Airflow chart's pinned version, with the exported mappings and the read buffer the docs recommend
(``--statsd.read-buffer=4194304``), receives that one flush from the product's emitter at its
default pace (``max_udp_rate``): every count arrives, none twice, and neither the exporter nor the
kernel drops a datagram. (Unpaced, the same flush lost about half of it.)
"""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from store_metrics import catalogue
from store_metrics.counting.runtime import create_emitter
from testbed import peers
from testbed.ports import free_port
from testbed.processes import stop_group
from testbed.repository import ROOT
from testbed.waiting import poll, wait_until

pytestmark = [pytest.mark.peers, pytest.mark.slow]

DAGS, TASKS = 5_000, 10
OPERATIONS = ("read_found", "write", "delete")
SERIES = DAGS * TASKS * len(OPERATIONS)
#: The read buffer docs/how-it-works.md and docs/performance.md recommend.
READ_BUFFER = 4_194_304
MARKER = "store_metrics_test.marker.flush_done"


class Exporter:
    """statsd_exporter (the chart's pin) on free ports of 127.0.0.1 with the exported mappings."""

    def __init__(self, log: Path) -> None:
        self.udp, self.web = free_port(socket.SOCK_DGRAM), free_port()
        command = [
            str(peers.binary("statsd_exporter", "chart")),
            f"--statsd.mapping-config={ROOT / 'collector' / 'statsd-mapping.yml'}",
            f"--statsd.listen-udp=127.0.0.1:{self.udp}",
            "--statsd.listen-tcp=",
            f"--statsd.read-buffer={READ_BUFFER}",
            f"--web.listen-address=127.0.0.1:{self.web}",
        ]
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        wait_until(lambda: self.text() is not None, timeout=60, interval=0.1)

    def text(self) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web}/metrics", timeout=60) as response:
                return str(response.read().decode("utf-8"))
        except OSError:
            if self.proc.poll() is not None:
                raise AssertionError(f"statsd_exporter exited with {self.proc.returncode}") from None
            return None

    def close(self) -> None:
        stop_group(self.proc, 10)
        self._log.close()


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[Exporter]:
    running = Exporter(tmp_path / "statsd_exporter.log")
    yield running
    running.close()


def sample(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(f"{name} "))


def test_one_flush_of_150000_series_arrives_whole(exporter: Exporter) -> None:
    emitter = create_emitter(
        "statsd", host="127.0.0.1", port=exporter.udp, max_series=SERIES + 1, flush_interval=3600.0
    )
    try:
        metrics = [catalogue.get(f"task_state_store.{operation}") for operation in OPERATIONS]
        for dag in range(DAGS):
            for task in range(TASKS):
                tags = catalogue.task_tags(
                    dag_id=f"scale_dag_{dag:05d}",
                    task_id=f"task_{task:02d}",
                    run_type="scheduled",
                    operator="X",
                )
                for metric in metrics:
                    emitter.counter(metric, tags).add(1)
        # What a background flush has: up to the next flush, an hour away here.
        assert emitter.flush(120.0)
    finally:
        emitter.close(5.0)
    # The exporter reads its socket in order: once the marker sent after the flush is counted,
    # everything before it that reached the socket has been counted too.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(f"{MARKER}:1|c".encode(), ("127.0.0.1", exporter.udp))
    text = poll(lambda: (t := exporter.text()) and "store_metrics_test_marker_flush_done" in t and t, 120)
    assert text, "statsd_exporter never counted the marker sent after the flush"

    assert sample(text, "statsd_exporter_udp_packet_drops_total") == 0
    assert sample(text, "statsd_exporter_lines_total") == SERIES + 1  # and the marker
    counted = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("airflow_task_state_store_")
    }
    assert len(counted) == SERIES
    assert set(counted.values()) == {1.0}  # every count once
    last = 'dag_id="scale_dag_04999",operator="X",run_type="scheduled",task_id="task_09"'
    assert f"airflow_task_state_store_write_total{{{last}}}" in counted
