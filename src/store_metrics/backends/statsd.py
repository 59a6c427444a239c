"""The ``statsd`` backend: plain StatsD with InfluxDB-style tags in the name.

Each flush sends one line per counter series that counted something, packed into datagrams of
at most ``max_udp_size`` bytes::

    airflow.task_state_store.write,dag_id=d,task_id=t,run_type=manual,operator=X:2|c

Prometheus's statsd_exporter (what Airflow's Helm chart deploys) turns the tags into labels;
see the statsd_exporter mapping that ``store-metrics export`` writes. From the API server,
histograms go as one sampled ``h`` line per non-empty bucket and gauges as ``g`` lines::

    airflow.api_server.state_store.request.duration,store=task,operation=get,...:7.25|h|@0.5

Every byte comes from :mod:`store_metrics.wire` and leaves on one socket (:mod:`.udp`); a
datagram that fails to send is kept for the next flush, one that was sent is never sent again.
No client library is needed: the ``statsd`` extra stays for compatibility and installs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..catalogue import DEFAULT_PREFIX
from ..contracts import TotalsSource
from ..deltas import Delta
from ..wire import Style, delta_lines
from .udp import UdpSender

DEFAULT_HOST = "localhost"
DEFAULT_PORT = 8125
#: The statsd package's default: safe for any network path.
DEFAULT_MAX_UDP_SIZE = 512


class StatsdBackend:
    """Sends InfluxDB-tagged StatsD lines over UDP."""

    pull = False
    opens_without_io = False
    live_histograms = False

    def __init__(self, host: str, port: int, prefix: str, max_udp_size: int) -> None:
        self.host = host
        self.port = port
        self.prefix = prefix
        self._udp = UdpSender(host, port, max_udp_size)

    def describe(self) -> str:
        return f"statsd udp://{self.host}:{self.port} (InfluxDB tags) prefix={self.prefix!r}"

    def open(self, source: TotalsSource) -> None:
        self._udp.open()

    def export(self, deltas: Sequence[Delta]) -> None:
        self._udp.send([line for delta in deltas for line in delta_lines(delta, self.prefix, Style.INFLUX)])

    def force_flush(self, timeout: float) -> None:
        return None  # every export is sent at once

    def close(self, timeout: float) -> None:
        self._udp.close()

    def after_fork_in_child(self) -> None:
        self._udp.after_fork_in_child()


def create(
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    prefix: str = DEFAULT_PREFIX,
    max_udp_size: int = DEFAULT_MAX_UDP_SIZE,
) -> StatsdBackend:
    return StatsdBackend(host, port, prefix, max_udp_size)
