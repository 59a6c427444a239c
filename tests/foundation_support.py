"""Helpers for the foundation tests: strict line parsers, real OTLP/HTTP receivers, tag sets.

Nothing here fakes a backend. ``OtlpReceiver`` is a real HTTP server on 127.0.0.1 that decodes
what the OpenTelemetry SDK's OTLP exporter POSTs; ``SilentTcpServer`` accepts connections and
never answers, which is what an OTLP endpoint that hangs looks like to the exporter.
"""

from __future__ import annotations

import gzip
import os
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from store_metrics import catalogue

#: The tag set of a task in the stories below.
TAGS = catalogue.task_tags(dag_id="d", task_id="t", run_type="manual", operator="X")
WIRE_TAGS = "dag_id=d,task_id=t,run_type=manual,operator=X"
DOG_TAGS = "dag_id:d,task_id:t,run_type:manual,operator:X"

#: Tag values that would break a line or inject a metric if written raw.
HOSTILE_VALUES = [
    "x\nairflow.evil:1|c",
    "a,b=c",
    "a|b#c:d",
    "with space",
    "tab\there",
    "cr\rlf\n",
    "caf\u00e9 \u65e5\u672c",
    "",
    "y" * 1000,
    "dag_id:d,task_id:t",
    "|#evil:1",
    "=,",
]

# Strict parsers: a line that does not match fails the test.
_INFLUX_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9_.]+)(?P<tags>(?:,[a-z_]+=[A-Za-z0-9_.\-]+)*):(?P<value>\d+)\|c$"
)
_DOG_TAG = r"[a-z_]+:[A-Za-z0-9_.\-]+"
_DOG_LINE = re.compile(
    rf"^(?P<name>[A-Za-z0-9_.]+):(?P<value>\d+)\|c(?:\|#(?P<tags>{_DOG_TAG}(?:,{_DOG_TAG})*))?$"
)


def parse_influx(line: str) -> tuple[str, dict[str, str], int]:
    match = _INFLUX_LINE.match(line)
    assert match, f"not one well-formed InfluxDB-StatsD counter line: {line!r}"
    tags = dict(pair.split("=", 1) for pair in match["tags"].split(",")[1:])
    return match["name"], tags, int(match["value"])


def parse_dogstatsd(line: str) -> tuple[str, dict[str, str], int]:
    match = _DOG_LINE.match(line)
    assert match, f"not one well-formed DogStatsD counter line: {line!r}"
    tags = dict(pair.split(":", 1) for pair in match["tags"].split(",")) if match["tags"] else {}
    return match["name"], tags, int(match["value"])


# -- OTLP over HTTP ----------------------------------------------------------------------------


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


def start_otlp_receiver() -> OtlpReceiver:
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

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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


def lines_until_marker(lines: list[str], marker: str) -> Iterator[str]:
    """The lines received before ``marker`` (which must have arrived)."""
    assert marker in lines, f"marker {marker!r} not received: {lines!r}"
    yield from lines[: lines.index(marker)]


class DictStore:
    """An in-memory stand-in for the supervisor round trip of Airflow's task store accessor.

    A fake only for the round trip (which needs a running Airflow): the wrappers around it are
    the real ones, and test_accessors.py checks this shape against Airflow 3.3.2's accessor.
    """

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data.pop(key, None)

    def clear(self) -> None:
        self.data.clear()


def airflow_statsd_env(airflow_home: Path, port: int) -> dict[str, str]:
    """This environment plus Airflow's own [metrics] StatsD (InfluxDB tags) to 127.0.0.1:``port``."""
    return {
        **os.environ,
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(port),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
    }
