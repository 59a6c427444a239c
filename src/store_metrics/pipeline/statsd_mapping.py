"""``statsd-mapping.yml``, ``statsd-mapping-server.yml``, ``statsd-mapping-inventory.yml``: Prometheus
statsd_exporter mappings.

Each mapping gives one catalogue metric the series name the OpenTelemetry path produces
(:meth:`~store_metrics.catalogue.Metric.prometheus_name`: ``_total``, ``_milliseconds``,
``_seconds``, ``_bytes``), so the rules and the dashboard work unchanged behind statsd_exporter.
The tags become labels by themselves (InfluxDB or DogStatsD tags); nothing is matched by wildcard.
The inventory's file is for ``store-metrics inventory --serve`` with ``inventory_export = backend``
and a StatsD backend: its gauges then arrive as ``name,dag_id=..:5|g`` lines.
"""

from __future__ import annotations

from typing import Any

from store_metrics import catalogue

from . import templating, yaml_text

__all__ = [
    "FILENAME",
    "INVENTORY_FILENAME",
    "SERVER_FILENAME",
    "inventory_mapping_document",
    "mapping_document",
    "render",
    "render_inventory",
    "render_server",
    "server_mapping_document",
]

FILENAME = "statsd-mapping.yml"
SERVER_FILENAME = "statsd-mapping-server.yml"
INVENTORY_FILENAME = "statsd-mapping-inventory.yml"

_MATCH_TYPES = {
    catalogue.Kind.COUNTER: "counter",
    catalogue.Kind.HISTOGRAM: "observer",
    catalogue.Kind.GAUGE: "gauge",
}


def _header(prefix: str) -> str:
    example = catalogue.get("task_state_store.write").prometheus_name(prefix)
    return f"""\
# Prometheus statsd_exporter mapping for store-metrics' StatsD lines (the `statsd` backend's
# InfluxDB tags `name,dag_id=..,task_id=..:1|c`, or DogStatsD `|#k:v` tags). statsd_exporter turns
# the tags into labels itself; these mappings only give each counter the series name the
# OpenTelemetry path produces (`{example}`), so the dashboards and
# rules work unchanged. No `ttl`: series live until statsd_exporter restarts, so a DAG that runs
# once a day keeps its series and increase() sees the next run.
#   statsd_exporter --statsd.mapping-config=statsd-mapping.yml
# Airflow's Helm chart: append the `mappings` list below to `statsd.extraMappings` in values.yaml.
"""


_SERVER_HEADER = """\
# Prometheus statsd_exporter mapping for the API server side (backends `statsd` and `dogstatsd`).
# Histograms arrive as one sampled observation per bucket (`name:mean|h|@1/n` or `|d`), which
# statsd_exporter counts n times: with the catalogue's buckets below, the `_bucket`, `_sum` and
# `_count` series equal the OpenTelemetry path's. Use together with statsd-mapping.yml (append
# both `mappings` lists, e.g. to the Helm chart's `statsd.extraMappings`).
"""


def _entry(metric: catalogue.Metric, prefix: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "match": metric.full_name(prefix),
        "match_metric_type": _MATCH_TYPES[metric.kind],
        "name": metric.prometheus_name(prefix),
        "help": metric.description,
    }
    if metric.kind is catalogue.Kind.HISTOGRAM:
        entry["observer_type"] = "histogram"
        entry["histogram_options"] = {"buckets": [float(b) for b in metric.buckets]}
    if metric.kind is catalogue.Kind.GAUGE:
        # A worker (or an inventory) that is gone must not show its last value forever; both send
        # their gauges again every flush_interval while they run.
        entry["ttl"] = "10m"
    return entry


def mapping_document(prefix: str) -> dict[str, Any]:
    """The task side's counters (and the check counter)."""
    return {"mappings": [_entry(metric, prefix) for metric in catalogue.counters()]}


def server_mapping_document(prefix: str) -> dict[str, Any]:
    """The API server's counters, histograms (the catalogue's buckets) and gauge."""
    return {"mappings": [_entry(metric, prefix) for metric in catalogue.SERVER_METRICS]}


def inventory_mapping_document(prefix: str) -> dict[str, Any]:
    """The gauges of ``store-metrics inventory`` (footprint and the inventory's own health)."""
    return {"mappings": [_entry(metric, prefix) for metric in catalogue.INVENTORY_METRICS]}


_INVENTORY_HEADER = """\
# Prometheus statsd_exporter mapping for `store-metrics inventory --serve` with
# `inventory_export = backend` and backend `statsd` or `dogstatsd` (the default, its own scrape
# endpoint on :9490, needs no mapping). Gives each gauge the series name of the scrape endpoint
# and of the OpenTelemetry path (`_bytes`, `_seconds`, `_milliseconds` suffixes), which
# footprint-rules.yml and the dashboard's Footprint row query. `ttl: 10m`: the inventory sends
# every gauge again every flush_interval, so a gauge stops being served 10 minutes after the
# inventory stopped (StateStoreInventoryDown then sees no series). Use together with
# statsd-mapping.yml (append the `mappings` lists).
"""


def render(prefix: str) -> str:
    """``statsd-mapping.yml``."""
    return yaml_text.dump(mapping_document(prefix), templating.generated_header(prefix) + _header(prefix))


def render_inventory(prefix: str) -> str:
    """``statsd-mapping-inventory.yml``."""
    return yaml_text.dump(
        inventory_mapping_document(prefix), templating.generated_header(prefix) + _INVENTORY_HEADER
    )


def render_server(prefix: str) -> str:
    """``statsd-mapping-server.yml``."""
    return yaml_text.dump(
        server_mapping_document(prefix), templating.generated_header(prefix) + _SERVER_HEADER
    )
