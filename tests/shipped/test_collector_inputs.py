"""The StatsD inputs of the pipelines, read by the real programs from the exact bytes the backends send.

statsd_exporter (the Airflow chart's pin and the minimum) with the exported mappings, and the Collector
(the newest pin) with the shipped ``otel-collector.yaml`` (its StatsD receiver aggregating every second
instead of every 10 s, so a test waits less; nothing else changed), each built by ``scripts/setup dev``
(``testbed.peers``). Each test sends lines and reads what the program serves on ``/metrics``:

* every counter line the ``statsd`` and ``dogstatsd`` formats write, for ordinary and hostile tag
  values and for ids Airflow accepts (Unicode, 250 characters), becomes exactly the catalogue's
  series, labels and values: each id its own label value, as it is;
* the Collector takes InfluxDB tags as part of the name, which the shipped filter then drops: why
  InfluxDB-StatsD goes to statsd_exporter;
* statsd_exporter reads DogStatsD too, and drops a line that mixes tag styles (and counts it);
* the datagrams the backends send for the proposal's calls add up to the calls, and to exactly the
  series the OpenTelemetry backend's own Prometheus endpoint shows for the same calls.

* the one rule of statsd_exporter the unit tests model (``support.statsd_observations``: a sampled
  histogram line is ``int(1/rate)`` observations) gives the buckets, sum and count the real exporter
  serves for the same lines, sample rates down to ~1e-5, in both tag styles;
* UDP: what a burst the chart's exporter cannot read at once keeps, with the kernel's default
  receive buffer and with ``--statsd.read-buffer`` (the exporter stopped while the burst is sent, so
  what counts is the socket's buffer, not how fast the exporter reads).

The mapping file's shape is checked as data (one exact counter mapping per catalogue metric).
"""

from __future__ import annotations

import signal
import socket
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import store_metrics
from store_metrics import catalogue, naming
from store_metrics.backends import statsd_lines
from store_metrics.deltas import Buckets
from support.peer_servers import Collector, StatsdExporter, scrape, send_lines
from support.statsd_observations import exporter_buckets
from support.stores import DictStore
from support.tags import HOSTILE_VALUES, airflow_ids
from testbed.ports import free_port
from testbed.repository import ROOT
from testbed.waiting import poll, wait_until

pytestmark = pytest.mark.peers

COLLECTOR = ROOT / "collector"
MAPPING = COLLECTOR / "statsd-mapping.yml"
MAPPINGS = ("statsd-mapping.yml", "statsd-mapping-server.yml", "statsd-mapping-inventory.yml")

#: Ids Airflow accepts that the old rule made one (the first two) or turned into underscores, and the
#: longest it accepts (250 characters drawn from every one it accepts).
AIRFLOW_IDS = [
    "donn\u00e9es_2024",
    "donn_es_2024",
    "\u65e5\u672c\u8a9e\u306eDAG",
    "\u043e\u0442\u0447\u0451\u0442",
    *airflow_ids(3, seed=43),
]

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
#: A DAG and task of each id: sent in a burst of their own (their long lines are datagrams of their own).
ID_TAG_SETS = [
    catalogue.task_tags(dag_id=value, task_id=value[::-1], run_type="manual", operator="X")
    for value in AIRFLOW_IDS
]

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


# -- the real programs ----------------------------------------------------------------------------------


@pytest.fixture(params=["chart", "minimum"])
def statsd_exporter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StatsdExporter]:
    """statsd_exporter at the Airflow chart's pin and at the minimum, with the exported mappings."""
    mappings = [m for name in MAPPINGS for m in yaml.safe_load((COLLECTOR / name).read_text())["mappings"]]
    exporter = StatsdExporter(tmp_path, request.param, mappings)
    yield exporter
    exporter.stop()


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    shipped = tmp_path / "otel-collector.yaml"
    config = yaml.safe_load((COLLECTOR / "otel-collector.yaml").read_text())
    config["receivers"]["statsd"]["aggregation_interval"] = "1s"
    shipped.write_text(yaml.safe_dump(config, sort_keys=False))
    running = Collector(tmp_path, "newest", shipped)
    yield running
    running.stop()


def series(text: str) -> Series:
    """The state store counters of an exposition: (name, labels) -> value, without the labels the
    exporters add (``otel_scope_*``, ``job``, ``instance``) and without empty ones."""
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_total") and "_state_store_" in sample.name:
                labels = frozenset(
                    (k, v)
                    for k, v in sample.labels.items()
                    if v and not k.startswith("otel_scope_") and k not in {"job", "instance"}
                )
                out[(sample.name, labels)] = sample.value
    return out


def served(url: str, wanted: Series, timeout: float = 10) -> Series:
    """What ``url`` serves once it serves ``wanted`` (or when the time is up: the caller compares)."""
    return poll(lambda: (got := series(scrape(url))) == wanted and got, timeout, 0.1) or series(scrape(url))


def every_counter_line(
    write: Any, value: int, tag_sets: list[dict[str, str]] = TAG_SETS
) -> tuple[list[str], Series]:
    """One line per state store counter and tag set in the format ``write`` makes, and the series
    they must become: the catalogue's names, the tags by the tag value rule as labels (an id Airflow
    accepts as it is; no two values alike)."""
    lines, wanted = [], defaultdict(float)
    for tags in tag_sets:
        for metric in catalogue.STATE_STORE_METRICS:
            line_tags = {**tags, catalogue.OPERATION: "get"} if catalogue.OPERATION in metric.tags else tags
            normalized = naming.normalize_tags(line_tags)
            lines.append(write("airflow", metric.name, normalized, value))
            wanted[(metric.prometheus_name(), frozenset(normalized))] += value
    return lines, dict(wanted)


# -- the mapping file -----------------------------------------------------------------------------------


def test_mapping_has_one_exact_counter_mapping_per_catalogue_metric() -> None:
    doc = yaml.safe_load(MAPPING.read_text())
    assert set(doc) == {"mappings"}
    mappings = {m["match"]: m for m in doc["mappings"]}
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


# -- statsd_exporter -----------------------------------------------------------------------------------


@pytest.mark.prometheus
def test_statsd_exporter_maps_every_influx_line_to_the_catalogue_series(
    statsd_exporter: StatsdExporter,
) -> None:
    lines, wanted = every_counter_line(statsd_lines.influx_counter_line, 2)
    send_lines(statsd_exporter.udp_port, lines)
    assert served(statsd_exporter.url, wanted) == wanted


@pytest.mark.prometheus
@pytest.mark.parametrize("style", ["influx", "dogstatsd"])
def test_statsd_exporter_labels_every_id_airflow_accepts_as_it_is(
    statsd_exporter: StatsdExporter, style: str
) -> None:
    """Unicode ids, 250 characters long, two the old rule made one: each its own series, its labels
    the DAG's and task's ids exactly."""
    write = statsd_lines.influx_counter_line if style == "influx" else statsd_lines.dogstatsd_counter_line
    lines, wanted = every_counter_line(write, 2, ID_TAG_SETS)
    send_lines(statsd_exporter.udp_port, lines)
    got = served(statsd_exporter.url, wanted)
    assert got == wanted
    assert {(dict(labels)["dag_id"], dict(labels)["task_id"]) for _, labels in got} == {
        (value, value[::-1]) for value in AIRFLOW_IDS
    }


@pytest.mark.prometheus
def test_statsd_exporter_reads_every_dogstatsd_line_too(statsd_exporter: StatsdExporter) -> None:
    lines, wanted = every_counter_line(statsd_lines.dogstatsd_counter_line, 3)
    send_lines(statsd_exporter.udp_port, lines)
    assert served(statsd_exporter.url, wanted) == wanted


@pytest.mark.prometheus
def test_statsd_exporter_drops_a_line_that_mixes_tag_styles(statsd_exporter: StatsdExporter) -> None:
    """What the notes warn about; the backends never write such a line (above): the exporter drops
    it and says why in its own counter. The line after it is read."""
    good = statsd_lines.influx_counter_line("airflow", "task_state_store.write", (("dag_id", "d"),), 1)
    send_lines(statsd_exporter.udp_port, ["airflow.task_state_store.write,dag_id=d:1|c|#task_id:t", good])
    wanted = {("airflow_task_state_store_write_total", frozenset({("dag_id", "d")})): 1.0}
    assert served(statsd_exporter.url, wanted) == wanted
    text = scrape(statsd_exporter.url)
    assert 'statsd_exporter_sample_errors_total{reason="mixed_tagging_styles"} 1' in text.splitlines()


# -- the Collector's StatsD receiver ------------------------------------------------------------------


@pytest.mark.prometheus
def test_the_collector_reads_every_dogstatsd_line_the_backend_writes(collector: Collector) -> None:
    lines, wanted = every_counter_line(statsd_lines.dogstatsd_counter_line, 3)
    send_lines(collector.statsd_port, lines)
    assert served(collector.url(), wanted) == wanted


@pytest.mark.prometheus
def test_the_collector_labels_every_id_airflow_accepts_as_it_is(collector: Collector) -> None:
    lines, wanted = every_counter_line(statsd_lines.dogstatsd_counter_line, 3, ID_TAG_SETS)
    send_lines(collector.statsd_port, lines)
    got = served(collector.url(), wanted)
    assert got == wanted
    assert {dict(labels)["dag_id"] for _, labels in got} == set(AIRFLOW_IDS)


@pytest.mark.prometheus
def test_the_collector_does_not_read_influxdb_tags(collector: Collector) -> None:
    """Why InfluxDB-StatsD goes to statsd_exporter: to the Collector the tags are part of the name,
    which the shipped filter does not know, so nothing comes out; a DogStatsD line after it does."""
    tags = naming.normalize_tags(TAG_SETS[0])
    influx = statsd_lines.influx_counter_line("airflow", "task_state_store.write", tags, 1)
    dog = statsd_lines.dogstatsd_counter_line("airflow", "task_state_store.read_found", tags, 1)
    send_lines(collector.statsd_port, [influx])
    send_lines(collector.statsd_port, [dog])
    wanted = {("airflow_task_state_store_read_found_total", frozenset(tags)): 1.0}
    assert served(collector.url(), wanted) == wanted
    assert "task_state_store_write" not in scrape(collector.url())


# -- the backends' datagrams, for the proposal's calls -------------------------------------------------


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


#: What scenario_calls counts: (series name, labels) -> calls. "team a" is "team%20a" by the rule.
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
    "team_name": "team%20a",
}
EXPECTED: Series = {
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


def calls_through(backend: str, port: int) -> None:
    """scenario_calls through ``backend`` to 127.0.0.1:``port``, flushed."""
    emitter = store_metrics.configure(backend, host="127.0.0.1", port=port, flush_interval=60.0)
    scenario_calls(emitter)
    assert emitter.flush(5.0)


@pytest.mark.prometheus
def test_the_statsd_backend_datagrams_add_up_to_the_calls_in_statsd_exporter(
    statsd_exporter: StatsdExporter,
) -> None:
    """Team a's series and the others share metric names with different label sets (team_name only
    where a run has a team): the exporter serves both."""
    calls_through("statsd", statsd_exporter.udp_port)
    assert served(statsd_exporter.url, EXPECTED) == EXPECTED


@pytest.mark.prometheus
def test_the_dogstatsd_backend_datagrams_add_up_to_the_calls_in_both(
    statsd_exporter: StatsdExporter, collector: Collector
) -> None:
    calls_through("dogstatsd", collector.statsd_port)
    calls_through("dogstatsd", statsd_exporter.udp_port)
    assert served(collector.url(), EXPECTED) == EXPECTED
    assert served(statsd_exporter.url, EXPECTED) == EXPECTED


@pytest.mark.prometheus
def test_the_opentelemetry_endpoint_serves_the_series_statsd_exporter_serves(
    statsd_exporter: StatsdExporter,
) -> None:
    """The plugin's own OpenTelemetry Prometheus endpoint (scraped over HTTP) shows the names, labels
    and values statsd_exporter made of the statsd backend's datagrams for the same calls."""
    calls_through("statsd", statsd_exporter.udp_port)
    assert served(statsd_exporter.url, EXPECTED) == EXPECTED
    port = free_port()
    emitter = store_metrics.configure(
        "otel", exporter="prometheus", prometheus_port=port, prometheus_host="127.0.0.1"
    )
    scenario_calls(emitter)

    def endpoint() -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                return str(response.read().decode())
        except OSError:
            return None  # the emitter's worker thread opens the endpoint

    wait_until(endpoint, timeout=10)
    # An empty label value is no label to Prometheus (the exporter writes team_name="" on series
    # without a team when others of the metric have one): series() leaves it out.
    assert series(endpoint() or "") == series(scrape(statsd_exporter.url)) == EXPECTED


# -- the ported observation rule, held equal to the real exporter ------------------------------------


def sampled_histogram_lines(style: str, worker: str) -> list[str]:
    """The lines the ``style`` backend writes for one request-duration histogram series whose buckets
    hold from one to 99,991 observations each (sample rates down to ~1e-5), and one above the last
    bound."""
    bounds = catalogue.SERVER_DURATION.buckets
    counts = tuple((1, 3, 7, 1000, 99_991, 2, 0, 5)[i % 8] for i in range(len(bounds) + 1))
    means = [*(b * 0.9 for b in bounds), bounds[-1] * 2]
    buckets = Buckets(bounds, counts, tuple(n * m for n, m in zip(counts, means, strict=True)))
    tags = naming.normalize_tags({**SERVER_TAGS, "worker": worker})
    write = (
        statsd_lines.dogstatsd_histogram_lines
        if style == "dogstatsd"
        else statsd_lines.influx_histogram_lines
    )
    return write("airflow", catalogue.SERVER_DURATION.name, tags, buckets)


SERVER_TAGS = {"store": "task", "operation": "get", "status_class": "2xx", "value_size": "le_1KiB"}


def exporter_histogram(text: str, worker: str) -> tuple[list[int], float, int]:
    """The request-duration histogram statsd_exporter serves for ``worker``: per-bucket counts (not
    cumulative, the overflow last), its sum and its count."""
    name = catalogue.SERVER_DURATION.prometheus_name()
    cumulative: list[tuple[float, int]] = []
    total, count = 0.0, 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("worker") != worker:
                continue
            if sample.name == f"{name}_bucket":
                cumulative.append((float(sample.labels["le"]), int(sample.value)))
            elif sample.name == f"{name}_sum":
                total = sample.value
            elif sample.name == f"{name}_count":
                count = int(sample.value)
    running = [n for _, n in sorted(cumulative)]
    return [b - a for a, b in zip([0, *running], running, strict=False)], total, count


@pytest.mark.prometheus
def test_the_ported_observation_rule_agrees_with_the_real_exporter(statsd_exporter: StatsdExporter) -> None:
    """support.statsd_observations (the unit tests' quick model of statsd_exporter: ``int(1/rate)``
    observations per sampled line) gives the buckets, sum and count the real exporter serves for the
    same lines, in both tag styles."""
    sent = {style: sampled_histogram_lines(style, style) for style in ("dogstatsd", "statsd")}
    send_lines(statsd_exporter.udp_port, [line for lines in sent.values() for line in lines])
    bounds = catalogue.SERVER_DURATION.buckets
    for style, lines in sent.items():
        counts, total = exporter_buckets(lines, bounds)
        wanted = sum(counts)

        def arrived(worker: str = style, n: int = wanted) -> bool:
            return exporter_histogram(scrape(statsd_exporter.url), worker)[2] == n

        poll(arrived, 20, 0.2)
        got_counts, got_total, got_count = exporter_histogram(scrape(statsd_exporter.url), style)
        assert (got_counts, got_count) == (counts, wanted), style
        assert got_total == pytest.approx(total, rel=1e-12), style


# -- UDP: what a burst the exporter cannot read at once keeps ---------------------------------------

#: A read buffer the tests ask statsd_exporter for (``--statsd.read-buffer``): 4 MiB.
READ_BUFFER = 4 * 1024 * 1024
#: Full datagrams (the backends' 1432 bytes) sent while the exporter is stopped.
BURST = 1000


def rmem_max() -> int:
    """The largest receive buffer a process may ask for (Linux ``net.core.rmem_max``)."""
    return int(Path("/proc/sys/net/core/rmem_max").read_text())


def packets_read(url: str) -> int:
    """statsd_exporter's own count of the UDP datagrams it has read."""
    for family in text_string_to_metric_families(scrape(url)):
        for sample in family.samples:
            if sample.name == "statsd_exporter_udp_packets_total":
                return int(sample.value)
    return 0


def kept_of_a_burst(exporter: StatsdExporter) -> int:
    """Stop the exporter, send it BURST full datagrams (loopback UDP never blocks the sender: what
    the socket cannot hold is dropped), resume it, and count what it reads: a last line, sent after
    the burst, is served only once everything before it in the socket has been read."""
    before = packets_read(exporter.url)
    line = statsd_lines.influx_counter_line("airflow", "task_state_store.write", (("dag_id", "d" * 40),), 1)
    datagram = "\n".join([line] * (1432 // (len(line) + 1))).encode()
    assert 1400 < len(datagram) <= 1432
    exporter.proc.send_signal(signal.SIGSTOP)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for _ in range(BURST):
                sock.sendto(datagram, ("127.0.0.1", exporter.udp_port))
    finally:
        exporter.proc.send_signal(signal.SIGCONT)
    last = statsd_lines.influx_counter_line("airflow", "task_state_store.clear", (("dag_id", "last"),), 1)
    send_lines(exporter.udp_port, [last])
    poll(lambda: "airflow_task_state_store_clear_total" in scrape(exporter.url), 20, 0.1)
    return packets_read(exporter.url) - before - 1


@pytest.mark.prometheus
def test_a_burst_is_bounded_by_the_exporter_s_socket_buffer(tmp_path: Path) -> None:
    """What a burst the chart's exporter cannot read at once keeps: with the kernel's default receive
    buffer only a small part of 1,000 full datagrams (~1.4 MB) is kept; ``--statsd.read-buffer``
    keeps them all, where ``net.core.rmem_max`` allows the size (the kernel caps the request there)."""
    mappings = yaml.safe_load(MAPPING.read_text())["mappings"]
    for name in ("default", "raised"):
        (tmp_path / name).mkdir()
    default = StatsdExporter(tmp_path / "default", "chart", mappings)
    try:
        kept_by_default = kept_of_a_burst(default)
    finally:
        default.stop()
    assert 0 < kept_by_default < BURST
    raised = StatsdExporter(tmp_path / "raised", "chart", mappings, [f"--statsd.read-buffer={READ_BUFFER}"])
    try:
        kept_raised = kept_of_a_burst(raised)
    finally:
        raised.stop()
    if rmem_max() >= READ_BUFFER:
        assert kept_raised == BURST, (kept_by_default, kept_raised)
    else:
        assert kept_by_default <= kept_raised < BURST, (rmem_max(), kept_by_default, kept_raised)
