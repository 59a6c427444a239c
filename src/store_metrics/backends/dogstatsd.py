"""The ``dogstatsd`` backend: DogStatsD lines with ``|#k:v`` tags.

Each flush sends one count per series that counted something::

    airflow.task_state_store.write:2|c|#dag_id:d,task_id:t,run_type:manual,operator:X

and, from the API server, one sampled distribution line per non-empty histogram bucket and one
gauge line per gauge::

    airflow.api_server.state_store.request.duration:7.25|d|@0.5|#store:task,operation:get,...
    airflow.api_server.event_loop.stall.max:212.5|g|#worker:host-123

Every byte comes from ``statsd_lines`` and leaves on one socket (``udp``), packed
into datagrams of at most 1432 bytes (DogStatsD's own limit, which fits a 1500-byte MTU), each
ended by a newline as datadog's own client ends them. Lines
carry no client telemetry and no origin-detection field (``|c:<container-id>``), which
statsd_exporter would drop; the Datadog agent takes the lines as they are. No client library
is needed: the ``dogstatsd`` extra stays for compatibility.
"""

from __future__ import annotations

from ..config.options import default
from .line_backend import LineBackend, UdpSender
from .statsd_lines import Style

#: DogStatsD's own UDP payload limit (fits a 1500-byte MTU).
MAX_DATAGRAM = 1432


class DogStatsdBackend(LineBackend):
    """Sends DogStatsD lines over UDP."""

    def __init__(self, host: str, port: int, prefix: str, max_udp_rate: int = 0) -> None:
        udp = UdpSender(host, port, MAX_DATAGRAM, end=b"\n", rate=max_udp_rate)
        super().__init__("dogstatsd", Style.DOGSTATSD, udp, prefix)


def create(
    *,
    host: str = default("host"),
    port: int = default("port"),
    prefix: str = default("prefix"),
    max_udp_rate: int = default("max_udp_rate"),
) -> DogStatsdBackend:
    return DogStatsdBackend(host, port, prefix, max_udp_rate)
