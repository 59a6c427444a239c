"""The ``dogstatsd`` backend: DogStatsD lines with ``|#k:v`` tags, through datadog's client.

Each flush sends one count per series that counted something::

    airflow.task_state_store.write:2|c|#dag_id:d,task_id:t,run_type:manual,operator:X

The prefix is the client's namespace. The client's own telemetry and origin detection are
off by default: statsd_exporter drops lines that carry the ``|c:<container-id>`` field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datadog.dogstatsd.base import DogStatsd

from .. import validate
from ..catalogue import DEFAULT_PREFIX
from ..emitter import SeriesDelta, TotalsSource
from ..wire import dogstatsd_tag_list

DEFAULT_HOST = "localhost"
DEFAULT_PORT = 8125


class DogStatsdBackend:
    """Sends DogStatsD counters over UDP with ``datadog.DogStatsd``."""

    pull = False

    def __init__(
        self, host: str, port: int, prefix: str, telemetry: bool, origin_detection: bool
    ) -> None:
        self.host = host
        self.port = port
        self.prefix = prefix
        self.telemetry = telemetry
        self.origin_detection = origin_detection
        self._client: Any = None

    def describe(self) -> str:
        return f"dogstatsd udp://{self.host}:{self.port} prefix={self.prefix!r}"

    def open(self, source: TotalsSource) -> None:
        self._client = DogStatsd(
            host=self.host,
            port=self.port,
            namespace=self.prefix or None,
            disable_telemetry=not self.telemetry,
            origin_detection_enabled=self.origin_detection,
            disable_buffering=True,
            disable_background_sender=True,
        )

    def export(self, deltas: Sequence[SeriesDelta]) -> None:
        client = self._client
        # The context manager packs the lines into as few datagrams as fit.
        with client:
            for delta in deltas:
                client.increment(delta.metric.name, delta.value, tags=dogstatsd_tag_list(delta.tags))

    def force_flush(self, timeout: float) -> None:
        return None  # export() closes its buffer, which sends

    def close(self, timeout: float) -> None:
        if self._client is not None:
            self._client.close_socket()
            self._client = None

    def after_fork_in_child(self) -> None:
        self._client = None


def create(
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    prefix: str = DEFAULT_PREFIX,
    telemetry: bool = False,
    origin_detection: bool = False,
    **_: Any,
) -> DogStatsdBackend:
    return DogStatsdBackend(
        validate.host("host", host),
        validate.port("port", port),
        validate.prefix("prefix", prefix),
        validate.boolean("telemetry", telemetry),
        validate.boolean("origin_detection", origin_detection),
    )
