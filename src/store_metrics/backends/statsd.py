"""The ``statsd`` backend: plain StatsD with InfluxDB-style tags in the name.

Each flush sends one line per series that counted something, packed into datagrams by the
``statsd`` package's pipeline::

    airflow.task_state_store.write,dag_id=d,task_id=t,run_type=manual,operator=X:2|c

Prometheus's statsd_exporter (what Airflow's Helm chart deploys) turns the tags into labels;
see ``collector/statsd-mapping.yml``. From the API server, histograms go as one sampled ``h`` line
per non-empty bucket and gauges as ``g`` lines (``collector/statsd-mapping-server.yml``)::

    airflow.api_server.state_store.request.duration,store=task,operation=get,...:7.25|h|@0.5
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from typing import Any

import statsd

from .. import logs, validate
from ..catalogue import DEFAULT_PREFIX
from ..emitter import Delta, GaugeValue, HistogramDelta, SeriesDelta, TotalsSource
from ..wire import influx_gauge_line, influx_histogram_lines, influx_stat, pack_datagrams

DEFAULT_HOST = "localhost"
DEFAULT_PORT = 8125
#: statsd's default; safe for any network path.
DEFAULT_MAX_UDP_SIZE = 512


class StatsdBackend:
    """Sends InfluxDB-tagged StatsD counters over UDP."""

    pull = False

    def __init__(self, host: str, port: int, prefix: str, max_udp_size: int) -> None:
        self.host = host
        self.port = port
        self.prefix = prefix
        self.max_udp_size = max_udp_size
        self._client: Any = None
        # For sampled histogram lines, written as they are (opened at the first one).
        self._sock: socket.socket | None = None

    def describe(self) -> str:
        return f"statsd udp://{self.host}:{self.port} (InfluxDB tags) prefix={self.prefix!r}"

    def open(self, source: TotalsSource) -> None:
        # StatsClient resolves the host here; that may block, which is why open() runs
        # on the emitter's worker thread.
        self._client = statsd.StatsClient(self.host, self.port, prefix=None, maxudpsize=self.max_udp_size)

    def export(self, deltas: Sequence[Delta]) -> None:
        pipe = self._client.pipeline()
        lines: list[str] = []
        for delta in deltas:
            if isinstance(delta, SeriesDelta):
                pipe.incr(influx_stat(self.prefix, delta.metric.name, delta.tags), delta.value)
            elif isinstance(delta, HistogramDelta):
                lines += influx_histogram_lines(self.prefix, delta.metric.name, delta.tags, delta.buckets)
            elif isinstance(delta, GaugeValue):
                lines.append(influx_gauge_line(self.prefix, delta.metric.name, delta.tags, delta.value))
        pipe.send()
        if lines:
            self._send_raw(lines)

    def _send_raw(self, lines: list[str]) -> None:
        # The statsd package would apply a sample rate itself (dropping lines at random).
        if self._sock is None:
            resolved = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_DGRAM)
            family, kind, proto, _, address = resolved[0]
            sock = socket.socket(family, kind, proto)
            sock.connect(address)
            self._sock = sock
        for datagram in pack_datagrams(lines, self.max_udp_size):
            try:
                self._sock.send(datagram)
            except OSError as exc:  # UDP: dropped, like the statsd package's own sends
                logs.once(
                    "statsd:send",
                    logging.WARNING,
                    "store-metrics: statsd could not send to udp://%s:%s: %s; those lines are dropped "
                    "(UDP), further send errors in this process are not logged",
                    self.host,
                    self.port,
                    exc,
                )

    def force_flush(self, timeout: float) -> None:
        return None  # every export is sent at once

    def close(self, timeout: float) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def after_fork_in_child(self) -> None:
        self._client = None
        self._sock = None


def create(
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    prefix: str = DEFAULT_PREFIX,
    max_udp_size: int = DEFAULT_MAX_UDP_SIZE,
    **_: Any,
) -> StatsdBackend:
    return StatsdBackend(
        validate.host("host", host),
        validate.port("port", port),
        validate.prefix("prefix", prefix),
        max_udp_size,
    )
