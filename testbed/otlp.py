"""A real OTLP/HTTP metrics endpoint on 127.0.0.1 that decodes what the OpenTelemetry exporter sends.

:class:`OtlpReceiver` keeps every request; :meth:`OtlpReceiver.points` flattens them into one
:class:`OtlpPoint` per sum data point. An endpoint that hangs is :class:`testbed.endpoints.SilentTcpServer`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from testbed.endpoints import HttpPostSink


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
    """A real OTLP/HTTP metrics endpoint on 127.0.0.1 (``port``, or a free one) that keeps every
    decoded request; :meth:`close` and :meth:`reopen` take the same port down and back up."""

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
