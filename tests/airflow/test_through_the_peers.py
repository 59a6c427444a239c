"""Every topology end to end through the real peers, from real Airflow tasks, on Prometheus 3.

For each topology (``support.peer_topologies``: InfluxDB-tagged StatsD to statsd_exporter,
DogStatsD to the Collector's StatsD receiver, OTLP to the Collector's ``deltatocumulative``), one
``airflow standalone`` runs the upstream proposal's scenarios, the parallel, mapped and async DAGs, a
DAG whose calls raise and the asset watchers, every component sending through that backend; each
pinned peer carries it to Prometheus 3.16 (newest) and 3.13.5 (LTS). Checked, per peer and per
Prometheus:

* what the sender put on the wire is exactly the calls made (six task processes at once among them);
* the series each peer serves, and the calls the rules record, are exactly the calls made, per series
  (the retried attempts too, where the retried tasks' DAG runs);
* every row of the shipped dashboard has data, and only the panels said below have none;
* the error alert fires for the DAG whose calls raise, and the Alertmanager pin receives it;
* the API server's request histograms count exactly its requests, where the path carries histograms;
* the inventory's gauges are what the metadata database holds;
* statsd_exporter's real HELP and ``le`` output, and what Prometheus 3 makes of ``le``;
* the Collector's UTF-8 translation strategies: what Prometheus 3 (and 2.42) store, and which the
  rules read.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from store_metrics import catalogue, naming
from support import e2e
from support.exported import Exported
from support.peer_servers import scrape
from support.peer_topologies import (
    ASSET_ENTRIES,
    EXPORT_SETTINGS,
    RECORDED,
    SERVER_REQUESTS,
    TASK_ENTRIES,
    TOPOLOGIES,
    Pipeline,
    Topology,
    held,
    read_by_the_rules,
    recorded_calls,
    running,
    scraped_by,
    with_retries,
)
from support.prometheus import PrometheusServer
from support.totals import totals
from testbed import peers
from testbed.waiting import poll

pytestmark = [pytest.mark.airflow, pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

DURATION = "airflow_api_server_state_store_request_duration_milliseconds"
COUNTER_LINE = re.compile(r":[0-9]+\|c(\||$)")


@pytest.fixture(scope="module", params=TOPOLOGIES)
def topology(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, exported: Exported
) -> Iterator[Topology]:
    name = request.param
    with running(name, tmp_path_factory.mktemp(f"peers-{name}"), exported(**EXPORT_SETTINGS)) as ran:
        yield ran


def test_the_wire_carries_exactly_the_calls_made(topology: Topology) -> None:
    """What the components sent (kept by the fan-out before it forwarded it) is the calls, per
    series: nothing lost when a task process exits right after its last call, six at once."""
    barrier = Path(topology.airflow.env["STORE_METRICS_TEST_BARRIER"])
    assert len(list(barrier.iterdir())) == 6  # every worker passed the four-at-once barrier
    if topology.name == "otlp":
        assert not topology.lines  # OTLP: the Collectors' series are the check (below)
        return
    style = "dogstatsd" if topology.name == "dogstatsd" else "influx"
    counters = [line for line in topology.lines if COUNTER_LINE.search(line)]  # not the inventory's gauges
    assert dict(totals(counters, style)) == dict(topology.calls)


def test_every_peer_serves_exactly_the_calls_made(topology: Topology) -> None:
    model = topology.model()
    for role, prom in topology.proms.items():
        for pipeline in topology.carrying:
            got = held(prom, pipeline.cluster, at=topology.end)
            assert dict(got.counts) == dict(model.counts), (role, pipeline.peer)


def test_the_rules_record_exactly_the_calls_made(topology: Topology) -> None:
    model = topology.model()
    for role, prom in topology.proms.items():
        for pipeline in topology.carrying:
            got = recorded(prom, pipeline, topology.end)
            assert dict(got.counts) == dict(model.counts), (role, pipeline.peer)


def recorded(prom: PrometheusServer, pipeline: Pipeline, at: float) -> e2e.Model:
    """The calls the rules recorded for ``pipeline``, summed per series, keyed as the model is."""
    query = f'sum_over_time({{{RECORDED},cluster="{pipeline.cluster}"}}[1h])'
    out = e2e.Model()
    for sample in prom.query(query, at):
        labels = sample["metric"]
        tags = frozenset(
            (k, v) for k, v in labels.items() if v and k not in ("job", "cluster", "store", "outcome")
        )
        name = e2e._series_name(labels["store"], labels["outcome"])
        out.counts[(name, tags)] += float(sample["value"][1])
    return out


# -- the dashboard --------------------------------------------------------------------------------------

#: Panels without data on every peer, and why.
NO_DATA = {
    "Expired entries not cleaned up, by DAG": "nothing the runs write expires within them",
}
RESUME_RATE = "Resume rate per DAG and task: resumed / (resumed + not resumed)"
#: Panels that may or may not have data: only an event-loop stall of 100 ms or more is a long one.
MAYBE = {"Long stalls per second by state store route in flight"}
#: Panels without data on the Airflow chart's statsd_exporter, and why: the Helm values' mappings
#: (``statsd.extraMappings``) are the task side's and the API server's; on the chart the inventory
#: serves its own endpoint (kubernetes/base/inventory.yaml), so its gauges reach this exporter only
#: here, under statsd_exporter's default names, without the unit suffixes the rules read.
NO_INVENTORY_MAPPINGS = {
    "Footprint age, by store": "no inventory mappings in the Helm values",
    "Inventory query duration, by store": "no inventory mappings in the Helm values",
}


#: Panels without data through the Collector's StatsD receiver, and why: it makes a gauge of each
#: histogram or distribution line (the API server's latency, sizes and stalls), and names gauges
#: without unit suffixes (the stall maximum, the inventory's age and query duration). The docs say
#: so (api-server-health.md, footprint.md): over a Collector, send those over OTLP.
STATSD_RECEIVER = {
    "Request latency p99 by operation and value size": "histograms become gauges",
    "Request latency p50 by operation and value size": "histograms become gauges",
    "Value sizes (selected range)": "histograms become gauges",
    "Event-loop stall: largest per interval, by worker": "no unit suffix (_milliseconds)",
    "Event-loop stalled share, by worker": "histograms become gauges",
    "Event-loop stalls by length (selected range)": "histograms become gauges",
    "Footprint age, by store": "no unit suffix (_seconds)",
    "Inventory query duration, by store": "no unit suffix (_milliseconds)",
}


def without_data(topology: Topology, pipeline: Pipeline) -> dict[str, str]:
    """The panels that have no data on ``pipeline``, and why."""
    wanted = dict(NO_DATA)
    if pipeline.cluster == peers.pin_for("statsd_exporter", "chart").key:
        wanted.update(NO_INVENTORY_MAPPINGS)
    if topology.name == "dogstatsd":
        wanted.update(STATSD_RECEIVER)
    if not with_retries(topology.name):
        wanted[RESUME_RATE] = "no retried task runs over OTLP (see support.peer_topologies.with_retries)"
    return wanted


def job_of(prom: PrometheusServer, pipeline: Pipeline) -> str:
    """The one job every series of ``pipeline`` carries (the dashboard's $job shows a deployment)."""
    jobs: set[str] = {
        s["metric"]["job"]
        for s in prom.query(f'count by (job) ({{cluster="{pipeline.cluster}",__name__=~"airflow_.+"}})')
    }
    assert len(jobs) == 1, (pipeline.peer, jobs)
    return jobs.pop()


def panels_without_data(
    topology: Topology, prom: PrometheusServer, pipeline: Pipeline
) -> dict[str, set[str]]:
    """Row title -> the titles of its panels whose queries return nothing for ``pipeline``."""
    job = job_of(prom, pipeline)
    rng = f"{int(topology.end - prom.started) + 60}s"

    def has_data(panel: dict[str, Any]) -> bool:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$cluster", pipeline.cluster)
            if prom.query(e2e.interpolate(expr, {}, rng=rng, interval=rng, job=job), topology.end):
                return True
        return False

    rows = e2e.dashboard_rows(topology.exported)
    return {row: {p["title"] for p in panels if not has_data(p)} for row, panels in rows.items()}


def test_every_row_of_the_dashboard_has_data(topology: Topology) -> None:
    """Every row lights on every peer; the panels without data are exactly those said above."""
    rows = e2e.dashboard_rows(topology.exported)
    for role, prom in topology.proms.items():
        for pipeline in topology.carrying:
            empty = panels_without_data(topology, prom, pipeline)
            got = {t for titles in empty.values() for t in titles} - MAYBE
            assert got == set(without_data(topology, pipeline)), (role, pipeline.peer)
            # No row is dark but the Retries row over OTLP, where no task is retried.
            dark = [row for row, titles in empty.items() if len(titles) == len(rows[row])]
            assert dark == ([] if with_retries(topology.name) else ["Retries: did they resume?"])


# -- alerts ------------------------------------------------------------------------------------------------


def test_the_error_alert_fires_for_the_failing_dag_and_alertmanager_receives_it(topology: Topology) -> None:
    def wanted(role: str) -> set[tuple[str, str]]:
        return {(p.cluster, "store_metrics_errors") for p in topology.pipelines if read_by_the_rules(p, role)}

    def firing(prom: PrometheusServer) -> set[tuple[str, str]]:
        return {
            (a["labels"]["cluster"], a["labels"]["dag_id"])
            for a in prom.api("alerts")["alerts"]
            if a["labels"]["alertname"] == "StateStoreErrorRateHigh" and a["state"] == "firing"
        }

    everywhere: set[tuple[str, str]] = set()
    for role, prom in topology.proms.items():
        poll(partial(lambda p, w: firing(p) >= w, prom, wanted(role)), 30, 0.2)
        assert firing(prom) == wanted(role), (role, prom.api("alerts")["alerts"])
        everywhere |= wanted(role)

    def received() -> set[tuple[str, str]]:
        return topology.alertmanager.holding("StateStoreErrorRateHigh")

    poll(lambda: received() >= everywhere, 30, 0.2)
    assert received() == everywhere


# -- the API server's histograms and the inventory's gauges ----------------------------------------

#: The Execution API operation of each outcome.
OPERATION = {"read_found": "get", "read_absent": "get", "write": "set", "delete": "delete", "clear": "clear"}


def groups(prom: PrometheusServer, expr: str, at: float, *labels: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(s["metric"].get(label, "") for label in labels): float(s["value"][1])
        for s in prom.query(expr, at)
    }


def test_the_api_server_counts_every_request_in_its_histograms(topology: Topology) -> None:
    """The API server's requests are the tasks' calls (by store and outcome); where the path carries
    histograms (statsd_exporter with the exported mappings, OTLP), each request is one observation of
    its duration histogram. The Collector's StatsD receiver makes a gauge of each distribution."""
    requests = {(store, outcome): n for (store, outcome), n in topology.requests().items()}
    by_operation: dict[tuple[str, ...], float] = defaultdict(float)
    for (store, outcome), n in requests.items():
        by_operation[(store, OPERATION[outcome])] += n
    for role, prom in topology.proms.items():
        for pipeline in topology.carrying:
            where = f'{{cluster="{pipeline.cluster}"}}'
            served = groups(
                prom, f"sum by (store, outcome) ({SERVER_REQUESTS}{where})", topology.end, "store", "outcome"
            )
            assert served == requests, (role, pipeline.peer)
            if topology.name == "dogstatsd":
                assert not prom.query(f"{DURATION}_count{where}"), (role, pipeline.peer)
                assert prom.query(f"airflow_api_server_state_store_request_duration{where}")
                continue
            observed = groups(
                prom,
                f"sum by (store, operation) ({DURATION}_count{where})",
                topology.end,
                "store",
                "operation",
            )
            assert observed == dict(by_operation), (role, pipeline.peer)


def test_the_inventory_gauges_are_what_the_database_holds(topology: Topology) -> None:
    home = topology.airflow.home
    tasks = {
        (dag, task): float(n)
        for dag, task, n in home.query("select dag_id, task_id, count(*) from task_state_store group by 1, 2")
    }
    assets = {
        (naming.tag_value(name),): float(n)
        for name, n in home.query(
            "select a.name, count(*) from asset_state_store s join asset a on a.id = s.asset_id group by 1"
        )
    }
    assert tasks and assets
    for role, prom in topology.proms.items():
        for pipeline in topology.carrying:
            where = f'{{cluster="{pipeline.cluster}"}}'
            got = groups(
                prom, f"sum by (dag_id, task_id) ({TASK_ENTRIES}{where})", topology.end, "dag_id", "task_id"
            )
            assert got == tasks, (role, pipeline.peer)
            got = groups(prom, f"sum by (asset) ({ASSET_ENTRIES}{where})", topology.end, "asset")
            assert got == assets, (role, pipeline.peer)


# -- what each peer makes of names, HELP and buckets ----------------------------------------------------


def test_what_each_peer_makes_of_names_help_and_buckets(topology: Topology) -> None:
    """statsd_exporter: the mappings' HELP and the catalogue's buckets as it prints them, and what
    Prometheus 3 stores of ``le``. The Collector's StatsD receiver: gauges without unit suffixes.
    OTLP: what each translation strategy's names become on Prometheus 3 and 2.42, and which ones
    the rules read."""
    {"statsd": statsd_help_and_le, "dogstatsd": statsd_receiver_names, "otlp": translation_strategies}[
        topology.name
    ](topology)


def statsd_help_and_le(topology: Topology) -> None:
    for pipeline in topology.carrying:
        text = scrape(pipeline.url).splitlines()
        for metric in catalogue.STATE_STORE_METRICS:
            assert f"# HELP {metric.prometheus_name()} {metric.description}" in text, pipeline.peer
        bounds = [f"{b:g}" for b in catalogue.DURATION_BUCKETS_MS]  # as Go prints a float64
        printed = {le_of(line) for line in text if line.startswith(f"{DURATION}_bucket{{")}
        assert printed == {*bounds, "+Inf"}, pipeline.peer
        for role, prom in topology.proms.items():
            stored = {
                s["metric"]["le"] for s in prom.query(f'{DURATION}_bucket{{cluster="{pipeline.cluster}"}}')
            }
            # Prometheus 3 normalises le to a float's text: 1 -> 1.0 (2.42 keeps what it read).
            assert stored == {*(str(float(b)) for b in catalogue.DURATION_BUCKETS_MS), "+Inf"}, role


def le_of(line: str) -> str:
    found = re.search(r'le="([^"]+)"', line)
    assert found, line
    return found.group(1)


def statsd_receiver_names(topology: Topology) -> None:
    for pipeline in topology.carrying:
        text = scrape(pipeline.url).splitlines()
        assert "# TYPE airflow_api_server_state_store_request_duration gauge" in text, pipeline.peer
        assert "# TYPE airflow_state_store_inventory_footprint_age gauge" in text, pipeline.peer
        assert not [line for line in text if "_milliseconds" in line or "_seconds" in line], pipeline.peer


#: What each strategy's state store counter names are, on a scraper with UTF-8 names (Prometheus 3)
#: and on one without (2.42, or 3 with ``metric_name_escaping_scheme: underscores``).
STRATEGY_NAMES = {
    ("NoUTF8EscapingWithSuffixes", True): lambda m: m.full_name() + "_total",
    ("NoUTF8EscapingWithSuffixes", False): lambda m: m.prometheus_name(),
    ("NoTranslation", True): lambda m: m.full_name(),
    ("NoTranslation", False): lambda m: m.prometheus_name().removesuffix("_total"),
}
ANY_STATE_STORE_NAME = (
    '__name__=~"airflow[._](task|asset)_state_store[._]'
    '(read_found|read_absent|write|delete|clear|error)(_total)?"'
)


def translation_strategies(topology: Topology) -> None:
    """Only names with ``_total`` in underscores reach the rules: the default strategy, or a UTF-8 one
    that the scraper escapes back (2.42 always; 3 with ``metric_name_escaping_scheme: underscores``)."""
    used = {catalogue.get(metric_of(name)) for name, _ in topology.model().counts}
    total = sum(topology.calls.values())
    for role, prom in topology.proms.items():
        for pipeline in topology.pipelines:
            if pipeline.strategy is None or not scraped_by(pipeline, role):
                continue
            utf8 = role != "minimum" and not pipeline.escaping
            names = {
                s["metric"]["__name__"]
                for s in prom.query(f'{{{ANY_STATE_STORE_NAME},cluster="{pipeline.cluster}"}}')
            }
            assert names == {STRATEGY_NAMES[(pipeline.strategy, utf8)](m) for m in used}, (
                role,
                pipeline.cluster,
            )
            read = read_by_the_rules(pipeline, role)
            assert read == (pipeline.strategy == "NoUTF8EscapingWithSuffixes" and not utf8)
            assert recorded_calls(prom, pipeline.cluster) == (total if read else 0), (role, pipeline.cluster)


def metric_of(prometheus_name: str) -> str:
    """The catalogue name (``task_state_store.write``) of a state store counter's series name."""
    found = re.fullmatch(r"airflow_(task|asset)_state_store_(\w+)_total", prometheus_name)
    assert found, prometheus_name
    return f"{found.group(1)}_state_store.{found.group(2)}"
