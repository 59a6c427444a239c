"""An API server worker's scrape endpoint, as ``otel`` with the Prometheus exporter serves it.

``serving`` makes the worker's emitter (cumulative, its identity ``host-<WORKER>`` as instance id,
a push interval of an hour so only the test's flushes count) on a free port of 127.0.0.1, with the
``server_exposition`` a test picks, and gives its ``/metrics`` URL.
"""

from __future__ import annotations

from typing import Any

from store_metrics.counting.runtime import create_emitter
from store_metrics.emitter import AggregatingEmitter
from testbed.ports import free_port

#: The worker's slot: its ``worker`` tag.
WORKER = "0"


def serving(exposition_kind: str, **options: Any) -> tuple[AggregatingEmitter, str]:
    """An API server worker's emitter (cumulative, its identity as instance id) and its /metrics URL."""
    emitter = create_emitter(
        "otel",
        exporter="prometheus",
        prometheus_host="127.0.0.1",
        prometheus_port=free_port(),
        prometheus_port_tries=16,
        temporality="cumulative",
        instance_id=f"host-{WORKER}",
        flush_interval=3600,
        server_exposition=exposition_kind,
        **options,
    )
    port = emitter.backend.prometheus_port  # type: ignore[attr-defined]
    return emitter, f"http://127.0.0.1:{port}/metrics"
