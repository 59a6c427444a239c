"""OTLP/HTTP endpoints on 127.0.0.1: one that decodes what the exporter sends, one that hangs.

``OtlpReceiver`` is a real HTTP server that decodes what the OpenTelemetry SDK's OTLP exporter
POSTs; ``SilentTcpServer`` accepts connections and never sends a byte back, which is what an
OTLP endpoint that hangs looks like to the exporter.
"""

from __future__ import annotations

import gzip
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest


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


@dataclass
class OtlpReceiver:
    """A real OTLP/HTTP metrics endpoint on 127.0.0.1 that keeps every decoded request."""

    server: ThreadingHTTPServer
    requests: list[ExportMetricsServiceRequest] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1/metrics"

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

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_otlp_receiver(port: int = 0) -> OtlpReceiver:
    """Serve on ``port`` (a free one by default; a given one to bring an endpoint back up)."""
    holder: dict[str, OtlpReceiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportMetricsServiceRequest()
            request.ParseFromString(body)
            receiver = holder["r"]
            with receiver.lock:
                receiver.requests.append(request)
                receiver.paths.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    receiver = holder["r"] = OtlpReceiver(server)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return receiver


class SilentTcpServer:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte back."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.05)
        self.port: int = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        for conn in self.accepted:
            conn.close()
        self.sock.close()
