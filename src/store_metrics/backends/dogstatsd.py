"""The ``dogstatsd`` backend: DogStatsD lines with ``|#k:v`` tags.

Each flush sends one count per series that counted something::

    airflow.task_state_store.write:2|c|#dag_id:d,task_id:t,run_type:manual,operator:X

and, from the API server, one sampled distribution line per non-empty histogram bucket and one
gauge line per gauge::

    airflow.api_server.state_store.request.duration:7.25|d|@0.5|#store:task,operation:get,...
    airflow.api_server.event_loop.stall.max:212.5|g|#worker:host-123

Every byte comes from :mod:`store_metrics.wire` and leaves on one socket (:mod:`.udp`), packed
into datagrams of at most 1432 bytes (DogStatsD's own limit, which fits a 1500-byte MTU), each
ended by a newline as datadog's own client ends them. Lines
carry no client telemetry and no origin-detection field (``|c:<container-id>``), which
statsd_exporter would drop; the Datadog agent takes the lines as they are. No client library
is needed: the ``dogstatsd`` extra stays for compatibility.
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
#: DogStatsD's own UDP payload limit (fits a 1500-byte MTU).
MAX_DATAGRAM = 1432


class DogStatsdBackend:
    """Sends DogStatsD lines over UDP."""

    pull = False
    opens_without_io = False
    live_histograms = False

    def __init__(self, host: str, port: int, prefix: str) -> None:
        self.host = host
        self.port = port
        self.prefix = prefix
        self._udp = UdpSender(host, port, MAX_DATAGRAM, end=b"\n")

    def describe(self) -> str:
        return f"dogstatsd udp://{self.host}:{self.port} prefix={self.prefix!r}"

    def open(self, source: TotalsSource) -> None:
        self._udp.open()

    def export(self, deltas: Sequence[Delta]) -> None:
        style = Style.DOGSTATSD
        self._udp.send([line for delta in deltas for line in delta_lines(delta, self.prefix, style)])

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
) -> DogStatsdBackend:
    return DogStatsdBackend(host, port, prefix)
