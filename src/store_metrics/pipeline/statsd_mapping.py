"""``statsd-mapping.yml`` and ``statsd-mapping-server.yml``: Prometheus statsd_exporter mappings.

Each mapping gives one catalogue metric the series name the OpenTelemetry path produces, so the
rules and the dashboard work unchanged behind statsd_exporter. The tags become labels by
themselves (InfluxDB or DogStatsD tags); nothing is matched by wildcard.
"""

from __future__ import annotations

from typing import Any

from store_metrics import catalogue

from . import templating, yaml_text

__all__ = [
    "FILENAME",
    "SERVER_FILENAME",
    "mapping_document",
    "render",
    "render_server",
    "server_mapping_document",
]

FILENAME = "statsd-mapping.yml"
SERVER_FILENAME = "statsd-mapping-server.yml"

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
        # A worker that is gone must not show its last stall forever.
        entry["ttl"] = "10m"
    return entry


def mapping_document(prefix: str) -> dict[str, Any]:
    """The task side's counters (and the check counter)."""
    return {"mappings": [_entry(metric, prefix) for metric in catalogue.counters()]}


def server_mapping_document(prefix: str) -> dict[str, Any]:
    """The API server's counters, histograms (the catalogue's buckets) and gauge."""
    return {"mappings": [_entry(metric, prefix) for metric in catalogue.SERVER_METRICS]}


def render(prefix: str) -> str:
    """``statsd-mapping.yml``."""
    return yaml_text.dump(mapping_document(prefix), templating.generated_header(prefix) + _header(prefix))


def render_server(prefix: str) -> str:
    """``statsd-mapping-server.yml``."""
    return yaml_text.dump(
        server_mapping_document(prefix), templating.generated_header(prefix) + _SERVER_HEADER
    )
