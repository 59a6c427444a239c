"""``inventory_export = backend``: the snapshot through one emitter, to the configured backend.

Every ``flush_interval`` the publisher observes each gauge of the latest snapshot on the emitter
(``emitter.gauge(metric, tags).observe(value)``) and flushes it, so receivers that expire idle
series (statsd_exporter's TTL, the Collector's ``metric_expiration``) keep seeing them between two
readings of the database. A series that left the footprint is sent once more as 0 and then no
longer: push receivers keep a gauge's last value, and a stale non-zero value would be wrong.

The emitter is made like the API server's (``store_metrics.counting.runtime.create_emitter`` from
``[store_metrics]``): cumulative temporality and its own ``service.instance.id`` for ``otel``,
and for ``otel_exporter = prometheus`` its endpoint on ``inventory_port``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..contracts import Emitter
from ..naming import normalize_tags
from .collect import Snapshot
from .gauges import snapshot_series

#: ``service.instance.id`` of the inventory's own OpenTelemetry provider.
INSTANCE_ID = "store-metrics-inventory"

_SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


def emitter_arguments(options: Any) -> dict[str, Any]:
    """``create_emitter`` arguments for the inventory: the tasks' backend, as a long-lived process."""
    return {
        **options.configure_kwargs(),
        "temporality": "cumulative",
        "instance_id": INSTANCE_ID,
        "prometheus_port": options.inventory_port,
    }


class Publisher:
    """Hands snapshots to ``emitter``; remembers what it sent so vanished series go to 0 once."""

    def __init__(self, emitter: Emitter, flush_timeout: float = 2.0) -> None:
        self.emitter = emitter
        self.flush_timeout = flush_timeout
        self._sent: dict[_SeriesKey, tuple[Any, dict[str, str]]] = {}

    def publish(self, snapshot: Snapshot, now: dt.datetime | None = None) -> bool:
        """Observe every gauge of ``snapshot`` (and 0 for the ones gone) and flush. Never raises."""
        current: dict[_SeriesKey, tuple[Any, dict[str, str]]] = {}
        for metric, tags, value in snapshot_series(snapshot, now):
            current[(metric.name, normalize_tags(tags))] = (metric, tags)
            self.emitter.gauge(metric, tags).observe(value)
        for key, (metric, tags) in self._sent.items():
            if key not in current:
                self.emitter.gauge(metric, tags).observe(0.0)
        self._sent = current
        return self.emitter.flush(self.flush_timeout)
