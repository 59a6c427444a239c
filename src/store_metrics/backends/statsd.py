"""The ``statsd`` backend: plain StatsD with InfluxDB-style tags in the name.

Each flush sends one line per series that counted something, packed into datagrams by the
``statsd`` package's pipeline::

    airflow.task_state_store.write,dag_id=d,task_id=t,run_type=manual,operator=X:2|c

Prometheus's statsd_exporter (what Airflow's Helm chart deploys) turns the tags into labels;
see ``collector/statsd-mapping.yml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import statsd

from .. import validate
from ..catalogue import DEFAULT_PREFIX
from ..emitter import SeriesDelta, TotalsSource
from ..wire import influx_stat

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

    def describe(self) -> str:
        return f"statsd udp://{self.host}:{self.port} (InfluxDB tags) prefix={self.prefix!r}"

    def open(self, source: TotalsSource) -> None:
        # StatsClient resolves the host here; that may block, which is why open() runs
        # on the emitter's worker thread.
        self._client = statsd.StatsClient(self.host, self.port, prefix=None, maxudpsize=self.max_udp_size)

    def export(self, deltas: Sequence[SeriesDelta]) -> None:
        pipe = self._client.pipeline()
        for delta in deltas:
            pipe.incr(influx_stat(self.prefix, delta.metric.name, delta.tags), delta.value)
        pipe.send()

    def force_flush(self, timeout: float) -> None:
        return None  # every export is sent at once

    def close(self, timeout: float) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def after_fork_in_child(self) -> None:
        self._client = None


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
