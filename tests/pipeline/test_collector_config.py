"""collector/otel-collector.yaml, checked without the collector binary (not installable here).

It must parse, every component a pipeline names must be defined (and every defined one used),
each component may only use keys its own configuration struct declares, the ports must be the
documented ones, and the processors must be the ones the pipeline design needs, in that order.
The key lists come from the components' sources in open-telemetry/opentelemetry-collector(-contrib)
(config.go / config.schema.yaml of each component).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from store_metrics.pipeline import otel_collector
from testbed.repository import ROOT

CONFIG = ROOT / "collector" / "otel-collector.yaml"

#: component type -> keys its config struct accepts (mapstructure tags), nested where we use nesting.
DOCUMENTED_KEYS: dict[str, dict[str, Any]] = {
    # receiver/otlpreceiver/config.go: Protocols{GRPC, HTTP}; configgrpc / confighttp ServerConfig
    "otlp": {
        "protocols": {
            "grpc": {
                "endpoint",
                "transport",
                "tls",
                "max_recv_msg_size_mib",
                "max_concurrent_streams",
                "read_buffer_size",
                "write_buffer_size",
                "keepalive",
                "auth",
                "include_metadata",
            },
            "http": {
                "endpoint",
                "tls",
                "cors",
                "auth",
                "max_request_body_size",
                "include_metadata",
                "response_headers",
                "traces_url_path",
                "metrics_url_path",
                "logs_url_path",
            },
        }
    },
    # receiver/statsdreceiver/config.go
    "statsd": {
        "endpoint",
        "transport",
        "aggregation_interval",
        "enable_ip_only_aggregation",
        "ignore_host",
        "enable_metric_type",
        "enable_simple_tags",
        "is_monotonic_counter",
        "counter_type",
        "timer_histogram_mapping",
        "socket_permissions",
    },
    # processor/memorylimiterprocessor (core): memorylimiter.Config
    "memory_limiter": {
        "check_interval",
        "limit_mib",
        "spike_limit_mib",
        "limit_percentage",
        "spike_limit_percentage",
    },
    # processor/filterprocessor/config.go
    "filter": {"error_mode", "metrics", "logs", "traces", "profiles"},
    # processor/transformprocessor/config.go
    "transform": {
        "error_mode",
        "trace_statements",
        "metric_statements",
        "log_statements",
        "profile_statements",
        "flatten_data",
    },
    # processor/deltatocumulativeprocessor/config.go
    "deltatocumulative": {"max_stale", "max_streams"},
    # exporter/prometheusexporter/config.go + config.schema.yaml (confighttp.ServerConfig squashed)
    "prometheus": {
        "endpoint",
        "tls",
        "cors",
        "auth",
        "include_metadata",
        "namespace",
        "const_labels",
        "send_timestamps",
        "metric_expiration",
        "resource_to_telemetry_conversion",
        "enable_open_metrics",
        "add_metric_suffixes",
        "translation_strategy",
        "without_scope_info",
        "sending_queue",
    },
}
KINDS = {
    "receivers": {"otlp", "statsd"},
    "processors": {"memory_limiter", "filter", "transform", "deltatocumulative"},
    "exporters": {"prometheus"},
}


def config() -> dict[str, Any]:
    return yaml.safe_load(CONFIG.read_text())


def component_type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def check_keys(where: str, value: Any, allowed: Any) -> None:
    if isinstance(allowed, dict):
        assert isinstance(value, dict), where
        assert set(value) <= set(allowed), f"{where}: undocumented keys {set(value) - set(allowed)}"
        for key, sub in value.items():
            if isinstance(allowed[key], (dict, set)) and isinstance(sub, dict):
                check_keys(f"{where}.{key}", sub, allowed[key])
    else:
        assert isinstance(value, dict), where
        assert set(value) <= allowed, f"{where}: undocumented keys {set(value) - allowed}"


def test_every_pipeline_component_is_defined_and_every_defined_one_is_used() -> None:
    cfg = config()
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set()}
    pipelines = cfg["service"]["pipelines"]
    assert set(pipelines) == {"metrics/otlp", "metrics/dogstatsd"}
    for name, pipeline in pipelines.items():
        assert name.split("/")[0] == "metrics"
        for kind, ids in used.items():
            for component in pipeline.get(kind, []):
                assert component in (cfg.get(kind) or {}), f"{name}: {kind} {component} is not defined"
                ids.add(component)
    for kind, ids in used.items():
        assert set(cfg[kind]) == ids, f"defined but unused {kind}: {set(cfg[kind]) - ids}"
        assert {component_type(i) for i in ids} <= KINDS[kind]


def test_components_use_documented_keys_only() -> None:
    cfg = config()
    for kind in KINDS:
        for component_id, settings in cfg[kind].items():
            check_keys(
                f"{kind}.{component_id}", settings or {}, DOCUMENTED_KEYS[component_type(component_id)]
            )


def test_documented_ports() -> None:
    cfg = config()
    otlp = cfg["receivers"]["otlp"]["protocols"]
    assert port_of(otlp["grpc"]["endpoint"]) == 4317
    assert port_of(otlp["http"]["endpoint"]) == 4318
    statsd = cfg["receivers"]["statsd"]
    assert port_of(statsd["endpoint"]) == 8125 and statsd["transport"] == "udp"
    assert port_of(cfg["exporters"]["prometheus"]["endpoint"]) == 8889
    # Listening on all interfaces: task processes run on other hosts/pods.
    for endpoint in (
        otlp["grpc"]["endpoint"],
        otlp["http"]["endpoint"],
        statsd["endpoint"],
        cfg["exporters"]["prometheus"]["endpoint"],
    ):
        assert endpoint.startswith("0.0.0.0:")


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration):
        total += float(number) * units[unit]
    assert total > 0, duration
    return total


def test_pipelines_are_the_designed_ones() -> None:
    pipelines = config()["service"]["pipelines"]
    otlp, dog = pipelines["metrics/otlp"], pipelines["metrics/dogstatsd"]
    assert otlp["receivers"] == ["otlp"] and dog["receivers"] == ["statsd"]
    # memory_limiter first; only our counters; per-process identity dropped BEFORE the delta
    # streams are formed; deltatocumulative last, feeding the exporter.
    assert otlp["processors"] == [
        "memory_limiter",
        "filter/store_metrics",
        "transform/drop_process_identity",
        "deltatocumulative",
    ]
    assert dog["processors"] == ["memory_limiter", "filter/store_metrics", "deltatocumulative"]
    assert otlp["exporters"] == dog["exporters"] == ["prometheus"]


def test_statsd_receiver_aggregates_all_senders_into_monotonic_counters() -> None:
    statsd = config()["receivers"]["statsd"]
    assert statsd["is_monotonic_counter"] is True  # the exporter drops non-monotonic delta sums
    assert statsd["ignore_host"] is True  # one writer per series, whatever the senders' addresses
    assert "enable_ip_only_aggregation" not in statsd
    assert not statsd.get("enable_metric_type")  # no extra metric_type label
    # Every task flushes at least every 10 s; the receiver should not hold counts much longer.
    assert seconds(statsd["aggregation_interval"]) <= 10


def test_series_outlive_daily_runs_and_expire_after_the_streams() -> None:
    cfg = config()
    max_stale = seconds(cfg["processors"]["deltatocumulative"]["max_stale"])
    expiration = seconds(cfg["exporters"]["prometheus"]["metric_expiration"])
    assert max_stale >= 24 * 3600
    assert expiration > max_stale
    assert cfg["exporters"]["prometheus"]["resource_to_telemetry_conversion"]["enabled"] is False


def test_otlp_resource_keeps_only_what_the_exporter_uses_for_job() -> None:
    statements = config()["processors"]["transform/drop_process_identity"]["metric_statements"]
    assert statements == [
        {
            "context": "resource",
            "statements": ['keep_keys(attributes, ["service.name", "service.namespace"])'],
        }
    ]


def ottl_string(statement: str) -> str:
    """The (single) OTTL string literal in ``statement``, unescaped."""
    match = re.search(r'"((?:[^"\\]|\\.)*)"', statement)
    assert match, statement
    return re.sub(r"\\(.)", r"\1", match.group(1))


def test_filter_keeps_exactly_the_catalogue_counters_under_any_prefix() -> None:
    conditions = config()["processors"]["filter/store_metrics"]["metrics"]["metric"]
    assert len(conditions) == 1 and conditions[0].startswith("not IsMatch(name, ")
    pattern = ottl_string(conditions[0])
    assert pattern == otel_collector.collector_name_regex()
    regex = re.compile(pattern)
    for prefix in ("airflow", "my.team", "x", ""):
        for metric in catalogue.METRICS:
            assert regex.search(metric.full_name(prefix)), metric.full_name(prefix)
    for other in (
        "airflow.resumable_job.fresh_submit",
        "airflow.ti.finish",
        "airflow.task_state_store.write.x",
        "airflow.task_state_store_write",
        "airflow.task_state_store.writes",
        "airflow.dag.state_store_metrics_01.task_state_store",
    ):
        assert not regex.search(other), other


def test_otlp_backend_exports_delta_counters_by_default() -> None:
    """deltatocumulative is only needed (and only correct) because the adapter sends deltas."""
    from store_metrics.backends import otel

    backend = otel.create(exporter="otlp")
    assert backend.temporality == "delta"


def prometheus_name(metric_name: str, unit: str, monotonic_sum: bool) -> str:
    """The collector's Prometheus name for a metric (pkg/translator/prometheus, with suffixes).

    Characters outside [a-zA-Z0-9_:] become "_"; a unit in braces ({call}) is an annotation and
    adds no suffix; monotonic sums get "_total".
    """
    name = re.sub(r"[^a-zA-Z0-9_:]", "_", metric_name)
    name = re.sub(r"__+", "_", name).strip("_")
    if unit and not (unit.startswith("{") and unit.endswith("}")):
        raise AssertionError(f"unexpected unit {unit!r}")
    return f"{name}_total" if monotonic_sum else name


@pytest.mark.parametrize("prefix", ["airflow", "my.team"])
def test_collector_names_are_the_catalogue_names(prefix: str) -> None:
    for metric in catalogue.METRICS:
        # OTLP path: SDK instrument with the catalogue unit; StatsD path: no unit.
        for unit in (metric.unit, ""):
            assert prometheus_name(metric.full_name(prefix), unit, True) == metric.prometheus_name(prefix)
