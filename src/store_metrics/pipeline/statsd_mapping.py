"""The statsd_exporter mappings as documents, for :mod:`.helm` only.

The mapping files themselves are templates (``templates/statsd-mapping*.yml``). ``helm.py`` still
builds the Helm values' ``statsd.extraMappings`` from these documents with :mod:`.yaml_text`;
tests/test_helm.py checks that list equals the exported files' mappings. Delete this module (and
:mod:`.yaml_text`) once the Helm values are a template too.
"""

from __future__ import annotations

from typing import Any

from store_metrics import catalogue

from . import settings

__all__ = ["FILENAME", "INVENTORY_FILENAME", "SERVER_FILENAME", "mapping_document", "server_mapping_document"]

FILENAME = "statsd-mapping.yml"
SERVER_FILENAME = "statsd-mapping-server.yml"
INVENTORY_FILENAME = "statsd-mapping-inventory.yml"

_MATCH_TYPES = {
    catalogue.Kind.COUNTER: "counter",
    catalogue.Kind.HISTOGRAM: "observer",
    catalogue.Kind.GAUGE: "gauge",
}


def _entry(metric: catalogue.Metric, prefix: str) -> dict[str, Any]:
    """One mapping, as the templates write it (their settings at the defaults)."""
    ttl = settings.defaults()["statsd_gauge_ttl" if metric.kind is catalogue.Kind.GAUGE else "statsd_ttl"]
    entry: dict[str, Any] = {
        "match": metric.full_name(prefix),
        "match_metric_type": _MATCH_TYPES[metric.kind],
        "name": metric.prometheus_name(prefix),
        "help": metric.description,
    }
    if metric.kind is catalogue.Kind.HISTOGRAM:
        entry["observer_type"] = "histogram"
        entry["histogram_options"] = {"buckets": [float(b) for b in metric.buckets]}
    entry["ttl"] = ttl
    return entry


def mapping_document(prefix: str) -> dict[str, Any]:
    """The task side's counters (and the check counter)."""
    return {"mappings": [_entry(metric, prefix) for metric in catalogue.counters()]}


def server_mapping_document(prefix: str) -> dict[str, Any]:
    """The API server's counters, histograms (the catalogue's buckets) and gauge."""
    return {"mappings": [_entry(metric, prefix) for metric in catalogue.SERVER_METRICS]}
