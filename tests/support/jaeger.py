"""A real Jaeger v2 (the pinned build, ``testbed.peers``) on free ports of 127.0.0.1, and its
query API read back as spans.

The configuration is the one docs/traces.md shows under "Seeing it in Jaeger" (read from that page,
so the page shows what the tests run): OTLP in, the memory storage, the query service. Only the
addresses change (free ports of 127.0.0.1 instead of the documented ones) and Jaeger's own telemetry
is off (it would want :8888, as every Collector does). A trace is found the way Jaeger's UI finds
one (``/api/traces`` by service and tag) and read back whole through the API v3
(``/api/v3/traces/{trace_id}``), whose answer is OTLP/JSON: the spans as Airflow exported them.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from support.servers import ServerProcess
from testbed import peers
from testbed.ports import free_port
from testbed.waiting import wait_until

__all__ = ["DOCS", "Jaeger", "JaegerSpan", "documented_config", "spans_of"]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "traces.md"
SECTION = "## Seeing it in Jaeger"


def documented_config(page: Path = DOCS) -> dict[str, Any]:
    """The first YAML block of the page's "Seeing it in Jaeger" section, parsed."""
    text = page.read_text()
    section = text[text.index(SECTION) :]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block, f"no ```yaml block under {SECTION!r} in {page}"
    config: dict[str, Any] = yaml.safe_load(block.group(1))
    return config


@dataclass
class JaegerSpan:
    """One span of a trace as Jaeger's API v3 gives it back (OTLP/JSON): ids as hex, ``parent_id``
    empty for a root span, attributes with their OTLP types (an ``intValue`` as an int)."""

    name: str
    kind: int  # 2 SERVER, 3 CLIENT
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    scope: str
    service: str
    status_code: int  # 2 is ERROR
    start_ns: int
    events: list[tuple[str, dict[str, Any]]] = dataclasses.field(default_factory=list)
    #: What Jaeger itself adds to a span it read back (``@jaeger@warnings``: e.g. a parent span not in
    #: the trace, as an asset watcher's still-open trigger span is), kept apart from the span's own.
    jaeger: dict[str, Any] = dataclasses.field(default_factory=dict)


def _value(value: dict[str, Any]) -> Any:
    (kind, given), *_ = value.items()
    if kind == "intValue":
        return int(given)  # proto3 JSON writes 64-bit integers as strings
    if kind == "doubleValue":
        return float(given)
    return given


def _attributes(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {item["key"]: _value(item["value"]) for item in items or ()}


def spans_of(answer: dict[str, Any]) -> list[JaegerSpan]:
    """Every span of an API v3 answer (``{"result": {"resourceSpans": [...]}}``)."""
    found = []
    for resource_spans in answer["result"].get("resourceSpans", ()):
        service = str(
            _attributes(resource_spans.get("resource", {}).get("attributes")).get("service.name", "")
        )
        for scope_spans in resource_spans.get("scopeSpans", ()):
            scope = scope_spans.get("scope", {}).get("name", "")
            for span in scope_spans.get("spans", ()):
                attributes = _attributes(span.get("attributes"))
                added = {key: attributes.pop(key) for key in list(attributes) if key.startswith("@jaeger@")}
                found.append(
                    JaegerSpan(
                        name=span["name"],
                        kind=int(span.get("kind", 0)),
                        trace_id=span["traceId"],
                        span_id=span["spanId"],
                        parent_id=span.get("parentSpanId", ""),
                        attributes=attributes,
                        scope=scope,
                        service=service,
                        status_code=int(span.get("status", {}).get("code", 0)),
                        start_ns=int(span.get("startTimeUnixNano", 0)),
                        events=[
                            (event["name"], _attributes(event.get("attributes")))
                            for event in span.get("events", ())
                        ],
                        jaeger=added,
                    )
                )
    return found


class Jaeger(ServerProcess):
    """Jaeger v2 (the ``current`` pin) with the documented configuration, on free ports."""

    def __init__(self, tmp: Path) -> None:
        self.pin = peers.pin_for("jaeger", "current")
        self.otlp_port = free_port()
        self.query_port = free_port()
        config = documented_config()
        config["receivers"]["otlp"]["protocols"] = {"http": {"endpoint": f"127.0.0.1:{self.otlp_port}"}}
        query = config["extensions"]["jaeger_query"]
        query["http"] = {"endpoint": f"127.0.0.1:{self.query_port}"}
        query["grpc"] = {"endpoint": f"127.0.0.1:{free_port()}"}
        config["service"]["telemetry"] = {"metrics": {"level": "none"}}
        self.config = tmp / f"jaeger-{self.pin.key}.yaml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False))
        command = [str(peers.binary("jaeger", "current")), f"--config={self.config}"]
        super().__init__(command, tmp / f"{self.pin.key}.log", f"{self.query_url}/api/services")
        # The query service answers once the extensions have started; the receiver comes after.
        wait_until(self._receiving, timeout=30, interval=0.1)

    def _receiving(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.otlp_port), timeout=1):
                return True
        except OSError:
            return False

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.query_port}"

    @property
    def traces_endpoint(self) -> str:
        """Where OTLP/HTTP trace exports go (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)."""
        return f"http://127.0.0.1:{self.otlp_port}/v1/traces"

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.query_url}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def find(self, service: str, tags: dict[str, str]) -> list[str]:
        """The ids of the traces of ``service`` that have a span with all of ``tags``, as Jaeger's
        UI searches (the last hour, 20 at most)."""
        answer = self.get("/api/traces", service=service, tags=json.dumps(tags), lookback="1h", limit="20")
        return [str(trace["traceID"]) for trace in answer.get("data") or ()]

    def spans(self, service: str) -> list[JaegerSpan]:
        """Every span of every trace of ``service`` Jaeger holds (the last hour, 500 traces at most)."""
        answer = self.get("/api/traces", service=service, lookback="1h", limit="500")
        return [span for trace in answer.get("data") or () for span in self.trace(str(trace["traceID"]))]

    def trace(self, trace_id: str) -> list[JaegerSpan]:
        """Every span of one trace, through the API v3 (empty while Jaeger has none of it)."""
        try:
            return spans_of(self.get(f"/api/v3/traces/{trace_id}"))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
