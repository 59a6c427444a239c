"""The real peers, running: statsd_exporter, the OpenTelemetry Collector and Alertmanager, each the
pinned build ``scripts/setup dev`` made (``testbed.peers``), on free ports of 127.0.0.1.

Prometheus is ``support.prometheus.PrometheusServer`` (``role=`` picks a pin). Two fan-outs let
one sender feed several peers at once, byte for byte: ``UdpFanout`` (StatsD and DogStatsD
datagrams, each kept and forwarded unchanged to every target) and ``OtlpFanout`` (each OTLP/HTTP
request forwarded unchanged to every Collector), so one Airflow run reaches every pinned version.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from support.servers import ServerProcess
from testbed import peers
from testbed.ports import free_port
from testbed.udp import UdpReceiver

__all__ = [
    "Alertmanager",
    "Collector",
    "OtlpFanout",
    "StatsdExporter",
    "UdpFanout",
    "collector_config",
    "metric_names",
    "scrape",
    "send_lines",
]


def scrape(url: str, accept: str | None = None) -> str:
    """The text an endpoint serves (``accept``: the Accept header a scraper would send)."""
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.read().decode())


def send_lines(port: int, lines: Sequence[str], size: int = 1432) -> None:
    """StatsD ``lines`` to 127.0.0.1:``port``, newline-joined into datagrams of at most ``size``
    bytes (a longer line alone), as the backends pack them."""
    datagrams: list[bytes] = []
    for line in (text.encode() for text in lines):
        if datagrams and len(datagrams[-1]) + 1 + len(line) <= size:
            datagrams[-1] += b"\n" + line
        else:
            datagrams.append(line)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for datagram in datagrams:
            sock.sendto(datagram, ("127.0.0.1", port))


def metric_names(text: str, start: str = "", labelled: str | None = None) -> set[str]:
    """The metric names an exposition serves that begin with ``start`` (a counter's with ``_total``,
    a histogram by its family's name); with ``labelled``, only those of which some series has a
    label of that value."""
    return {
        family.name + ("_total" if family.type == "counter" else "")
        for family in text_string_to_metric_families(text)
        if family.name.startswith(start)
        and (labelled is None or any(labelled in sample.labels.values() for sample in family.samples))
    }


class StatsdExporter(ServerProcess):
    """statsd_exporter of the pin playing ``role`` (``chart``, ``minimum``) with ``mappings``, and
    ``extra`` flags."""

    def __init__(
        self, tmp: Path, role: str, mappings: Sequence[Mapping[str, Any]], extra: Sequence[str] = ()
    ) -> None:
        self.pin = peers.pin_for("statsd_exporter", role)
        self.udp_port = free_port(socket.SOCK_DGRAM)
        self.web_port = free_port()
        self.mapping = tmp / f"statsd-mapping-{self.pin.key}.yml"
        self.mapping.write_text(yaml.safe_dump({"mappings": list(mappings)}, sort_keys=False))
        command = [
            str(peers.binary("statsd_exporter", role)),
            f"--statsd.mapping-config={self.mapping}",
            f"--statsd.listen-udp=127.0.0.1:{self.udp_port}",
            "--statsd.listen-tcp=",
            f"--web.listen-address=127.0.0.1:{self.web_port}",
            *extra,
        ]
        super().__init__(command, tmp / f"{self.pin.key}.log", f"{self.url}")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.web_port}"

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"


def collector_config(
    shipped: Path,
    *,
    otlp_port: int,
    statsd_port: int,
    exporters: Mapping[str, tuple[int, str | None]],
) -> dict[str, Any]:
    """collector/otel-collector.yaml as shipped, but listening on 127.0.0.1 at free ports, its own
    telemetry off (every Collector would want :8888), and one Prometheus exporter per entry of
    ``exporters`` (name -> (port, translation_strategy or None for the shipped exporter's)), each
    fed by both pipelines. Everything else -- receivers' settings, processors, their order -- is the
    shipped file's."""
    config: dict[str, Any] = yaml.safe_load(shipped.read_text())
    config["receivers"]["otlp"]["protocols"] = {"http": {"endpoint": f"127.0.0.1:{otlp_port}"}}
    config["receivers"]["statsd"]["endpoint"] = f"127.0.0.1:{statsd_port}"
    shipped_exporter = config["exporters"]["prometheus"]
    config["exporters"] = {}
    for name, (port, strategy) in exporters.items():
        exporter = {**copy.deepcopy(shipped_exporter), "endpoint": f"127.0.0.1:{port}"}
        if strategy is not None:
            exporter["translation_strategy"] = strategy
        config["exporters"][name] = exporter
    for pipeline in config["service"]["pipelines"].values():
        pipeline["exporters"] = list(exporters)
    config["service"]["telemetry"] = {"metrics": {"level": "none"}}
    return config


class Collector(ServerProcess):
    """The OpenTelemetry Collector of the pin playing ``role`` (``newest``, ``minimum``).

    ``strategies`` names one Prometheus exporter per translation strategy (``None``: the shipped
    exporter as it is); ``endpoints`` maps each to its scrape URL.
    """

    def __init__(
        self, tmp: Path, role: str, shipped: Path, strategies: Sequence[str | None] = (None,)
    ) -> None:
        self.pin = peers.pin_for("otelcol", role)
        self.otlp_port = free_port()
        self.statsd_port = free_port(socket.SOCK_DGRAM)
        self.ports = {strategy: free_port() for strategy in strategies}
        exporters = {
            "prometheus" if strategy is None else f"prometheus/{strategy.lower()}": (port, strategy)
            for strategy, port in self.ports.items()
        }
        config = collector_config(
            shipped, otlp_port=self.otlp_port, statsd_port=self.statsd_port, exporters=exporters
        )
        self.config = tmp / f"otel-collector-{self.pin.key}.yaml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False))
        command = [str(peers.binary("otelcol", role)), f"--config={self.config}"]
        super().__init__(command, tmp / f"{self.pin.key}.log", self.url(strategies[0]))

    def target(self, strategy: str | None = None) -> str:
        return f"127.0.0.1:{self.ports[strategy]}"

    def url(self, strategy: str | None = None) -> str:
        return f"http://{self.target(strategy)}/metrics"

    @property
    def otlp_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.otlp_port}"

    def log_text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")


class Alertmanager(ServerProcess):
    """Alertmanager (the ``current`` pin) with the exported inhibit rules, routing to no receiver:
    a test reads what it received through its API (``/api/v2/alerts``)."""

    def __init__(self, tmp: Path, exported: Path) -> None:
        self.pin = peers.pin_for("alertmanager", "current")
        inhibit = yaml.safe_load((exported / "collector" / "alertmanager-inhibit.yml").read_text())
        config = {
            "route": {"receiver": "nowhere", "group_wait": "0s", "group_interval": "1s"},
            "receivers": [{"name": "nowhere"}],
            **inhibit,
        }
        path = tmp / "alertmanager.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = free_port()
        command = [
            str(peers.binary("alertmanager", "current")),
            f"--config.file={path}",
            f"--storage.path={tmp / 'alertmanager-data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
        ]
        super().__init__(command, tmp / "alertmanager.log", f"http://127.0.0.1:{self.port}/api/v2/status")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts it holds (active, silenced and inhibited alike)."""
        text = scrape(f"http://{self.target}/api/v2/alerts")
        alerts: list[dict[str, Any]] = json.loads(text)
        return alerts

    def holding(self, alertname: str) -> set[tuple[str, str]]:
        """(cluster, dag_id) of every alert named ``alertname`` it holds."""
        return {
            (a["labels"].get("cluster", ""), a["labels"].get("dag_id", ""))
            for a in self.alerts()
            if a["labels"].get("alertname") == alertname
        }


class UdpFanout(UdpReceiver):
    """A UDP socket on 127.0.0.1 that keeps every datagram (``lines``, as
    ``UdpReceiver``) and forwards it, unchanged, to every port of ``targets``."""

    def __init__(self, targets: Sequence[int]) -> None:
        self.targets = list(targets)
        self._out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        super().__init__()

    def _keep(self, data: bytes) -> None:
        super()._keep(data)
        for port in self.targets:
            self._out.sendto(data, ("127.0.0.1", port))

    def close(self) -> None:
        super().close()
        self._out.close()


class OtlpProxy:
    """An OTLP/HTTP endpoint on 127.0.0.1 that forwards each request, body and content headers
    unchanged, to the upstreams (base URLs) ``connected`` picks for its connection, and answers with
    the first one's answer. As it is, every connection goes to every upstream (``OtlpFanout``)."""

    HEADERS = ("Content-Type", "Content-Encoding")
    #: HTTP/1.0 closes each connection after one request; HTTP/1.1 keeps it for the next ones.
    protocol_version = "HTTP/1.0"

    def __init__(self, upstreams: Sequence[str]) -> None:
        self.upstreams = list(upstreams)
        self.requests = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = proxy.protocol_version

            def setup(self) -> None:
                super().setup()
                self.targets = proxy.connected()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {name: self.headers[name] for name in proxy.HEADERS if self.headers.get(name)}
                answers = [proxy.forward(base + self.path, body, headers) for base in self.targets]
                proxy.requests += 1
                status, content_type, answer = answers[0]
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def connected(self) -> list[str]:
        """The upstreams the requests of a new connection go to: all of them."""
        return self.upstreams

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @staticmethod
    def forward(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers.get("Content-Type", ""), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Content-Type", ""), exc.read()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class OtlpFanout(OtlpProxy):
    """An OTLP/HTTP endpoint on 127.0.0.1 that forwards each request, body and content headers
    unchanged, to every base URL of ``upstreams`` and answers with the first one's answer."""
