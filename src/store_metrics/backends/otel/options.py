"""The ``otel`` backend's options: their defaults, and the checked values one backend keeps.

Everything here is decided at configuration time, on the configuring thread: a bad option or a
bad ``OTEL_EXPORTER_OTLP_PROTOCOL`` is a ``ConfigError`` then.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...config import options, validate

# Every option's accepted values and default come from the one option table.
EXPORTERS = options.OTEL_EXPORTERS
EXPOSITIONS = options.SERVER_EXPOSITIONS
TEMPORALITIES = options.OTEL_TEMPORALITIES
OTLP_PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_PROMETHEUS_PORT: int = options.default("prometheus_port")
DEFAULT_PROMETHEUS_HOST: str = options.default("prometheus_host")
DEFAULT_FLUSH_INTERVAL: float = options.default("flush_interval")
DEFAULT_MAX_SERIES: int = options.default("max_series")


def otlp_protocol_from_env() -> str:
    """``http/protobuf`` or ``grpc``, as the standard ``OTEL_EXPORTER_OTLP_*`` variables say."""
    value = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    return validate.choice("OTEL_EXPORTER_OTLP_PROTOCOL", value, OTLP_PROTOCOLS)


@dataclass(frozen=True)
class OtelOptions:
    """One backend's checked options (see ``store_metrics.backends.otel.create``)."""

    exporter: str
    prefix: str
    temporality: str
    prometheus_host: str
    #: The first port tried for the scrape endpoint (the one served may be higher).
    prometheus_port: int
    prometheus_port_tries: int
    export_interval: float
    service_name: str
    max_series: int
    #: ``service.instance.id`` of our own provider; empty: a new one per process.
    instance_id: str
    #: ``http/protobuf`` or ``grpc`` with the ``otlp`` exporter, else empty.
    otlp_protocol: str
    #: ``native`` or ``otel``: how the ``prometheus`` exporter's endpoint is served.
    exposition: str = "native"

    @classmethod
    def checked(
        cls,
        *,
        exporter: str,
        prefix: str,
        temporality: str,
        prometheus_host: str,
        prometheus_port: int,
        prometheus_port_tries: int,
        export_interval: float,
        service_name: str,
        max_series: int,
        instance_id: str,
        exposition: str = "native",
    ) -> OtelOptions:
        exporter = validate.choice("otel_exporter", exporter, EXPORTERS)
        return cls(
            exporter=exporter,
            prefix=validate.prefix("prefix", prefix),
            temporality=validate.choice("otel_temporality", temporality, TEMPORALITIES),
            prometheus_host=validate.host("prometheus_host", prometheus_host),
            prometheus_port=validate.port("prometheus_port", prometheus_port),
            prometheus_port_tries=max(1, prometheus_port_tries),
            export_interval=validate.positive_seconds("flush_interval", export_interval),
            service_name=service_name,
            max_series=max_series,
            instance_id=instance_id,
            # Read now so a bad OTEL_EXPORTER_OTLP_PROTOCOL is a configuration-time error.
            otlp_protocol=otlp_protocol_from_env() if exporter == "otlp" else "",
            exposition=validate.choice("server_exposition", exposition, EXPOSITIONS),
        )

    def otlp_endpoint(self) -> str:
        """Where OTLP goes, from the standard variables (the SDK's defaults when unset)."""
        default = "http://localhost:4317" if self.otlp_protocol == "grpc" else "http://localhost:4318"
        return (
            os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            or default
        )
