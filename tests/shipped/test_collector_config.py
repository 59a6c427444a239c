"""collector/otel-collector.yaml: its design, and the names the real Collector gives the catalogue.

As data: every component a pipeline names is defined (and every defined one used), the ports are the
documented ones, and the processors are the ones the pipeline design needs, in that order. Whether
every key is one the Collector knows is the real Collector's to say (``otelcol validate`` at both
pinned releases, and a misspelt key refused: ``test_peers.py``). The names: every catalogue metric,
sent to the real Collector (the newest pin, the shipped config) over OTLP and, for the counters, over
DogStatsD, under the default prefix and another, comes out of its Prometheus exporter under the
catalogue's Prometheus name, which the rules and dashboards read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import yaml

import store_metrics
from store_metrics import catalogue
from store_metrics.shipped import otel_collector
from support.peer_servers import Collector, metric_names, scrape
from testbed.repository import ROOT
from testbed.waiting import poll

pytestmark = pytest.mark.peers

CONFIG = ROOT / "collector" / "otel-collector.yaml"

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


# -- the names the real Collector gives the catalogue -------------------------------------------------


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """The newest Collector with the shipped config, its StatsD receiver aggregating every second."""
    tmp = tmp_path_factory.mktemp("collector")
    config = yaml.safe_load(CONFIG.read_text())
    config["receivers"]["statsd"]["aggregation_interval"] = "1s"
    (tmp / "otel-collector.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    running = Collector(tmp, "newest", tmp / "otel-collector.yaml")
    yield running
    running.stop()


def names_served(url: str, prefix: str, path: str) -> set[str]:
    """The metric names the Collector serves under ``prefix`` for the series tagged ``path``."""
    return metric_names(scrape(url), prefix.replace(".", "_") + "_", labelled=path)


def emit_every_metric(emitter: Any, metrics: tuple[catalogue.Metric, ...], path: str) -> None:
    """One observation of each metric, every tag set to ``path``; flushed."""
    for metric in metrics:
        tags = {tag: path for tag in metric.tags}
        if metric.kind is catalogue.Kind.COUNTER:
            emitter.counter(metric, tags).add(1)
        elif metric.kind is catalogue.Kind.HISTOGRAM:
            emitter.histogram(metric, tags).record(3.0)
        else:
            emitter.gauge(metric, tags).observe(3.0)
    assert emitter.flush(10.0)


@pytest.mark.prometheus
@pytest.mark.parametrize("prefix", ["airflow", "my.team"])
def test_the_collector_names_every_catalogue_metric_as_the_catalogue_does(
    collector: Collector, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTLP (with the catalogue's units): every metric, counters, histograms and gauges alike;
    DogStatsD (no units): the counters (gauges lose their unit suffix there: docs/footprint.md)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.otlp_endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    otlp = store_metrics.configure("otel", exporter="otlp", prefix=prefix, temporality="cumulative")
    emit_every_metric(otlp, catalogue.ALL_METRICS, "otlp")
    port = collector.statsd_port
    dogstatsd = store_metrics.configure("dogstatsd", host="127.0.0.1", port=port, prefix=prefix)
    emit_every_metric(dogstatsd, catalogue.METRICS, "dog")
    for path, metrics in (("otlp", catalogue.ALL_METRICS), ("dog", catalogue.METRICS)):
        # store_metrics.check has no tag to tell the two paths apart by; it is a counter as the others
        wanted = {m.prometheus_name(prefix) for m in metrics if m.tags}
        poll(partial(lambda p, w: names_served(collector.url(), prefix, p) >= w, path, wanted), 15, 0.2)
        assert names_served(collector.url(), prefix, path) == wanted, path


# -- the scaled-out tier (docs/scaling-out.md) --------------------------------------------------------

FRONT = ROOT / "collector" / "otel-collector-front.yaml"
BACKEND = ROOT / "collector" / "otel-collector-backend.yaml"


def test_the_front_drops_the_process_identity_then_routes_each_stream_to_one_backend() -> None:
    front, single = yaml.safe_load(FRONT.read_text()), config()
    (pipeline,) = front["service"]["pipelines"].values()
    assert pipeline == {
        "receivers": ["otlp"],
        # The identity is part of the stream: dropped BEFORE routing, or each task process's share
        # of a series would go to a backend of its own.
        "processors": ["memory_limiter", "filter/store_metrics", "transform/drop_process_identity"],
        "exporters": ["loadbalancing"],
    }
    for name in pipeline["processors"]:
        assert front["processors"][name] == single["processors"][name], name
    assert front["receivers"]["otlp"] == single["receivers"]["otlp"]
    balancer = front["exporters"]["loadbalancing"]
    assert balancer["routing_key"] == "streamID"
    assert balancer["protocol"]["otlp"]["tls"] == {"insecure": True}
    assert set(balancer["resolver"]) == {"static"}
    # No state in the front: no deltatocumulative, no Prometheus exporter.
    assert "deltatocumulative" not in front["processors"] and "prometheus" not in front["exporters"]


def test_each_backend_accumulates_and_serves_as_the_single_collector_does() -> None:
    backend, single = yaml.safe_load(BACKEND.read_text()), config()
    (pipeline,) = backend["service"]["pipelines"].values()
    assert pipeline == {
        "receivers": ["otlp"],
        "processors": ["memory_limiter", "deltatocumulative"],
        "exporters": ["prometheus"],
    }
    assert port_of(backend["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]) == 4317
    assert backend["processors"]["deltatocumulative"] == single["processors"]["deltatocumulative"]
    exporter, shipped = backend["exporters"]["prometheus"], single["exporters"]["prometheus"]
    assert exporter == shipped
