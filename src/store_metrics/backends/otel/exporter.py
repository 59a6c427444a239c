"""The OTLP exporter of our own provider: built from the standard variables, wrapped to record failures.

A failed OTLP export is not logged by the exporter on every attempt: what *our* exporter logs
while it exports is kept (``ResultRecorder``, with a logging filter) and becomes the reason
in one store-metrics line per outage. On an explicit flush (a task's end) the emitter logs it;
on the SDK's own periodic exports (what a long-lived API server or triggerer does all day) the
recorder logs it, and logs again once an export succeeds. A TCP probe (``unreachable``)
tells a refusing or unresolvable endpoint in a millisecond, so a task's end does not wait for
the exporter's retries while the collector is down.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk.metrics import Counter as SdkCounter
from opentelemetry.sdk.metrics import Histogram as SdkHistogram
from opentelemetry.sdk.metrics import ObservableCounter as SdkObservableCounter
from opentelemetry.sdk.metrics import ObservableUpDownCounter as SdkObservableUpDownCounter
from opentelemetry.sdk.metrics import UpDownCounter as SdkUpDownCounter
from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricExporter, MetricExportResult

from ... import logs

#: How long the reachability probe waits for a TCP connection at most.
PROBE_TIMEOUT = 0.5

#: Loggers the OTLP exporters report a failed export on (one record per failed export).
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
)


def preferred_temporality(kind: str) -> dict[type, AggregationTemporality]:
    """What an exporter asks for with ``otel_temporality = kind`` (``delta`` or ``cumulative``)."""
    chosen = AggregationTemporality.DELTA if kind == "delta" else AggregationTemporality.CUMULATIVE
    return {
        SdkCounter: chosen,
        SdkObservableCounter: chosen,
        SdkHistogram: chosen,
        # Up-down counters must stay cumulative (the SDK's own "delta" preset does the same).
        SdkUpDownCounter: AggregationTemporality.CUMULATIVE,
        SdkObservableUpDownCounter: AggregationTemporality.CUMULATIVE,
    }


class _Exporting(threading.local):
    """Per thread: what our exporter logged during the export it is in, or ``None`` outside one,
    and whether the export is an explicit flush's (whose failure the emitter reports)."""

    def __init__(self) -> None:
        self.messages: list[str] | None = None
        self.explicit = False


@contextlib.contextmanager
def explicit_flush() -> Iterator[None]:
    """Mark the exports this thread makes inside as an explicit flush's (the SDK runs them here)."""
    _exporting.explicit = True
    try:
        yield
    finally:
        _exporting.explicit = False


_exporting = _Exporting()


class _KeepForOurExporter(logging.Filter):
    """Keeps what *our* OTLP exporter logs while it exports, instead of logging it each time.

    A down endpoint would otherwise log an error on every export (every flush interval); the
    message becomes the reason in store-metrics' own "could not send" line, logged once.
    Other exporters in the process (Airflow's own, for example) log as usual.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        messages = _exporting.messages
        if messages is None or record.levelno < logging.WARNING:
            return True
        messages.append(record.getMessage())
        return False


_filter_lock = threading.Lock()
_filter_installed = False


def _install_exporter_filter() -> None:
    global _filter_installed
    with _filter_lock:
        if not _filter_installed:
            keep = _KeepForOurExporter()
            for name in _EXPORTER_LOGGERS:
                logging.getLogger(name).addFilter(keep)
            _filter_installed = True


class ResultRecorder(MetricExporter):
    """Delegates to the real exporter and remembers whether exports failed (and why)."""

    def __init__(self, inner: Any, endpoint: str = "") -> None:
        #: Where the exporter sends, for the reachability probe.
        self.endpoint = endpoint
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self.inner = inner
        self.failures = 0
        self.last_failure = ""
        #: Failed periodic exports: said once, and so is the next success.
        self._outage = logs.Outage("otlp:")
        #: Set when closing towards an endpoint that refuses: the final export is not attempted.
        self.unreachable = ""
        _install_exporter_filter()

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        if self.unreachable:
            self.failed(self.unreachable)
            return MetricExportResult.FAILURE
        messages: list[str] = []
        _exporting.messages = messages
        try:
            result: MetricExportResult = self.inner.export(
                metrics_data, timeout_millis=timeout_millis, **kwargs
            )
        except Exception as exc:
            # Not re-raised: the SDK would log it with a traceback on every export.
            result = MetricExportResult.FAILURE
            messages.append(f"{type(exc).__name__}: {exc}")
        finally:
            _exporting.messages = None
        if result is MetricExportResult.SUCCESS:
            self.succeeded()
        else:
            self.failed("; ".join(messages) or "the endpoint did not accept the export")
        return result

    def failed(self, reason: str) -> None:
        """Record a failed export (or a probe that found the endpoint down); say the periodic ones."""
        self.failures += 1
        self.last_failure = reason
        # An explicit flush's failure is the emitter's to say (and its recovery too).
        if not _exporting.explicit:
            self._outage.failed(
                "export",
                logging.WARNING,
                "store-metrics could not export to the OTLP endpoint %s: %s; the SDK tries again "
                "at its next export (cumulative counts catch up then, a delta export's counts are "
                "lost); not logged again until an export succeeds",
                self.endpoint,
                reason,
            )

    def succeeded(self) -> None:
        self._outage.recovered("store-metrics: exports to the OTLP endpoint %s work again", self.endpoint)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis=timeout_millis))

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)


def otlp_exporter(protocol: str, temporality: str, endpoint: str) -> ResultRecorder:
    """The OTLP metric exporter for ``protocol``, configured by the ``OTEL_EXPORTER_OTLP_*`` variables.

    ``endpoint`` is where those variables say it sends (what the reachability probe connects to).
    """
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
            OTLPMetricExporter,
        )
    return ResultRecorder(
        OTLPMetricExporter(preferred_temporality=preferred_temporality(temporality)), endpoint
    )


def unreachable(endpoint: str, timeout: float) -> str:
    """Why a TCP connection to ``endpoint`` (a URL, or ``host:port``) fails, or "" if it opens."""
    url = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    host = url.hostname or "localhost"
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
