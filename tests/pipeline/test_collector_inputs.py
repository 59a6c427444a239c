"""The StatsD inputs of topologies 2 and 3: ported copies of their parsers, run on the exact bytes
the adapters send.

Neither the OpenTelemetry Collector nor statsd_exporter can be installed here, so their line
parsers are ported below, rule for rule, from their sources:

* collector ``receiver/statsdreceiver`` ``parseMessageToMetric``: ``name:value|type``, then
  ``|@rate``, ``|#k:v,...`` (each tag split on its first ``:``), ``|c:<container>``, ``|T<ts>``;
  any other section is an error ("unrecognized message part"). It does not read InfluxDB tags.
* statsd_exporter ``pkg/line`` ``LineToEvents`` (InfluxDB ``name,k=v``, DogStatsD ``|#k:v``,
  Librato ``#``; a line mixing styles is dropped) and ``pkg/mapper`` glob matching (our mapping
  only has exact names; mapped labels override tag labels).

The adapters' lines come from ``store_metrics.backends.statsd_lines`` and from real UDP datagrams sent by the
``dogstatsd`` and ``statsd`` backends, so a format change in either breaks these tests.
"""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import store_metrics
from store_metrics import catalogue, naming
from store_metrics.backends import statsd_lines
from support.stores import DictStore
from support.tags import HOSTILE_VALUES
from testbed.ports import free_port
from testbed.repository import ROOT
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

MAPPING = ROOT / "collector" / "statsd-mapping.yml"

TAG_SETS = [
    catalogue.task_tags(
        dag_id="state_store_metrics_02",
        task_id="touch_asset_store",
        run_type="manual",
        operator="_PythonDecoratedOperator",
    ),
    catalogue.task_tags(
        dag_id="etl",
        task_id="extract",
        run_type="scheduled",
        operator="PythonOperator",
        team_name="analytics",
    ),
    *(
        catalogue.task_tags(dag_id=value, task_id="t", run_type="manual", operator="X")
        for value in HOSTILE_VALUES
    ),
]


# -- ported parsers ------------------------------------------------------------------------------------


class Unparsable(ValueError):
    pass


def collector_statsd_parse(line: str) -> tuple[str, str, float, dict[str, str]]:
    """receiver/statsdreceiver parseMessageToMetric (enable_simple_tags off)."""
    parts = line.split("|")
    if len(parts) < 2:
        raise Unparsable(f"invalid message format: {line}")
    if ":" not in parts[0]:
        raise Unparsable(f"invalid <name>:<value> format: {parts[0]}")
    name, value = parts[0].split(":", 1)
    if not name:
        raise Unparsable("empty metric name")
    if not value:
        raise Unparsable("empty metric value")
    kind = parts[1]
    if kind not in {"c", "g", "h", "ms", "d"}:
        raise Unparsable(f"unsupported metric type: {kind}")
    attrs: dict[str, str] = {}
    sample_rate = 1.0
    for part in parts[2:]:
        if part.startswith("@"):
            sample_rate = float(part[1:])
        elif part.startswith("#"):
            for tag in part[1:].split(","):
                kv = tag.split(":", 1)
                if len(kv) != 2:
                    raise Unparsable(f"invalid tag format: {kv}")
                attrs[kv[0]] = kv[1]
        elif part.startswith("c:") or part.startswith("T"):
            continue  # container id / timestamp (DogStatsD 1.2 / 1.3)
        else:
            raise Unparsable(f"unrecognized message part: {part}")
    number = float(value)
    if kind == "c" and 0 < sample_rate < 1:
        number = int(number / sample_rate)
    return name, kind, number, attrs


def statsd_exporter_events(line: str) -> list[tuple[str, str, float, dict[str, str]]]:
    """statsd_exporter pkg/line LineToEvents, all tag styles enabled (its defaults)."""
    if not line or ":" not in line or not line.split(":", 1)[0]:
        return []
    head, rest = line.split(":", 1)
    labels: dict[str, str] = {}

    def parse_tag(tag: str, sep: str) -> None:
        if sep in tag:
            k, v = tag.split(sep, 1)
            if k and v:
                labels[re.sub(r"[^a-zA-Z0-9_]", "_", k)] = v

    metric = head
    for i, c in enumerate(head):
        if c in "#,":  # Librato '#', InfluxDB ','
            for tag in head[i + 1 :].split(","):
                parse_tag(tag, "=")
            metric = head[:i]
            break
    dogstatsd = "|#" in rest
    if dogstatsd and labels:
        return []  # mixed_tagging_styles: the whole line is dropped
    line_parts = rest.split("|", 2)
    if len(line_parts) < 2:
        return []
    samples = [rest] if dogstatsd else rest.split(":")
    events = []
    for sample in samples:
        components = sample.split("|")
        if not 2 <= len(components) <= 4:
            continue
        value_text, kind = components[0], components[1]
        try:
            value = float(value_text)
        except ValueError:
            continue
        ok = True
        for component in components[2:]:
            if not component:
                ok = False
            elif component[0] == "@":
                rate = float(component[1:]) or 1.0
                if kind == "c":
                    value /= rate
            elif component[0] == "#":
                for tag in component[1:].split(","):
                    parse_tag(tag.removeprefix("#"), ":")
            else:
                ok = False
        if ok and kind == "c":
            events.append((metric, kind, value, dict(labels)))
    return events


def mapping() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(MAPPING.read_text())
    assert set(doc) == {"mappings"}
    return {m["match"]: m for m in doc["mappings"]}


def statsd_exporter_series(line: str) -> list[tuple[str, dict[str, str], float]]:
    """Events of ``line`` after our mapping: (Prometheus name, labels, value)."""
    out = []
    mappings = mapping()
    for metric, kind, value, labels in statsd_exporter_events(line):
        m = mappings.get(metric)
        assert m is not None, f"no mapping for {metric}"
        assert m["match_metric_type"] == "counter" and kind == "c"
        out.append((m["name"], {**labels, **m.get("labels", {})}, value))
    return out


# -- the mapping file ----------------------------------------------------------------------------------


def test_mapping_has_one_exact_counter_mapping_per_catalogue_metric() -> None:
    mappings = mapping()
    assert set(mappings) == {m.full_name() for m in catalogue.METRICS}
    for metric in catalogue.METRICS:
        entry = mappings[metric.full_name()]
        assert "*" not in entry["match"] and entry.get("match_type", "glob") == "glob"
        assert entry["name"] == metric.prometheus_name()
        assert entry["match_metric_type"] == "counter"
        assert entry["help"] == metric.description
        # No mapped labels: the tags are the labels, exactly as on the OpenTelemetry path.
        assert "labels" not in entry
        # Series nothing updated for a day and an hour go away (bounded), a daily DAG's stay.
        assert entry["ttl"] == "25h"
    assert "defaults" not in yaml.safe_load(MAPPING.read_text())


# -- topology 2: DogStatsD -> collector statsd receiver (ported parser) --------------------------------


@pytest.mark.parametrize("tags", TAG_SETS, ids=range(len(TAG_SETS)))
def test_ported_collector_parser_reads_every_dogstatsd_line_the_adapter_writes(tags: dict[str, str]) -> None:
    for metric in catalogue.STATE_STORE_METRICS:
        line_tags = {**tags, catalogue.OPERATION: "get"} if catalogue.OPERATION in metric.tags else tags
        normalized = naming.normalize_tags(line_tags)
        line = statsd_lines.dogstatsd_counter_line("airflow", metric.name, normalized, 3)
        name, kind, value, attrs = collector_statsd_parse(line)
        assert (name, kind, value) == (metric.full_name(), "c", 3)
        assert attrs == dict(normalized)


def test_ported_collector_parser_does_not_read_influxdb_tags() -> None:
    """Why InfluxDB-StatsD goes to statsd_exporter: to the collector the tags are part of the name."""
    line = statsd_lines.influx_counter_line(
        "airflow", "task_state_store.write", naming.normalize_tags(TAG_SETS[0]), 1
    )
    name, _, _, attrs = collector_statsd_parse(line)
    assert name.startswith("airflow.task_state_store.write,dag_id=") and attrs == {}


Totals = dict[tuple[str, frozenset[tuple[str, str]]], float]


def received(backend: str, receiver: UdpReceiver, parse: Any) -> Totals:
    """Make scenario_calls through ``backend`` to ``receiver``; wait until every datagram is in."""
    emitter = store_metrics.configure(backend, host="127.0.0.1", port=receiver.port, flush_interval=60.0)
    scenario_calls(emitter)
    assert emitter.flush(5.0)

    def totals() -> Totals:
        out: Totals = defaultdict(float)
        for line in receiver.lines():
            for name, labels, value in parse(line):
                out[(name, frozenset(labels.items()))] += value
        return dict(out)

    with contextlib.suppress(AssertionError):  # the caller's assertion shows the difference
        wait_until(lambda: totals() == EXPECTED, timeout=5)
    return totals()


def collector_series(line: str) -> list[tuple[str, dict[str, str], float]]:
    name, kind, value, attrs = collector_statsd_parse(line)
    assert kind == "c"
    return [(prometheus_name_of(name), attrs, value)]


def scenario_calls(emitter: Any) -> None:
    """Scenario 2 twice and scenario 3 of the upstream proposal, through the real wrappers."""
    asset_inner = DictStore()
    tags02 = catalogue.task_tags(
        dag_id="state_store_metrics_02",
        task_id="touch_asset_store",
        run_type="manual",
        operator="_PythonDecoratedOperator",
    )
    for _ in range(2):
        asset = store_metrics.instrument_asset_store(asset_inner, emitter, tags02)
        task = store_metrics.instrument_task_store(DictStore(), emitter, tags02)
        asset.get("watermark")
        asset.set("watermark", "2026-01-01")
        task.get("counter")
    tags03 = catalogue.task_tags(
        dag_id="state_store_metrics_03",
        task_id="delete_and_clear",
        run_type="manual",
        operator="_PythonDecoratedOperator",
        team_name="team a",
    )
    task = store_metrics.instrument_task_store(DictStore(), emitter, tags03)
    asset = store_metrics.instrument_asset_store(DictStore(), emitter, tags03)
    task.set("a", 1)
    task.set("b", 2)
    task.delete("a")
    task.clear()
    asset.set("w", "x")
    asset.delete("w")


#: What scenario_calls counts: (series name, labels) -> calls. "team a" is sanitised to "team_a".
L02 = {
    "dag_id": "state_store_metrics_02",
    "task_id": "touch_asset_store",
    "run_type": "manual",
    "operator": "_PythonDecoratedOperator",
}
L03 = {
    "dag_id": "state_store_metrics_03",
    "task_id": "delete_and_clear",
    "run_type": "manual",
    "operator": "_PythonDecoratedOperator",
    "team_name": "team_a",
}
EXPECTED = {
    ("airflow_asset_state_store_read_absent_total", frozenset(L02.items())): 1,
    ("airflow_asset_state_store_read_found_total", frozenset(L02.items())): 1,
    ("airflow_asset_state_store_write_total", frozenset(L02.items())): 2,
    ("airflow_task_state_store_read_absent_total", frozenset(L02.items())): 2,
    ("airflow_task_state_store_write_total", frozenset(L03.items())): 2,
    ("airflow_task_state_store_delete_total", frozenset(L03.items())): 1,
    ("airflow_task_state_store_clear_total", frozenset(L03.items())): 1,
    ("airflow_asset_state_store_write_total", frozenset(L03.items())): 1,
    ("airflow_asset_state_store_delete_total", frozenset(L03.items())): 1,
}


def prometheus_name_of(full_name: str) -> str:
    return next(m.prometheus_name() for m in catalogue.METRICS if m.full_name() == full_name)


def test_ported_collector_parser_aggregates_the_dogstatsd_backend_datagrams_to_the_calls(
    udp_receiver: UdpReceiver,
) -> None:
    assert received("dogstatsd", udp_receiver, collector_series) == EXPECTED


def test_ported_statsd_exporter_parser_reads_the_dogstatsd_backend_datagrams_too(
    udp_receiver: UdpReceiver,
) -> None:
    assert received("dogstatsd", udp_receiver, statsd_exporter_series) == EXPECTED


# -- topology 3: InfluxDB-StatsD -> statsd_exporter (ported parser) ------------------------------------


@pytest.mark.parametrize("tags", TAG_SETS, ids=range(len(TAG_SETS)))
def test_ported_statsd_exporter_parser_maps_every_influx_line_to_the_catalogue_series(
    tags: dict[str, str],
) -> None:
    for metric in catalogue.STATE_STORE_METRICS:
        line_tags = {**tags, catalogue.OPERATION: "set"} if catalogue.OPERATION in metric.tags else tags
        normalized = naming.normalize_tags(line_tags)
        line = statsd_lines.influx_counter_line("airflow", metric.name, normalized, 2)
        assert statsd_exporter_series(line) == [(metric.prometheus_name(), dict(normalized), 2.0)]


def test_ported_statsd_exporter_parser_drops_a_line_that_mixes_tag_styles() -> None:
    """What the notes warn about; the adapters never write such a line (checked above)."""
    assert statsd_exporter_events("airflow.task_state_store.write,dag_id=d:1|c|#task_id:t") == []


def test_ported_statsd_exporter_parser_aggregates_the_statsd_backend_datagrams_to_the_calls(
    udp_receiver: UdpReceiver,
) -> None:
    assert received("statsd", udp_receiver, statsd_exporter_series) == EXPECTED


def test_opentelemetry_endpoint_series_equal_the_ported_statsd_exporter_parser_series() -> None:
    """The plugin's own OpenTelemetry Prometheus endpoint (real, scraped over HTTP) shows the names,
    labels and values that the ported statsd_exporter parser made of the same calls (EXPECTED)."""
    import urllib.request

    port = free_port()
    emitter = store_metrics.configure(
        "otel", exporter="prometheus", prometheus_port=port, prometheus_host="127.0.0.1"
    )
    scenario_calls(emitter)

    def scrape() -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                return str(response.read().decode())
        except OSError:
            return None  # the emitter's worker thread opens the endpoint

    wait_until(scrape, timeout=10)
    text = scrape()
    assert text is not None
    series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_total") and "_state_store_" in sample.name:
                # An empty label value is no label to Prometheus (the exporter writes team_name=""
                # on series without a team when others of the metric have one).
                labels = {
                    k: v
                    for k, v in sample.labels.items()
                    if v and not k.startswith("otel_scope_") and k not in {"job", "instance"}
                }
                series[(sample.name, frozenset(labels.items()))] = sample.value
    assert series == EXPECTED
