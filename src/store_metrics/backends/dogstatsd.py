"""The ``dogstatsd`` backend: DogStatsD lines with ``|#k:v`` tags, through datadog's client.

Each flush sends one count per series that counted something::

    airflow.task_state_store.write:2|c|#dag_id:d,task_id:t,run_type:manual,operator:X

and, from the API server, one sampled distribution line per non-empty histogram bucket and one
gauge line per gauge (exact text in :mod:`store_metrics.wire`)::

    airflow.api_server.state_store.request.duration:7.25|d|@0.5|#store:task,operation:get,...
    airflow.api_server.event_loop.stall.max:212.5|g|#worker:host-123

The prefix is the client's namespace. The client's own telemetry and origin detection are
off by default: statsd_exporter drops lines that carry the ``|c:<container-id>`` field.

Problems are reported once per process, like every store-metrics problem: the socket is
connected in ``open()`` (so an unresolvable host is an open error, logged once and retried),
and the warning datadog's client logs for every packet it fails to send (for example
``Connection refused`` from a closed UDP port) is replaced, for our own client only, by one
store-metrics warning.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from datadog.dogstatsd.base import DogStatsd

from .. import logs, validate
from ..catalogue import DEFAULT_PREFIX
from ..emitter import Delta, GaugeValue, HistogramDelta, SeriesDelta, TotalsSource
from ..wire import dogstatsd_gauge_line, dogstatsd_histogram_lines, dogstatsd_tag_list, pack_datagrams

DEFAULT_HOST = "localhost"
DEFAULT_PORT = 8125
DATADOG_LOGGER = "datadog.dogstatsd"
#: DogStatsD's own UDP payload limit (fits a 1500-byte MTU).
MAX_DATAGRAM = 1432

# Set while our backend calls into its DogStatsd client, on the thread doing the call.
_ours = threading.local()


class _OnceForOurClient(logging.Filter):
    """Turns datadog's per-packet warnings, logged while *our* client sends, into one line of ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        target = getattr(_ours, "target", None)
        if target is None or record.levelno < logging.WARNING:
            return True
        logs.once(
            "dogstatsd:send",
            logging.WARNING,
            "store-metrics: dogstatsd could not send to %s: %s; those counts are dropped "
            "(UDP), further send errors in this process are not logged",
            target,
            record.getMessage(),
        )
        return False


_filter_lock = threading.Lock()
_filter: _OnceForOurClient | None = None


def _install_filter() -> None:
    global _filter
    with _filter_lock:
        if _filter is None:
            _filter = _OnceForOurClient()
            logging.getLogger(DATADOG_LOGGER).addFilter(_filter)


class DogStatsdBackend:
    """Sends DogStatsD counters over UDP with ``datadog.DogStatsd``."""

    pull = False

    def __init__(self, host: str, port: int, prefix: str, telemetry: bool, origin_detection: bool) -> None:
        self.host = host
        self.port = port
        self.prefix = prefix
        self.telemetry = telemetry
        self.origin_detection = origin_detection
        self._client: Any = None

    def describe(self) -> str:
        return f"dogstatsd udp://{self.host}:{self.port} prefix={self.prefix!r}"

    def open(self, source: TotalsSource) -> None:
        _install_filter()
        client = DogStatsd(
            host=self.host,
            port=self.port,
            namespace=self.prefix or None,
            disable_telemetry=not self.telemetry,
            origin_detection_enabled=self.origin_detection,
            disable_buffering=True,
            disable_background_sender=True,
        )
        # Resolve and connect now (this may block on DNS; open() runs on the emitter's worker
        # thread): a host that does not resolve fails here, once, instead of on every send.
        client.get_socket()
        self._client = client

    def export(self, deltas: Sequence[Delta]) -> None:
        client = self._client
        _ours.target = f"udp://{self.host}:{self.port}"
        lines: list[str] = []
        try:
            # The context manager packs the lines into as few datagrams as fit.
            with client:
                for delta in deltas:
                    if isinstance(delta, SeriesDelta):
                        client.increment(delta.metric.name, delta.value, tags=dogstatsd_tag_list(delta.tags))
                    elif isinstance(delta, HistogramDelta):
                        name, tags = delta.metric.name, delta.tags
                        lines += dogstatsd_histogram_lines(self.prefix, name, tags, delta.buckets)
                    elif isinstance(delta, GaugeValue):
                        name, tags = delta.metric.name, delta.tags
                        lines.append(dogstatsd_gauge_line(self.prefix, name, tags, delta.value))
        finally:
            _ours.target = None
        if lines:
            # Sampled lines are written as they are: the client would apply the sample rate itself.
            self._send_raw(client.get_socket(), lines)

    def _send_raw(self, sock: Any, lines: list[str]) -> None:
        for datagram in pack_datagrams(lines, MAX_DATAGRAM):
            try:
                sock.send(datagram)
            except OSError as exc:  # UDP: dropped, like the client's own sends
                logs.once(
                    "dogstatsd:send",
                    logging.WARNING,
                    "store-metrics: dogstatsd could not send to udp://%s:%s: %s; those counts are "
                    "dropped (UDP), further send errors in this process are not logged",
                    self.host,
                    self.port,
                    exc,
                )

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
