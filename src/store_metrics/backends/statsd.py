"""The ``statsd`` backend: plain StatsD with InfluxDB-style tags in the name.

Each flush sends one line per counter series that counted something, packed into datagrams of
at most ``max_udp_size`` bytes::

    airflow.task_state_store.write,dag_id=d,task_id=t,run_type=manual,operator=X:2|c

Prometheus's statsd_exporter (what Airflow's Helm chart deploys) turns the tags into labels;
see the statsd_exporter mapping that ``store-metrics export`` writes. From the API server,
histograms go as one sampled ``h`` line per non-empty bucket and gauges as ``g`` lines::

    airflow.api_server.state_store.request.duration,store=task,operation=get,...:7.25|h|@0.5

Every byte comes from ``store_metrics.backends.statsd_lines`` and leaves on one socket (``udp``),
at most ``max_udp_rate`` bytes a second; a datagram that fails to send, or that the pace holds past
the flush's deadline, is kept for the next flush, one that was sent is never sent again.
No client library is needed: the ``statsd`` extra stays for compatibility and installs nothing.
"""

from __future__ import annotations

from ..config.options import default
from .line_backend import LineBackend, UdpSender
from .statsd_lines import Style


class StatsdBackend(LineBackend):
    """Sends InfluxDB-tagged StatsD lines over UDP."""

    def __init__(self, host: str, port: int, prefix: str, max_udp_size: int, max_udp_rate: int = 0) -> None:
        udp = UdpSender(host, port, max_udp_size, rate=max_udp_rate)
        super().__init__("statsd", Style.INFLUX, udp, prefix)

    def describe(self) -> str:
        return f"statsd {self._udp.target} (InfluxDB tags) prefix={self.prefix!r}"


def create(
    *,
    host: str = default("host"),
    port: int = default("port"),
    prefix: str = default("prefix"),
    max_udp_size: int = default("max_udp_size"),
    max_udp_rate: int = default("max_udp_rate"),
) -> StatsdBackend:
    return StatsdBackend(host, port, prefix, max_udp_size, max_udp_rate)
