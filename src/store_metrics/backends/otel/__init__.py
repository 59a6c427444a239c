"""The ``otel`` backend: OpenTelemetry instruments on a given, global or own ``MeterProvider``.

No OpenTelemetry call happens on a state store call: each catalogue counter is an
``ObservableCounter`` whose callback reads the emitters' in-memory totals when the SDK collects
(on its export interval, on an explicit flush, or on a Prometheus scrape).

Which ``MeterProvider``: the one passed in; else the global one if an SDK provider is set (for
example Airflow's own when ``[metrics] otel_on``); else one of our own, never installed as the
global, with a per-process ``service.instance.id`` and one reader (``provider``):

* ``otlp``: OTLP over ``http/protobuf`` or ``grpc``, as the standard ``OTEL_EXPORTER_OTLP_*``
  variables say (endpoint, headers, protocol, timeout). Counters use **delta** temporality by
  default: task processes are short-lived, and a delta never has to be diffed against a
  previous process's value.
* ``prometheus``: a scrape endpoint (``prometheus_host:prometheus_port``, default ``:9464``).
* ``console``: prints every export, for debugging.

The exporter's packages are checked when the backend is configured (``dependencies``), so a
missing one is a ``MissingExtraError`` then, not a failure on the
worker thread. A failed OTLP export is said once, with its reason (``exporter``).

The instruments of one provider (and prefix) are created once per process and report the sum
over every emitter that used that provider (``instruments``, ``observed``): configuring
again with the same provider keeps counting, and a closed emitter's totals stay in the sum so
the counters never go down.

Histograms (the API server side) are **live**: the emitter hands every observation to
``OtelBackend.record_histogram`` as it happens, which records it into the SDK ``Histogram``
(created with the catalogue's bucket boundaries) on the caller's thread, in memory. The SDK
aggregates, so an export costs O(series), however many observations there were. Observations
made before the backend was open in this process still arrive as a ``HistogramDelta`` in
``OtelBackend.export``, recorded as each bucket's mean so bucket counts and sums stay exact.
Gauges are pushed once per flush and set on an SDK ``Gauge``. The API server's emitter uses
``cumulative`` temporality and its worker identity as ``service.instance.id``; with
``otel_exporter = prometheus`` each worker serves its own endpoint, on the first free port from
``server_prometheus_port`` up.

With ``otel_exporter = prometheus`` and our own provider, ``server_exposition = native`` (the
default) serves that endpoint without the SDK: the same text, rendered incrementally off any
event loop (``exposition``); ``otel`` keeps the SDK's ``PrometheusMetricReader``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics as otel_metrics
from opentelemetry.sdk.metrics import MeterProvider

from ...catalogue import Metric
from ...config.options import default
from ...contracts import TotalsSource
from ...deltas import Delta, GaugeValue, HistogramDelta, TagTuple, sampled_observations
from ...errors import PartialExport
from . import meter_provider as _provider
from .dependencies import require_exporter
from .instruments import METER_NAME, Instruments, forget, instruments_for
from .meter_provider import OwnProvider
from .options import (
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_MAX_SERIES,
    DEFAULT_PROMETHEUS_HOST,
    DEFAULT_PROMETHEUS_PORT,
    EXPORTERS,
    OTLP_PROTOCOLS,
    TEMPORALITIES,
    OtelOptions,
)

if TYPE_CHECKING:
    from .exposition import NativeExposition

__all__ = [
    "DEFAULT_FLUSH_INTERVAL",
    "DEFAULT_MAX_SERIES",
    "DEFAULT_PROMETHEUS_HOST",
    "DEFAULT_PROMETHEUS_PORT",
    "EXPORTERS",
    "METER_NAME",
    "OTLP_PROTOCOLS",
    "TEMPORALITIES",
    "OtelBackend",
    "OtelOptions",
    "create",
]


class OtelBackend:
    """The Backend (and LiveHistograms) protocol over a given, global or own ``MeterProvider``."""

    pull = True
    #: open() registers instruments and builds a provider: no network I/O, so the emitter
    #: opens it at configure() time rather than on its worker.
    opens_without_io = True
    #: Histogram observations are recorded into the SDK as they happen (record_histogram).
    live_histograms = True
    sends_nowhere = False

    def __init__(self, settings: OtelOptions, meter_provider: Any = None) -> None:
        self.settings = settings
        self._given_provider = meter_provider
        #: Built and used only when no provider is given and no SDK provider is the global one.
        self.own = OwnProvider(settings)
        self._owned = False
        self._provider: Any = None
        self._source: TotalsSource | None = None
        self._instruments: Instruments | None = None
        # The attributes dict of each tag set, made once: record_histogram runs on the API
        # server's request path. Bounded like the emitter's series.
        self._attributes: dict[TagTuple, dict[str, str]] = {}
        #: The native scrape endpoint, while open (``server_exposition = native``).
        self.native: NativeExposition | None = None

    # -- describing --------------------------------------------------------------------------

    @property
    def exporter(self) -> str:
        return self.settings.exporter

    @property
    def prefix(self) -> str:
        return self.settings.prefix

    @property
    def temporality(self) -> str:
        return self.settings.temporality

    @property
    def otlp_protocol(self) -> str:
        return self.settings.otlp_protocol

    @property
    def prometheus_port(self) -> int:
        """The port the scrape endpoint serves on (the first free one from the configured port)."""
        return self.own.prometheus_port

    @property
    def meter_provider(self) -> Any:
        """The ``MeterProvider`` the instruments live on, once open (``None`` before)."""
        return self._provider

    @property
    def instance_id(self) -> str:
        """``service.instance.id`` of our own provider ("" when the provider is not ours)."""
        return self.own.instance_id

    def otlp_endpoint(self) -> str:
        """Where OTLP goes, from the standard variables (the SDK's defaults when unset)."""
        return self.settings.otlp_endpoint()

    def describe(self) -> str:
        if self._given_provider is not None:
            where = "the MeterProvider passed in"
        elif self.exporter == "prometheus":
            address = f"{self.settings.prometheus_host}:{self.prometheus_port}"
            where = f"prometheus scrape endpoint http://{address}/metrics ({self.exposition} exposition)"
        elif self.exporter == "otlp":
            where = f"otlp {self.otlp_protocol} to {self.otlp_endpoint()} ({self.temporality})"
        else:
            where = "console"
        return f"otel {where} prefix={self.prefix!r}"

    # -- lifecycle ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Make our own provider's resource and exporter now, on the configuring thread (no I/O)."""
        if self._given_provider is None:
            self.own.prepare()

    @property
    def exposition(self) -> str:
        """``native`` or ``otel``: how the scrape endpoint is served (``otel`` unless ours and prometheus)."""
        return "native" if self._native_applies() else "otel"

    def _native_applies(self) -> bool:
        return (
            self.settings.exporter == "prometheus"
            and self.settings.exposition == "native"
            and self._given_provider is None
            and (self._owned or not isinstance(otel_metrics.get_meter_provider(), MeterProvider))
        )

    def open(self, source: TotalsSource) -> None:
        if self._native_applies() and hasattr(source, "series_of"):
            self._open_native(source)
            return
        provider = self._given_provider
        if provider is None and not self._owned:
            current = otel_metrics.get_meter_provider()
            if isinstance(current, MeterProvider):
                provider = current
        if provider is None:
            # Our own provider (again after fork(): the child gets its own service.instance.id,
            # and the inherited provider's instruments report nothing in the child).
            provider = self.own.provider or self.own.build()
            self._owned = True
        self._provider = provider
        instruments = instruments_for(provider, self.prefix)
        instruments.observed.attach(source)
        self._source = source
        self._instruments = instruments

    def _open_native(self, source: Any) -> None:
        settings = self.settings
        native = self.native
        if native is None:
            # Imported here: it needs the prometheus exporter's packages, which OTLP users may lack.
            from .exposition import NativeExposition

            resource = self.own.resource()
            native = NativeExposition(settings.prefix, resource.attributes)
            native.attach(source)
            self.own.prometheus_port = native.serve(
                settings.prometheus_host, settings.prometheus_port, settings.prometheus_port_tries
            )
            self.native = native
        else:
            native.attach(source)
        self._owned = True
        self._source = source

    def record_histogram(self, metric: Metric, tags: TagTuple, value: float) -> None:
        """Record one observation into the SDK histogram, on the caller's thread (in memory)."""
        if self.native is not None:
            self.native.record_histogram(metric, tags, value)
            return
        instruments = self._instruments
        if instruments is None:
            raise RuntimeError("the otel backend is not open in this process")
        attributes = self._attributes.get(tags)
        if attributes is None:
            attributes = self._attributes_of(tags)
        instruments.histogram(metric).record(value, attributes)

    def _attributes_of(self, tags: TagTuple) -> dict[str, str]:
        if len(self._attributes) >= self.settings.max_series:
            self._attributes = {}
        # The SDK copies the dict it is given, so sharing one per tag set is safe.
        attributes = self._attributes[tags] = dict(tags)
        return attributes

    def export(self, deltas: Sequence[Delta]) -> None:
        # Counters are read by their callbacks; gauges, and histogram observations made before
        # the backend was open in this process, are pushed here.
        native = self.native
        if native is not None:
            for delta in deltas:
                if isinstance(delta, HistogramDelta):
                    native.add_histogram(delta)
                elif isinstance(delta, GaugeValue):
                    native.set_gauge(delta.metric, delta.tags, delta.value)
            return
        instruments = self._instruments
        if instruments is None:
            raise RuntimeError("the otel backend is not open in this process")
        for done, delta in enumerate(deltas):
            try:
                self._push(instruments, delta)
            except Exception as exc:
                if not done:
                    raise
                raise PartialExport(deltas[done:], f"{type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _push(instruments: Instruments, delta: Delta) -> None:
        if isinstance(delta, HistogramDelta):
            # Each bucket's observations as that bucket's mean: the bucket counts and the sum are
            # exact. One record() per observation, but only for what was observed before open.
            histogram = instruments.histogram(delta.metric)
            attributes = dict(delta.tags)
            for value, n in sampled_observations(delta.buckets):
                for _ in range(n):
                    histogram.record(value, attributes)
        elif isinstance(delta, GaugeValue):
            instruments.gauge(delta.metric).set(delta.value, dict(delta.tags))

    def force_flush(self, timeout: float) -> None:
        if self.native is not None:
            return
        if self._owned:
            self.own.force_flush(timeout)
        elif self._provider is not None:
            _provider.flush(self._provider, timeout)

    def close(self, timeout: float) -> None:
        if self.native is not None:
            native, self.native = self.native, None
            native.close()
            return
        if self._instruments is not None and self._source is not None:
            self._instruments.observed.detach(self._source)
        if self._owned:
            provider = self.own.provider
            self.own.shutdown(timeout)
            if provider is not None:
                forget(provider)
            self._provider = None

    def after_fork_in_child(self) -> None:
        if self.native is not None:
            # The parent's endpoint is the parent's: the child serves its own on open().
            self.native.after_fork_in_child()
            self.native = None
            self.own.after_fork_in_child()
            return
        if self._owned:
            # The child gets a provider (and service.instance.id) of its own on open().
            self.own.after_fork_in_child()
            self._provider = None
            self._instruments = None


def create(
    *,
    meter_provider: Any = None,
    exporter: str = default("otel_exporter"),
    prefix: str = default("prefix"),
    temporality: str = default("otel_temporality"),
    prometheus_host: str = DEFAULT_PROMETHEUS_HOST,
    prometheus_port: int = DEFAULT_PROMETHEUS_PORT,
    export_interval: float = DEFAULT_FLUSH_INTERVAL,
    service_name: str = default("service_name"),
    max_series: int = DEFAULT_MAX_SERIES,
    instance_id: str = default("instance_id"),
    prometheus_port_tries: int = default("prometheus_port_tries"),
    exposition: str = default("server_exposition"),
) -> OtelBackend:
    """Check the options and build the backend (no I/O; ``OtelBackend.open`` registers).

    When the provider will be our own (none passed in, no SDK provider set as the global one),
    the exporter's packages must be installed: checked and imported now.
    """
    settings = OtelOptions.checked(
        exporter=exporter,
        prefix=prefix,
        temporality=temporality,
        prometheus_host=prometheus_host,
        prometheus_port=prometheus_port,
        prometheus_port_tries=prometheus_port_tries,
        export_interval=export_interval,
        service_name=service_name,
        max_series=max_series,
        instance_id=instance_id,
        exposition=exposition,
    )
    backend = OtelBackend(settings, meter_provider)
    if meter_provider is None and not isinstance(otel_metrics.get_meter_provider(), MeterProvider):
        require_exporter(settings.exporter, settings.otlp_protocol)
        backend.prepare()
    return backend
