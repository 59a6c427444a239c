"""The ``inventory --serve`` scrape endpoint: the latest snapshot in Prometheus text format.

A scrape never touches the database: it renders the snapshot the serve loop last made, with ages
computed at scrape time. Series that left the footprint (a DAG whose entries were all deleted,
one that dropped out of the top N) are simply absent from the next scrape, so Prometheus marks
them stale, with no left-over values. Names are the catalogue's Prometheus names for the
configured prefix, label values follow the tag value rule (``tag_value``):
the same series as the OpenTelemetry path would give.

Served by ``prometheus_client`` (installed with the ``otel`` extra) on its own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..catalogue import INVENTORY_METRICS
from ..errors import MissingExtraError
from ..naming import tag_value
from .collect import Snapshot
from .gauges import snapshot_series


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise MissingExtraError("inventory --serve", "otel", "prometheus_client") from exc
    return prometheus_client


class SnapshotCollector:
    """A ``prometheus_client`` collector that renders ``snapshot()`` at each scrape."""

    def __init__(self, snapshot: Callable[[], Snapshot], prefix: str) -> None:
        self._snapshot = snapshot
        self.prefix = prefix

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        families: dict[str, Any] = {}
        for metric, tags, value in snapshot_series(self._snapshot()):
            family = families.get(metric.name)
            if family is None:
                family = families[metric.name] = GaugeMetricFamily(
                    metric.prometheus_name(self.prefix), metric.description, labels=list(tags)
                )
            family.add_metric([tag_value(v) for v in tags.values()], value)
        for metric in INVENTORY_METRICS:  # catalogue order, whatever order the groups came in
            if metric.name in families:
                yield families[metric.name]


class Endpoint:
    """A running scrape endpoint; ``close`` stops it."""

    def __init__(self, snapshot: Callable[[], Snapshot], prefix: str, host: str, port: int) -> None:
        client = _client()
        registry = client.CollectorRegistry(auto_describe=False)
        registry.register(SnapshotCollector(snapshot, prefix))
        self._server, self._thread = client.start_http_server(port, addr=host, registry=registry)
        self.host = host
        self.port = int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
