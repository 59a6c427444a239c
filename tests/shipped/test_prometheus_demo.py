"""End to end, source 1: ``store-metrics demo`` scraped by a real Prometheus 3 (the newest pin of
``testbed.peers``) that evaluates the rules; every dashboard query and every rule expression is
checked against the calls the scenarios made.

``store-metrics demo --serve --runs 2``: the upstream proposal's four scenarios as real DAGs under
``dag.test()`` through the plugin (OpenTelemetry backend, Prometheus exporter). Every series first
appears during the demo, and the recorded calls count a new series in full, so over a range that
covers the whole demo the "calls in range" queries must return exactly the totals the scenarios
made. The rules and the dashboard are exported with ``E2E_SETTINGS`` (the rules
recording every second, as the 1 s scrapes arrive); the model and checks: ``support.e2e``.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.e2e import (
    DEMO_VARIABLES,
    JOB,
    PY_OPERATOR,
    Model,
    Prometheus,
    alerting_rules,
    as_groups,
    assert_exact_groups,
    assert_groups,
    dashboard,
    dashboard_rows,
    dashboard_targets,
    demo_model,
    expected,
    filters_of,
    interpolate,
    mean,
    never_read_tasks,
    recorded,
    wait_for,
)
from testbed.ports import free_port
from testbed.processes import stop
from testbed.waiting import wait_until

pytestmark = pytest.mark.peers

DEMO_RUNS = 2


@dataclass
class DemoSource:
    prom: Prometheus
    model: Model
    end: float
    exported: Path


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, e2e_export: Path) -> Iterator[DemoSource]:
    tmp = tmp_path_factory.mktemp("demo")
    port = free_port()
    prom = Prometheus(tmp, f"127.0.0.1:{port}", e2e_export, role="newest")
    command = Path(sys.executable).with_name("store-metrics")
    log = (tmp / "demo.out").open("w+")
    proc = subprocess.Popen(
        # --again 0: no more calls while serving, so the totals are exactly the model's.
        [str(command), "demo", "--serve", "--port", str(port), "--runs", str(DEMO_RUNS), "--again", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp,
    )
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            log.write(line)
            log.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: (
                any(line.startswith("serving http://") and "/metrics" in line for line in lines)
                or proc.poll() is not None
            ),
            120,
            "the demo to serve its endpoint",
        )
        assert proc.poll() is None, "store-metrics demo exited:\n" + "".join(lines)
        model = demo_model(DEMO_RUNS)
        total = sum(model.counts.values())
        # Every call recorded by the rules (1 s behind the scrape that holds it).
        wait_for(lambda: prom.recorded_total() == total, 30, f"the rules to record all {total} demo calls")
        end = prom.last_evaluation() + 0.001
        yield DemoSource(prom, model, end, e2e_export)
    finally:
        stop(proc, 15)
        reader.join(5)
        log.close()
        prom.stop()


def demo_range(demo: DemoSource) -> str:
    return f"{math.ceil(demo.end - demo.prom.started) + 60}s"  # reaches back before the first sample


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
@pytest.mark.parametrize("variables", DEMO_VARIABLES)
def test_demo_every_dashboard_query(demo: DemoSource, variables: dict[str, list[str]]) -> None:
    """Range queries over the whole demo return exactly the scenarios' totals; per-second queries
    exactly the recorded calls' means, in exactly the groups the scenarios made."""
    rng = demo_range(demo)
    filters = filters_of(variables)
    means = recorded(demo.prom, demo.end, rng, mean)
    rate_groups = 0
    for title, target, spec in dashboard_targets(demo.exported):
        expr = interpolate(target["expr"], variables, rng=rng, interval=rng)
        actual = as_groups(demo.prom.query(expr, demo.end), spec.by)
        what = f"{title} [{target['refId']}] with {variables or 'All'}"
        if spec.kind == "count":
            assert_groups(actual, expected(spec, demo.model, filters), rel=1e-9, what=what)
        else:
            # Each recorded series' mean calls per evaluation (1 s), summed as the spec says.
            wanted = expected(spec, means, filters, seconds=1.0)
            assert_exact_groups(actual, wanted, what)  # no group expected: none returned
            rate_groups += len(wanted)
    assert rate_groups > 0


#: The panels that have no data on the demo, and why.
NO_DATA_ON_THE_DEMO = {
    # Its asset watcher makes no failing call (a task of example_retries does).
    "Asset watcher errors per second by trigger and method",
    # Nothing it writes expires within its runs.
    "Expired entries not cleaned up, by DAG",
    # Only a stall of 100 ms or more is a long one: the in-process API's loop may have none.
    "Long stalls per second by state store route in flight",
}


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_lights_every_row_of_the_dashboard(demo: DemoSource) -> None:
    """`store-metrics demo --serve` and Prometheus with the shipped rules: every row of the shipped
    dashboard has data, the footprint, triggers, API server, Errors and Retries rows included; so does
    every panel but those said in NO_DATA_ON_THE_DEMO."""
    rng = demo_range(demo)
    rows = dashboard_rows(demo.exported)

    def has_data(panel: dict[str, Any]) -> bool:
        return any(
            demo.prom.query(interpolate(t["expr"], {}, rng=rng, interval=rng), time.time())
            for t in panel.get("targets", [])
        )

    def empty() -> dict[str, list[str]]:
        return {
            row: missing
            for row, panels in rows.items()
            if (
                missing := [
                    p["title"] for p in panels if p["title"] not in NO_DATA_ON_THE_DEMO and not has_data(p)
                ]
            )
        }

    # The API server's stall gauge is pushed at the demo's flush interval (10 s): wait, bounded.
    try:
        wait_for(lambda: not empty(), 45, "data in every panel")
    except AssertionError:
        assert empty() == {}, "panels without data on the demo"
    lit = {row for row, panels in rows.items() if any(has_data(p) for p in panels)}
    assert lit == set(rows)


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_headline_numbers(demo: DemoSource) -> None:
    """The proposal's numbers, read back through the dashboard's own queries."""
    rng = demo_range(demo)
    targets = {(title, t["refId"]): (t, spec) for title, t, spec in dashboard_targets(demo.exported)}

    def value(title: str, ref: str, variables: dict[str, list[str]], key: tuple[str, ...] = ()) -> float:
        target, spec = targets[(title, ref)]
        expr = interpolate(target["expr"], variables, rng=rng, interval=rng)
        return as_groups(demo.prom.query(expr, demo.end), spec.by)[key]

    dag02 = {"dag_id": ["state_store_metrics_02"]}
    # 02 ran 2 x 2 times: the asset store's first read was absent, the three later ones found it.
    assert value("Asset store found ratio", "A", dag02) == pytest.approx(3 / 4)
    assert value("Task store found ratio", "A", dag02) == 0
    found = "Found ratio by DAG (selected range)"
    assert value(found, "B", {}, ("state_store_metrics_02",)) == pytest.approx(3 / 4)
    assert value(found, "A", {}, ("state_store_metrics_01",)) == pytest.approx(1 / 2)
    # 03: two set() per run, one delete and one clear; asset set + delete.
    dag03 = {"dag_id": ["state_store_metrics_03"]}
    assert value("Deletes and clears", "A", dag03) == 3 * DEMO_RUNS  # task delete + task clear + asset delete
    assert value("State store calls", "A", {}) == sum(demo.model.counts.values())
    assert value("Calls by operator", "A", {}, ("MockBatchOperator",)) == 2 * DEMO_RUNS


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_variables(demo: DemoSource) -> None:
    """The template variables' label_values() queries, as Grafana sends them to Prometheus."""
    variables = {v["name"]: v for v in dashboard(demo.exported)["templating"]["list"] if v["type"] == "query"}
    dags = {dict(ls)["dag_id"] for _, ls in demo.model.counts}
    assert label_values(demo.prom, variables["cluster"]["query"], {}) == set()  # no cluster label here
    assert label_values(demo.prom, variables["job"]["query"], {}) == {JOB}
    # One job carries the demo's tasks, its asset watcher and its API server: each component's job
    # variable offers it alone.
    for name in ("watcher_job", "server_job"):
        assert label_values(demo.prom, variables[name]["query"], {}) == {JOB}, name
    assert label_values(demo.prom, variables["dag_id"]["query"], {}) == dags
    assert label_values(demo.prom, variables["team_name"]["query"], {}) == set()
    assert label_values(demo.prom, variables["task_id"]["query"], {"dag_id": ["state_store_metrics_02"]}) == {
        "touch_asset_store"
    }
    # Every value the calls carry, the demo's asset watcher (its trigger class, asset_watcher) included.
    operators = {dict(ls)["operator"] for _, ls in demo.model.counts}
    assert operators == {PY_OPERATOR, "MockBatchOperator", "QueueWatermarkTrigger"}
    assert label_values(demo.prom, variables["operator"]["query"], {}) == operators
    assert label_values(demo.prom, variables["run_type"]["query"], {}) == {"manual", "asset_watcher"}


def label_values(prom: Prometheus, query: str, variables: Mapping[str, list[str] | None]) -> set[str]:
    """Grafana's ``label_values(selector, label)``: /api/v1/label/<label>/values?match[]=selector."""
    m = re.fullmatch(r"label_values\(([\w:]+(?:\{.*\})?), (\w+)\)", query)
    assert m, query
    selector = interpolate(m.group(1), variables, rng="1h", interval="1m")
    now = time.time()
    data = prom.api(f"label/{m.group(2)}/values", **{"match[]": selector, "start": now - 3600, "end": now})
    return set(data)


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_rules(demo: DemoSource) -> None:
    """The recorded calls are exactly the scenarios' calls, per series; the alerts pick the right
    tasks; Prometheus evaluates every rule without error."""
    rng = demo_range(demo)
    totals = recorded(demo.prom, demo.end, rng, sum)
    assert set(totals.counts) == set(demo.model.counts)
    assert all(totals.counts[k] == v for k, v in demo.model.counts.items()), (
        totals.counts,
        demo.model.counts,
    )
    alerts = alerting_rules(demo.exported)
    fired = {
        (s["metric"]["dag_id"], s["metric"]["task_id"], s["metric"].get("team_name", ""))
        for s in demo.prom.query(alerts["StateStoreTaskStateNeverRead"]["expr"], demo.end)
    }
    assert fired == never_read_tasks(demo.model) == {("state_store_metrics_03", "delete_and_clear", "")}
    # example_retries' failing call: 1 of its 8 calls (the export's floor is 1 call here).
    failing = demo.prom.query(alerts["StateStoreErrorRateHigh"]["expr"], demo.end)
    assert {s["metric"]["dag_id"] for s in failing} == {"example_retries"}
    assert demo.prom.query(alerts["StateStoreFailingAcrossDags"]["expr"], demo.end) == []
    demo.prom.rules_healthy()

    def pending() -> set[tuple[str, str]]:
        return {(a["labels"]["alertname"], a["labels"]["dag_id"]) for a in demo.prom.api("alerts")["alerts"]}

    # The hygiene group evaluates every second on its own schedule: wait (bounded) for its verdict.
    wait_until(lambda: ("StateStoreTaskStateNeverRead", "state_store_metrics_03") in pending(), 30)
    assert {dag for name, dag in pending() if name == "StateStoreTaskStateNeverRead"} == {
        "state_store_metrics_03"
    }
