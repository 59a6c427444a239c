"""statsd_exporter (the Airflow chart's pinned version) fed a large deployment's series over UDP.

Two ways in, both on 127.0.0.1 with the exported mappings (``collector/statsd-mapping.yml``):

* **paced** (``grow``): the deployment's lines, packed into datagrams exactly as the ``statsd``
  backend packs them (512 bytes), sent at a bounded rate of ``RATE`` lines per second to one
  exporter, DAG range after DAG range, measured after each size: what the exporter counted
  (``statsd_exporter_lines_total``), what it dropped itself (``statsd_exporter_udp_packet_drops_total``)
  and what the kernel dropped on its socket (``/proc/net/udp``), its RSS, its ``/metrics`` (bytes,
  and the time to fetch it with gzip, as Prometheus does);
* **one flush** (``burst``): every series of a size counted once on the product's own emitter with
  the ``statsd`` backend, then one ``flush()``: what an API server worker with ``count_at =
  api_server`` and ``backend = statsd`` sends when every series moved in one flush interval, at the
  speed the product sends. To a fresh exporter with its default socket buffer, and with
  ``--statsd.read-buffer`` at the kernel's ``net.core.rmem_max``.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import TypedDict

from store_metrics.backends.statsd_lines import pack_lines
from store_metrics.catalogue import Outcome, Store, metric_for
from store_metrics.config.options import default
from store_metrics.counting.runtime import create_emitter
from testbed.peers import binary
from testbed.ports import free_port
from testbed.waiting import settle

from . import scale
from .scale import Peer

#: Lines per second of the paced feed: a bound, so the machine is not flooded.
RATE = 20_000.0
#: Scrapes of ``/metrics`` per size (gzip, as Prometheus asks).
SCRAPES = 5
#: The ``statsd`` backend's datagram size (``max_udp_size``'s default).
DATAGRAM = 512
MAPPED = "airflow_task_state_store_"


class ExporterCounts(TypedDict):
    udp_packets: int
    lines: int
    exporter_drops: int  # statsd_exporter_udp_packet_drops_total
    kernel_drops: int  # the drops column of its socket in /proc/net/udp


class Paced(TypedDict):
    dags: int
    series: int
    lines_sent: int
    datagrams_sent: int
    bytes_sent: int
    send_seconds: float
    counts: ExporterCounts
    series_exported: int
    rss: int
    metrics_bytes: int
    metrics_gzip_bytes: int
    scrape_seconds: list[float]


class Burst(TypedDict):
    dags: int
    read_buffer: int  # --statsd.read-buffer (0: not set, the kernel's default)
    lines_sent: int
    datagrams_sent: int
    flush_seconds: float
    counts: ExporterCounts
    max_udp_rate: int  # the emitter's pace (bytes/s after the first 64 KiB; 0: one burst)


class Exporter(Peer):
    """statsd_exporter on free ports of 127.0.0.1 (UDP only) with the exported mappings."""

    def __init__(self, version: str, mappings: Path, log: Path, read_buffer: int = 0) -> None:
        self.web, self.udp = free_port(), free_port(socket.SOCK_DGRAM)
        argv = [
            str(binary("statsd_exporter", "chart" if version == "chart" else version)),
            f"--web.listen-address=127.0.0.1:{self.web}",
            f"--statsd.listen-udp=127.0.0.1:{self.udp}",
            "--statsd.listen-tcp=",
            f"--statsd.mapping-config={mappings}",
        ]
        if read_buffer:
            argv.append(f"--statsd.read-buffer={read_buffer}")
        super().__init__(argv, log, self.metrics_url)

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.web}/metrics"

    def text(self) -> str:
        return scale.fetch(self.metrics_url)[0].decode("utf-8")

    def counts(self) -> ExporterCounts:
        text = self.text()
        return ExporterCounts(
            udp_packets=int(scale.total(text, "statsd_exporter_udp_packets_total")),
            lines=int(scale.total(text, "statsd_exporter_lines_total")),
            exporter_drops=int(scale.total(text, "statsd_exporter_udp_packet_drops_total")),
            kernel_drops=kernel_drops(self.udp),
        )

    def settled(self, timeout: float = 30.0) -> ExporterCounts:
        """Its counts once ``lines_total`` has stopped moving for half a second (bounded)."""
        settle(lambda: self.counts()["lines"], quiet=0.5, timeout=timeout)
        return self.counts()


def kernel_drops(port: int) -> int:
    """Datagrams the kernel dropped on the UDP socket bound to 127.0.0.1:``port`` (receive buffer full)."""
    local = f"0100007F:{port:04X}"
    for line in Path("/proc/net/udp").read_text(encoding="ascii").splitlines()[1:]:
        fields = line.split()
        if fields[1] == local:
            return int(fields[-1])
    return 0


def rmem_max() -> int:
    """The kernel's cap on a socket's receive buffer (``net.core.rmem_max``)."""
    return int(Path("/proc/sys/net/core/rmem_max").read_text(encoding="ascii"))


def rmem_default() -> int:
    return int(Path("/proc/sys/net/core/rmem_default").read_text(encoding="ascii"))


def _send_paced(port: int, payloads: list[bytes], lines_per_datagram: float) -> float:
    """Send ``payloads`` to 127.0.0.1:``port`` at ``RATE`` lines per second; the seconds it took."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.connect(("127.0.0.1", port))
        started = time.perf_counter()
        every = lines_per_datagram / RATE
        for i, payload in enumerate(payloads):
            sock.send(payload)
            ahead = started + (i + 1) * every - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
        return time.perf_counter() - started
    finally:
        sock.close()


def _measure(exporter: Exporter, dags: int, sent: tuple[int, int, int], seconds: float) -> Paced:
    counts = exporter.settled()
    text = exporter.text()
    scrapes = [scale.fetch(exporter.metrics_url, gzip=True) for _ in range(SCRAPES)]
    return Paced(
        dags=dags,
        series=dags * scale.SERIES_PER_DAG,
        lines_sent=sent[0],
        datagrams_sent=sent[1],
        bytes_sent=sent[2],
        send_seconds=round(seconds, 3),
        counts=counts,
        series_exported=sum(1 for line in text.splitlines() if line.startswith(MAPPED)),
        rss=scale.rss_of(exporter.pid),
        metrics_bytes=len(text.encode("utf-8")),
        metrics_gzip_bytes=len(scrapes[-1][0]),
        scrape_seconds=[round(s, 4) for _, s in scrapes],
    )


def grow(exporter: Exporter, sizes: tuple[int, ...]) -> tuple[list[Paced], dict[int, str]]:
    """Feed ``exporter`` DAG range after DAG range (paced), measuring at each size; with the
    exporter's ``/metrics`` text at each size (what Prometheus scrapes)."""
    measured: list[Paced] = []
    bodies: dict[int, str] = {}
    done, sent = 0, (0, 0, 0)
    for dags in sizes:
        lines = scale.lines(range(done, dags))
        payloads = [d.payload for d in pack_lines(lines, DATAGRAM)]
        seconds = _send_paced(exporter.udp, payloads, len(lines) / max(1, len(payloads)))
        sent = (sent[0] + len(lines), sent[1] + len(payloads), sent[2] + sum(map(len, payloads)))
        measured.append(_measure(exporter, dags, sent, seconds))
        bodies[dags] = exporter.text()
        done = dags
    return measured, bodies


def burst(mappings: Path, logs: Path, dags: int, read_buffer: int) -> Burst:
    """One flush of every series of ``dags`` DAGs through the product's emitter (``statsd`` backend)
    into a fresh exporter."""
    with Exporter("chart", mappings, logs / f"burst-{dags}-{read_buffer}.log", read_buffer) as exporter:
        emitter = create_emitter(
            "statsd",
            host="127.0.0.1",
            port=exporter.udp,
            prefix=scale.PREFIX,
            max_series=dags * scale.SERIES_PER_DAG + 1,
            flush_interval=3600.0,
        )
        try:
            metrics = [metric_for(Store.TASK, Outcome(outcome)) for outcome in scale.OUTCOMES]
            for dag in range(dags):
                for task in range(scale.TASKS):
                    tags = scale.tags(dag, task)
                    for metric in metrics:
                        emitter.counter(metric, tags).add(1)
            started = time.perf_counter()
            if not emitter.flush(120.0):
                raise RuntimeError("the emitter's flush did not finish in 120 s")
            flushed = time.perf_counter() - started
        finally:
            emitter.close(5.0)
        lines = scale.lines(range(dags))
        return Burst(
            dags=dags,
            read_buffer=read_buffer,
            lines_sent=len(lines),
            datagrams_sent=len(pack_lines(lines, DATAGRAM)),
            flush_seconds=round(flushed, 4),
            counts=exporter.settled(),
            max_udp_rate=int(default("max_udp_rate")),
        )
