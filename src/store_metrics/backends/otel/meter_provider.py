"""Our own ``MeterProvider``: its resource, its one reader, and how it is flushed and shut down.

Built only when no provider is passed in and no SDK provider is the global one; never installed
as the global. It has a per-process ``service.instance.id`` (or the API server worker's) and one
reader:

* ``otlp``: a periodic reader over the OTLP exporter (``exporter``);
* ``prometheus``: a scrape endpoint served from a registry of our own, on the first free port
  from ``prometheus_port`` (several API server workers on one host each take their own);
* ``console``: a periodic reader that prints every export, for debugging.
"""

from __future__ import annotations

import inspect
import os
import uuid
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import Histogram as SdkHistogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics import ObservableCounter as SdkObservableCounter
from opentelemetry.sdk.metrics import _Gauge as SdkGauge
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

from .exporter import (
    PROBE_TIMEOUT,
    ResultRecorder,
    explicit_flush,
    otlp_exporter,
    preferred_temporality,
    unreachable,
)
from .options import OtelOptions


def _with_cardinality(factory: Callable[..., Any], limits: dict[type, int], **kwargs: Any) -> Any:
    # The SDK's default limit is 2000 series per instrument; ours is the emitter's max_series.
    # Older SDKs do not take the argument.
    if "cardinality_limits" in inspect.signature(factory).parameters:
        kwargs["cardinality_limits"] = limits
    return factory(**kwargs)


def has_pull_reader(provider: Any) -> bool:
    """Whether ``provider`` (any SDK provider, ours or not) is read by a Prometheus scrape."""
    # PrometheusMetricReader queues one copy of every metric per force_flush and serves all of
    # them on the next scrape (duplicate series); a scrape endpoint needs no flushing anyway.
    # The SDK keeps its readers in private attributes, which differ between SDK versions.
    readers = list(getattr(provider, "_metric_readers", ()) or ())
    readers += list(getattr(getattr(provider, "_sdk_config", None), "metric_readers", ()) or ())
    return any(type(reader).__name__ == "PrometheusMetricReader" for reader in readers)


def flush(provider: Any, timeout: float) -> None:
    """Make a provider that is not ours export now (a scrape endpoint's needs no flushing)."""
    if hasattr(provider, "force_flush") and not has_pull_reader(provider):
        provider.force_flush(timeout_millis=int(timeout * 1000))


class OwnProvider:
    """The provider store-metrics builds for itself, once per process (again after ``fork()``)."""

    def __init__(self, settings: OtelOptions) -> None:
        self.settings = settings
        #: The provider built in this process, until it is shut down.
        self.provider: MeterProvider | None = None
        #: ``service.instance.id`` of the resource (empty until one is made).
        self.instance_id = ""
        #: The port the scrape endpoint serves on: the first free one from the configured port.
        self.prometheus_port = settings.prometheus_port
        #: The OTLP exporter's wrapper, once made: its endpoint, and whether exports failed.
        self.recorder: ResultRecorder | None = None
        self._server: Any = None
        self._registry: Any = None
        self._prepared_resource: Resource | None = None
        self._prepared_exporter: ResultRecorder | None = None
        self._prepared_pid = os.getpid()

    def prepare(self) -> None:
        """Build the resource and the OTLP exporter now, on the configuring thread (no I/O).

        Otherwise ``build`` makes them, maybe on the emitter's worker; a process that exits
        right after configuring would then import ``requests``/``grpc`` and start the resource
        detectors' thread pool during interpreter shutdown, which fails, and its counts would be lost.
        """
        if self._prepared_resource is None:
            self._prepared_resource = self._resource()
        if self.settings.exporter == "otlp" and self._prepared_exporter is None:
            self._prepared_exporter = self._otlp_exporter()

    def resource(self) -> Resource:
        """This process's resource (``service.instance.id`` and the rest), as the provider gets it."""
        return self._resource()

    def _resource(self) -> Resource:
        prepared, self._prepared_resource = self._prepared_resource, None
        if prepared is not None and self._prepared_pid == os.getpid():
            self.instance_id = str(prepared.attributes["service.instance.id"])
            return prepared
        self.instance_id = self.settings.instance_id or str(uuid.uuid4())
        # Resource.create runs its detectors on a thread pool: never do that at interpreter exit.
        resource = Resource.create({"service.instance.id": self.instance_id})
        # OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES win over our default service name.
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": self.settings.service_name}))
        return resource

    def _otlp_exporter(self) -> ResultRecorder:
        prepared, self._prepared_exporter = self._prepared_exporter, None
        if prepared is not None and self._prepared_pid == os.getpid():
            return prepared
        settings = self.settings
        # The endpoint the exporter read from the environment just now, for the reachability probe.
        self.recorder = otlp_exporter(settings.otlp_protocol, settings.temporality, settings.otlp_endpoint())
        return self.recorder

    def build(self) -> MeterProvider:
        """A new provider for this process, with its reader (and its scrape endpoint, serving)."""
        settings = self.settings
        resource = self._resource()
        limits: dict[type, int] = {
            kind: settings.max_series + 1 for kind in (SdkObservableCounter, SdkHistogram, SdkGauge)
        }
        reader: MetricReader
        if settings.exporter == "prometheus":
            reader = self._prometheus_reader(limits)
        else:
            exporter: Any
            if settings.exporter == "otlp":
                exporter = self._otlp_exporter()
            else:
                exporter = ConsoleMetricExporter(
                    preferred_temporality=preferred_temporality(settings.temporality)
                )
            reader = _with_cardinality(
                PeriodicExportingMetricReader,
                limits,
                exporter=exporter,
                export_interval_millis=settings.export_interval * 1000,
            )
        # shutdown_on_exit=False: the emitter's own exit hook shuts this down with a time bound;
        # the SDK's hook would wait for the exporter's full timeout on a dead endpoint.
        provider = MeterProvider(metric_readers=[reader], resource=resource, shutdown_on_exit=False)
        if settings.exporter == "prometheus":
            # Serve only once the reader is registered: an earlier scrape would find nothing.
            self._serve_prometheus()
        self.provider = provider
        return provider

    def _prometheus_reader(self, limits: dict[type, int]) -> MetricReader:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry

        # A registry of our own: several emitters in one process must not collide in the global one.
        self._registry = CollectorRegistry(auto_describe=True)
        reader: MetricReader = _with_cardinality(PrometheusMetricReader, limits, registry=self._registry)
        return reader

    def _serve_prometheus(self) -> None:
        from prometheus_client import start_http_server

        first, tries, host = (
            self.settings.prometheus_port,
            self.settings.prometheus_port_tries,
            self.settings.prometheus_host,
        )
        # Several API server workers on one host: each takes the first free port from the configured one.
        for port in range(first, first + tries):
            try:
                server, _thread = start_http_server(port, host, registry=self._registry)
            except OSError:
                if port + 1 >= min(65536, first + tries):
                    raise
                continue
            self._server = server
            self.prometheus_port = port
            return

    def force_flush(self, timeout: float) -> None:
        """Export now; raise if the OTLP endpoint is unreachable or the export failed."""
        provider = self.provider
        if provider is None or has_pull_reader(provider):
            return
        recorder = self.recorder
        if recorder is not None:
            # A refused or unresolvable endpoint would cost the whole timeout (the exporter
            # retries with back-off) at the end of every task while the collector is down; a
            # TCP connect says so in a millisecond. A slow collector still gets its time.
            endpoint = recorder.endpoint
            problem = unreachable(endpoint, min(timeout, PROBE_TIMEOUT))
            if problem:
                with explicit_flush():
                    recorder.failed(problem)
                raise RuntimeError(f"the OTLP endpoint {endpoint} is unreachable: {problem}")
        before = recorder.failures if recorder is not None else 0
        with explicit_flush():
            provider.force_flush(timeout_millis=int(timeout * 1000))
        # The SDK's periodic reader logs a failed export and carries on; surface it so the
        # emitter logs it once and `store-metrics check` can say the target is not reachable.
        if recorder is not None and recorder.failures > before:
            raise RuntimeError(f"the OTLP export failed ({recorder.last_failure})")

    def shutdown(self, timeout: float) -> None:
        """Shut the provider down (its last export included) and stop serving the scrape endpoint."""
        provider, self.provider = self.provider, None
        if provider is not None:
            recorder = self.recorder
            if recorder is not None:
                # The shutdown's last export would retry a refusing endpoint for the exporter's
                # whole timeout on our worker; it cannot deliver anything, so do not try.
                recorder.unreachable = unreachable(recorder.endpoint, min(timeout, PROBE_TIMEOUT))
            provider.shutdown(timeout_millis=int(timeout * 1000))
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def after_fork_in_child(self) -> None:
        # The parent's provider, reader thread and server are the parent's: the child builds its
        # own (with a service.instance.id of its own) on open().
        self.provider = None
        self._server = None
