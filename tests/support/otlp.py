"""OTLP/HTTP endpoints on 127.0.0.1: one that decodes what the exporter sends, one that hangs.

``OtlpReceiver`` is a real HTTP server that decodes what the OpenTelemetry SDK's OTLP exporter
POSTs; ``SilentTcpServer`` (from :mod:`testbed.endpoints`, which the benchmarks share) accepts
connections and never sends a byte back, which is what an OTLP endpoint that hangs looks like to
the exporter.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from testbed.endpoints import HttpPostSink, SilentTcpServer

__all__ = ["OtlpPoint", "OtlpReceiver", "SilentTcpServer", "start_otlp_receiver"]


@dataclass
class OtlpPoint:
    """One data point of one metric in one OTLP request."""

    name: str
    attributes: dict[str, str]
    value: int
    temporality: int
    monotonic: bool
    resource: dict[str, str]
    start_ns: int
    time_ns: int


class OtlpReceiver(HttpPostSink):
    """A real OTLP/HTTP metrics endpoint on 127.0.0.1 that keeps every decoded request."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()
        super().__init__(port)

    def take(self, path: str, body: bytes) -> None:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            self.requests.append(request)
            self.paths.append(path)

    def points(self) -> list[OtlpPoint]:
        with self.lock:
            requests = list(self.requests)
        out = []
        for request in requests:
            for rm in request.resource_metrics:
                resource = {a.key: a.value.string_value for a in rm.resource.attributes}
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        for p in metric.sum.data_points:
                            out.append(
                                OtlpPoint(
                                    name=metric.name,
                                    attributes={a.key: a.value.string_value for a in p.attributes},
                                    value=p.as_int,
                                    temporality=metric.sum.aggregation_temporality,
                                    monotonic=metric.sum.is_monotonic,
                                    resource=resource,
                                    start_ns=p.start_time_unix_nano,
                                    time_ns=p.time_unix_nano,
                                )
                            )
        return out


def start_otlp_receiver(port: int = 0) -> OtlpReceiver:
    """Serve on ``port`` (a free one by default; a given one to bring an endpoint back up)."""
    return OtlpReceiver(port)
