"""A real OTLP/HTTP endpoint on 127.0.0.1 that decodes what the OpenTelemetry exporters send.

``OtlpReceiver`` keeps every request: metrics (any path but ``/v1/traces``) and traces
(``/v1/traces``). ``OtlpReceiver.points`` flattens the metrics into one ``OtlpPoint`` per
sum data point, ``OtlpReceiver.spans`` the traces into one ``OtlpSpan`` per span. An
endpoint that hangs is ``testbed.endpoints.SilentTcpServer``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

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


#: The OTLP/HTTP path of trace exports (every other path is taken for metrics).
TRACES_PATH = "/v1/traces"


@dataclass
class OtlpSpan:
    """One span of one OTLP trace export; ids as hex, ``parent_id`` empty for a root span."""

    name: str
    kind: int  # opentelemetry.proto.trace.v1.Span.SpanKind: 3 is CLIENT
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    scope: str
    resource: dict[str, str]
    status_code: int  # 2 is ERROR
    events: list[tuple[str, dict[str, Any]]]
    start_ns: int


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class OtlpReceiver(HttpPostSink):
    """A real OTLP/HTTP metrics endpoint on 127.0.0.1 (``port``, or a free one) that keeps every
    decoded request; ``close`` and ``reopen`` take the same port down and back up."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.paths: list[str] = []
        self.trace_requests: list[ExportTraceServiceRequest] = []
        self.lock = threading.Lock()
        super().__init__(port)

    def take(self, path: str, body: bytes) -> None:
        if path == TRACES_PATH:
            traces = ExportTraceServiceRequest()
            traces.ParseFromString(body)
            with self.lock:
                self.trace_requests.append(traces)
            return
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

    def spans(self) -> list[OtlpSpan]:
        """Every span of every trace export received so far, in the order they arrived."""
        with self.lock:
            requests = list(self.trace_requests)
        out = []
        for request in requests:
            for rs in request.resource_spans:
                resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        out.append(
                            OtlpSpan(
                                name=span.name,
                                kind=span.kind,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                scope=ss.scope.name,
                                resource=resource,
                                status_code=span.status.code,
                                events=[
                                    (e.name, {a.key: _value(a.value) for a in e.attributes})
                                    for e in span.events
                                ],
                                start_ns=span.start_time_unix_nano,
                            )
                        )
        return out
