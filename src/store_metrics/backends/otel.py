"""The ``otel`` backend: OpenTelemetry observable counters read at collection time.

No OpenTelemetry call happens on a state store call: each catalogue counter is an
``ObservableCounter`` whose callback reads the emitter's in-memory totals when the SDK
collects (on its export interval, on an explicit flush, or on a Prometheus scrape).

Which ``MeterProvider``: the one passed in; else the global one if an SDK provider is set
(for example Airflow's own when ``[metrics] otel_on``); else one of our own, never installed
as the global, with a per-process ``service.instance.id`` and one reader:

* ``otlp``: OTLP over ``http/protobuf`` or ``grpc``, as the standard ``OTEL_EXPORTER_OTLP_*``
  variables say (endpoint, headers, protocol, timeout). Counters use **delta** temporality by
  default: task processes are short-lived, and a delta never has to be diffed against a
  previous process's value.
* ``prometheus``: a scrape endpoint (``prometheus_host:prometheus_port``, default ``:9464``).
* ``console``: prints every export, for debugging.

The exporter's packages are checked when the backend is configured, so a missing one is a
:class:`~store_metrics.errors.MissingExtraError` then, not a failure on the worker thread.

A failed OTLP export is not logged by the exporter on every attempt: what our own exporter
would log while it exports is kept and becomes the reason in store-metrics' "could not send"
line, logged once per process on an explicit flush (a task's end, process exit).

The instruments of one provider (and prefix) are created once per process and report the
sum over every emitter that used that provider: configuring again with the same provider (for
example the global one) keeps counting, and a closed emitter's totals stay in the sum so the
counters never go down.

Histograms and gauges (the API server side) have no asynchronous instrument in the Python SDK:
the emitter pushes them once per flush, on its worker thread. Each bucket's observations are
recorded into an SDK ``Histogram`` (created with the catalogue's bucket boundaries) as that
bucket's mean, so bucket counts and sums are exact; each gauge is set on an SDK ``Gauge``. The API
server's emitter uses ``cumulative`` temporality and its worker identity as
``service.instance.id``; with ``otel_exporter = prometheus`` each worker serves its own endpoint,
on the first free port from ``server_prometheus_port`` up.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
import socket
import threading
import urllib.parse
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import Counter as SdkCounter
from opentelemetry.sdk.metrics import Histogram as SdkHistogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics import ObservableCounter as SdkObservableCounter
from opentelemetry.sdk.metrics import ObservableUpDownCounter as SdkObservableUpDownCounter
from opentelemetry.sdk.metrics import UpDownCounter as SdkUpDownCounter
from opentelemetry.sdk.metrics import _Gauge as SdkGauge
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    ConsoleMetricExporter,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

from .. import __version__, catalogue, validate
from ..aggregator import DEFAULT_FLUSH_INTERVAL, DEFAULT_MAX_SERIES
from ..catalogue import DEFAULT_PREFIX, Metric
from ..emitter import Delta, GaugeValue, HistogramDelta, TotalsSource
from ..errors import MissingExtraError
from ..wire import TagTuple, full_name, sampled_observations

EXPORTERS = ("otlp", "prometheus", "console")
TEMPORALITIES = ("delta", "cumulative")
OTLP_PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_PROMETHEUS_PORT = 9464
DEFAULT_PROMETHEUS_HOST = "0.0.0.0"
METER_NAME = "store_metrics"


def _temporality(kind: str) -> dict[type, AggregationTemporality]:
    chosen = AggregationTemporality.DELTA if kind == "delta" else AggregationTemporality.CUMULATIVE
    return {
        SdkCounter: chosen,
        SdkObservableCounter: chosen,
        SdkHistogram: chosen,
        # Up-down counters must stay cumulative (the SDK's own "delta" preset does the same).
        SdkUpDownCounter: AggregationTemporality.CUMULATIVE,
        SdkObservableUpDownCounter: AggregationTemporality.CUMULATIVE,
    }


#: What each exporter needs besides the SDK: (importable module, distribution that brings it).
_EXPORTER_NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "otlp:http/protobuf": (
        ("opentelemetry.exporter.otlp.proto.http", "opentelemetry-exporter-otlp-proto-http"),
    ),
    "otlp:grpc": (
        ("opentelemetry.exporter.otlp.proto.grpc", "opentelemetry-exporter-otlp-proto-grpc"),
        ("grpc", "grpcio"),
    ),
    "prometheus": (
        ("opentelemetry.exporter.prometheus", "opentelemetry-exporter-prometheus"),
        ("prometheus_client", "prometheus-client"),
    ),
    "console": (),
}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _require_exporter(exporter: str, protocol: str) -> None:
    """Import the chosen exporter's packages now; raise :class:`MissingExtraError` if one is missing.

    Importing here, on the caller's thread at configuration time (about 40 ms for OTLP/HTTP),
    rather than in ``open()`` on the worker, also means a process that exits right after
    configuring cannot find its exporter half-imported during interpreter shutdown.
    """
    key = f"otlp:{protocol}" if exporter == "otlp" else exporter
    needs = _EXPORTER_NEEDS[key]
    for module, distribution in needs:
        if not _importable(module):
            raise MissingExtraError("otel", "otel", distribution)
    modules = [module for module, _ in needs]
    if exporter == "otlp":
        suffix = "grpc" if protocol == "grpc" else "http"
        modules.append(f"opentelemetry.exporter.otlp.proto.{suffix}.metric_exporter")
    distributions = {module.split(".")[0]: distribution for module, distribution in needs}
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing = (exc.name or module).split(".")[0]
            raise MissingExtraError("otel", "otel", distributions.get(missing, missing)) from exc


class _Observed:
    """What the instruments of one (provider, prefix) report: the sum over the emitters using it.

    Callbacks run on the SDK's collection thread. A closed emitter's totals are kept in
    ``retired`` so the cumulative value never goes down; in a forked child the parent's counts
    are dropped (the child counts from zero, like its emitter).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.sources: list[TotalsSource] = []
        self.retired: dict[str, dict[TagTuple, int]] = {}
        # Synchronous histograms and gauges of this provider, by metric name (made at first push).
        self.pushed: dict[str, Any] = {}

    def _adopt_process(self) -> None:
        # Caller holds self.lock.
        if self.pid != os.getpid():
            self.pid = os.getpid()
            self.sources = []
            self.retired = {}

    def attach(self, source: TotalsSource) -> None:
        with self.lock:
            self._adopt_process()
            if not any(s is source for s in self.sources):
                self.sources.append(source)

    def detach(self, source: TotalsSource) -> None:
        with self.lock:
            if self.pid != os.getpid() or not any(s is source for s in self.sources):
                return
            self.sources = [s for s in self.sources if s is not source]
            for metric in catalogue.all_counters():
                for tags, total in source.totals(metric):
                    bucket = self.retired.setdefault(metric.name, {})
                    bucket[tags] = bucket.get(tags, 0) + total

    def observe(self, metric: Metric) -> list[Observation]:
        with self.lock:
            # Inherited through fork() and not (yet) attached in this process: report nothing,
            # the parent's counts are the parent's.
            if self.pid != os.getpid():
                return []
            sources = list(self.sources)
            totals = dict(self.retired.get(metric.name, {}))
        for source in sources:
            for tags, total in source.totals(metric):
                totals[tags] = totals.get(tags, 0) + total
        return [Observation(total, dict(tags)) for tags, total in totals.items() if total]


# provider -> prefix -> its instruments' state. Weak: a provider that is dropped takes its entry.
_observed: weakref.WeakKeyDictionary[Any, dict[str, _Observed]] = weakref.WeakKeyDictionary()
_observed_lock = threading.Lock()


def _observed_for(provider: Any, prefix: str) -> tuple[_Observed, bool]:
    """The state of ``provider``'s instruments under ``prefix``; True if they must be created."""
    with _observed_lock:
        by_prefix = _observed.setdefault(provider, {})
        entry = by_prefix.get(prefix)
        if entry is not None:
            return entry, False
        entry = by_prefix[prefix] = _Observed()
        return entry, True


def _forget_provider(provider: Any) -> None:
    with _observed_lock:
        _observed.pop(provider, None)


def _otlp_protocol() -> str:
    value = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    return validate.choice("OTEL_EXPORTER_OTLP_PROTOCOL", value, OTLP_PROTOCOLS)


def _with_cardinality(factory: Callable[..., Any], limits: dict[type, int], **kwargs: Any) -> Any:
    # The SDK's default limit is 2000 series per instrument; ours is the emitter's max_series.
    # Older SDKs do not take the argument.
    if "cardinality_limits" in inspect.signature(factory).parameters:
        kwargs["cardinality_limits"] = limits
    return factory(**kwargs)


#: Loggers the OTLP exporters report a failed export on (one record per failed export).
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
)
# Set, on the thread doing it, while our own exporter exports: what the exporter logged.
_exporting = threading.local()


class _KeepForOurExporter(logging.Filter):
    """Keeps what *our* OTLP exporter logs while it exports, instead of logging it each time.

    A down endpoint would otherwise log an error on every export (every flush interval); the
    message becomes the reason in store-metrics' own "could not send" line, logged once.
    Other exporters in the process (Airflow's own, for example) log as usual.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        messages: list[str] | None = getattr(_exporting, "messages", None)
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


class _ResultRecorder(MetricExporter):
    """Delegates to the real exporter and remembers whether exports failed (and why)."""

    def __init__(self, inner: Any, endpoint: str = "") -> None:
        self.endpoint = endpoint
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self.inner = inner
        self.failures = 0
        self.last_failure = ""
        #: Set when closing towards an endpoint that refuses: the final export is not attempted.
        self.unreachable = ""
        _install_exporter_filter()

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        if self.unreachable:
            self.failures += 1
            self.last_failure = self.unreachable
            return MetricExportResult.FAILURE
        _exporting.messages = messages = []
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
        if result is not MetricExportResult.SUCCESS:
            self.failures += 1
            self.last_failure = "; ".join(messages) or "the endpoint did not accept the export"
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis=timeout_millis))

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)


_PROBE_TIMEOUT = 0.5


def _unreachable(endpoint: str, timeout: float) -> str:
    """Why a TCP connection to ``endpoint`` (a URL, or ``host:port``) fails, or "" if it opens."""
    url = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    host = url.hostname or "localhost"
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _has_pull_reader(provider: Any) -> bool:
    # PrometheusMetricReader queues one copy of every metric per force_flush and serves all of
    # them on the next scrape (duplicate series); a scrape endpoint needs no flushing anyway.
    readers = list(getattr(provider, "_metric_readers", ()) or ())
    readers += list(getattr(getattr(provider, "_sdk_config", None), "metric_readers", ()) or ())
    return any(type(reader).__name__ == "PrometheusMetricReader" for reader in readers)


class OtelBackend:
    """Observable counters over a given, global or own ``MeterProvider``."""

    pull = True
    #: open() registers instruments and builds a provider: no network I/O, so the emitter
    #: opens it at configure() time rather than on its worker.
    opens_without_io = True

    def __init__(
        self,
        *,
        meter_provider: Any,
        exporter: str,
        prefix: str,
        temporality: str,
        prometheus_host: str,
        prometheus_port: int,
        export_interval: float,
        service_name: str,
        max_series: int,
        instance_id: str = "",
        prometheus_port_tries: int = 1,
    ) -> None:
        self.exporter = exporter
        self.prefix = prefix
        self.temporality = temporality
        self.prometheus_host = prometheus_host
        self.prometheus_port = prometheus_port
        self.export_interval = export_interval
        self.service_name = service_name
        self.max_series = max_series
        # Decided now so a bad OTEL_EXPORTER_OTLP_PROTOCOL is a configuration-time error.
        self.otlp_protocol = _otlp_protocol() if exporter == "otlp" else ""
        self._given_provider = meter_provider
        self._provider: Any = None
        self._owned = False
        self._server: Any = None
        self._registry: Any = None
        self._source: TotalsSource | None = None
        self._observed: _Observed | None = None
        self._meter: Any = None
        #: service.instance.id of our own provider: given (the API server's worker), else per process.
        self.given_instance_id = instance_id
        self.instance_id = ""
        self.prometheus_port_tries = prometheus_port_tries
        self._prepared: Any = None
        self._prepared_resource: Resource | None = None
        self._prepared_pid = os.getpid()

    # -- describing --------------------------------------------------------------------------

    def otlp_endpoint(self) -> str:
        """Where OTLP goes, from the standard variables (the SDK's defaults when unset)."""
        default = "http://localhost:4317" if self.otlp_protocol == "grpc" else "http://localhost:4318"
        return (
            os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            or default
        )

    def describe(self) -> str:
        if self._given_provider is not None:
            where = "the MeterProvider passed in"
        elif self.exporter == "prometheus":
            where = f"prometheus scrape endpoint http://{self.prometheus_host}:{self.prometheus_port}/metrics"
        elif self.exporter == "otlp":
            where = f"otlp {self.otlp_protocol} to {self.otlp_endpoint()} ({self.temporality})"
        else:
            where = "console"
        return f"otel {where} prefix={self.prefix!r}"

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self, source: TotalsSource) -> None:
        self._source = source
        provider = self._given_provider
        if provider is None and not self._owned:
            current = otel_metrics.get_meter_provider()
            if isinstance(current, MeterProvider):
                provider = current
        if provider is None:
            # Our own provider (again after fork(): the child gets its own service.instance.id,
            # and the inherited provider's instruments report nothing in the child).
            provider = self._build_provider()
            self._owned = True
        self._provider = provider
        observed, create = _observed_for(provider, self.prefix)
        self._meter = provider.get_meter(METER_NAME, __version__)
        if create:
            self._create_instruments(observed)
        observed.attach(source)
        self._observed = observed

    def _create_instruments(self, observed: _Observed) -> None:
        meter = self._meter
        for metric in catalogue.all_counters():
            meter.create_observable_counter(
                full_name(self.prefix, metric.name),
                callbacks=[_callback(observed, metric)],
                unit=metric.unit,
                description=metric.description,
            )

    def _resource(self) -> Resource:
        prepared, self._prepared_resource = self._prepared_resource, None
        if prepared is not None and self._prepared_pid == os.getpid():
            self.instance_id = str(prepared.attributes["service.instance.id"])
            return prepared
        self.instance_id = self.given_instance_id or str(uuid.uuid4())
        # Resource.create runs its detectors on a thread pool: never do that at interpreter exit.
        resource = Resource.create({"service.instance.id": self.instance_id})
        # OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES win over our default service name.
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": self.service_name}))
        return resource

    def _build_provider(self) -> MeterProvider:
        resource = self._resource()
        limits: dict[type, int] = {
            kind: self.max_series + 1 for kind in (SdkObservableCounter, SdkHistogram, SdkGauge)
        }
        reader: MetricReader
        if self.exporter == "prometheus":
            reader = self._prometheus_reader(limits)
        else:
            exporter: Any
            if self.exporter == "otlp":
                exporter = self._otlp_exporter()
            else:
                exporter = ConsoleMetricExporter(preferred_temporality=_temporality(self.temporality))
            reader = _with_cardinality(
                PeriodicExportingMetricReader,
                limits,
                exporter=exporter,
                export_interval_millis=self.export_interval * 1000,
            )
        # shutdown_on_exit=False: the emitter's own exit hook shuts this down with a time bound;
        # the SDK's hook would wait for the exporter's full timeout on a dead endpoint.
        provider = MeterProvider(metric_readers=[reader], resource=resource, shutdown_on_exit=False)
        if self.exporter == "prometheus":
            # Serve only once the reader is registered: an earlier scrape would find nothing.
            self._start_prometheus_server()
        return provider

    def prepare(self) -> None:
        """Build the resource and the OTLP exporter now, on the configuring thread (no I/O).

        Otherwise the worker builds them in ``open()``; a process that exits right after
        configuring would then import ``requests``/``grpc`` and start the resource detectors'
        thread pool during interpreter shutdown, which fails, and its counts would be lost.
        """
        if self._given_provider is not None:
            return
        if self._prepared_resource is None:
            self._prepared_resource = self._resource()
        if self.exporter == "otlp" and self._prepared is None:
            self._prepared = self._otlp_exporter()

    def _otlp_exporter(self) -> Any:
        prepared, self._prepared = self._prepared, None
        if prepared is not None and self._prepared_pid == os.getpid():
            return prepared
        if self.otlp_protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
        self._recorder = _ResultRecorder(
            OTLPMetricExporter(preferred_temporality=_temporality(self.temporality)),
            # What the exporter read from the environment just now, for the reachability probe.
            endpoint=self.otlp_endpoint(),
        )
        return self._recorder

    def _prometheus_reader(self, limits: dict[type, int]) -> MetricReader:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry

        # A registry of our own: several emitters in one process must not collide in the global one.
        self._registry = CollectorRegistry(auto_describe=True)
        reader: MetricReader = _with_cardinality(PrometheusMetricReader, limits, registry=self._registry)
        return reader

    def _start_prometheus_server(self) -> None:
        from prometheus_client import start_http_server

        # Several API server workers on one host: each takes the first free port from the configured one.
        for port in range(self.prometheus_port, self.prometheus_port + self.prometheus_port_tries):
            try:
                server, _thread = start_http_server(port, self.prometheus_host, registry=self._registry)
            except OSError:
                if port + 1 >= min(65536, self.prometheus_port + self.prometheus_port_tries):
                    raise
                continue
            self._server = server
            self.prometheus_port = port
            return

    def export(self, deltas: Sequence[Delta]) -> None:
        # Counters are read by their callbacks; histograms and gauges are pushed here.
        observed = self._observed
        if observed is None:
            return
        for delta in deltas:
            if isinstance(delta, HistogramDelta):
                histogram = self._pushed(observed, delta.metric)
                attributes = dict(delta.tags)
                for value, n in sampled_observations(delta.buckets):
                    for _ in range(n):
                        histogram.record(value, attributes)
            elif isinstance(delta, GaugeValue):
                self._pushed(observed, delta.metric).set(delta.value, dict(delta.tags))

    def _pushed(self, observed: _Observed, metric: Metric) -> Any:
        with observed.lock:
            instrument = observed.pushed.get(metric.name)
            if instrument is None:
                name = full_name(self.prefix, metric.name)
                if metric.kind is catalogue.Kind.HISTOGRAM:
                    instrument = self._meter.create_histogram(
                        name,
                        unit=metric.unit,
                        description=metric.description,
                        explicit_bucket_boundaries_advisory=list(metric.buckets),
                    )
                else:
                    instrument = self._meter.create_gauge(
                        name, unit=metric.unit, description=metric.description
                    )
                observed.pushed[metric.name] = instrument
            return instrument

    def force_flush(self, timeout: float) -> None:
        provider = self._provider
        if provider is None or not hasattr(provider, "force_flush") or _has_pull_reader(provider):
            return
        recorder = getattr(self, "_recorder", None)
        if recorder is not None:
            # A refused or unresolvable endpoint would cost the whole timeout (the exporter
            # retries with back-off) at the end of every task while the collector is down; a
            # TCP connect says so in a millisecond. A slow collector still gets its time.
            endpoint = recorder.endpoint
            problem = _unreachable(endpoint, min(timeout, _PROBE_TIMEOUT))
            if problem:
                raise RuntimeError(f"the OTLP endpoint {endpoint} is unreachable: {problem}")
        before = recorder.failures if recorder is not None else 0
        provider.force_flush(timeout_millis=int(timeout * 1000))
        # The SDK's periodic reader logs a failed export and carries on; surface it so the
        # emitter logs it once and `store-metrics check` can say the target is not reachable.
        if recorder is not None and recorder.failures > before:
            raise RuntimeError(f"the OTLP export failed ({recorder.last_failure})")

    def close(self, timeout: float) -> None:
        if self._observed is not None and self._source is not None:
            self._observed.detach(self._source)
        if self._owned and self._provider is not None:
            recorder = getattr(self, "_recorder", None)
            if recorder is not None:
                # The shutdown's last export would retry a refusing endpoint for the exporter's
                # whole timeout on our worker; it cannot deliver anything, so do not try.
                recorder.unreachable = _unreachable(recorder.endpoint, min(timeout, _PROBE_TIMEOUT))
            self._provider.shutdown(timeout_millis=int(timeout * 1000))
            _forget_provider(self._provider)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._owned:
            self._provider = None

    def after_fork_in_child(self) -> None:
        if self._owned:
            # The child gets a provider (and service.instance.id) of its own on open().
            self._provider = None
            self._server = None


def _callback(observed: _Observed, metric: Metric) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return observed.observe(metric)

    return observe


def create(
    *,
    meter_provider: Any = None,
    exporter: str = "otlp",
    prefix: str = DEFAULT_PREFIX,
    temporality: str = "delta",
    prometheus_host: str = DEFAULT_PROMETHEUS_HOST,
    prometheus_port: int = DEFAULT_PROMETHEUS_PORT,
    export_interval: float = DEFAULT_FLUSH_INTERVAL,
    service_name: str = "airflow",
    max_series: int = DEFAULT_MAX_SERIES,
    instance_id: str = "",
    prometheus_port_tries: int = 1,
    **_: Any,
) -> OtelBackend:
    backend = OtelBackend(
        meter_provider=meter_provider,
        exporter=validate.choice("otel_exporter", exporter, EXPORTERS),
        prefix=validate.prefix("prefix", prefix),
        temporality=validate.choice("otel_temporality", temporality, TEMPORALITIES),
        prometheus_host=validate.host("prometheus_host", prometheus_host),
        prometheus_port=validate.port("prometheus_port", prometheus_port),
        export_interval=validate.positive_seconds("flush_interval", export_interval),
        service_name=service_name,
        max_series=max_series,
        instance_id=instance_id,
        prometheus_port_tries=max(1, prometheus_port_tries),
    )
    if meter_provider is None and not isinstance(otel_metrics.get_meter_provider(), MeterProvider):
        # We will build our own provider: its exporter must be installed.
        _require_exporter(backend.exporter, backend.otlp_protocol)
        backend.prepare()
    return backend
