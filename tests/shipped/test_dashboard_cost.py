"""The dashboard's queries run against a real Prometheus holding recorded calls, and what they cost.

A small synthetic data set (tests/support/dashboard_cost.py: counters of 2 DAGs x 2 tasks over 3
hours, rules.yml's recorded calls backfilled by promtool) and every query of every panel, collapsed
rows included, as Grafana sends it over the default range: each executes, each task-side panel
finds data, and Prometheus' own statistics (stats=all) say what the load reads. docs/alerts.md
reports the same measurement on a larger set, for this dashboard and the previous one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.dashboard_cost import Data, load_queries, measure, prometheus_with
from testbed.repository import ROOT

#: The table's delete and clear columns: the synthetic tasks make none.
NO_CALLS = {("Calls by DAG and task", "C"), ("Calls by DAG and task", "D")}

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]


def test_every_query_executes_over_the_recorded_calls_and_the_load_is_measured(tmp_path: Path) -> None:
    dashboard = json.loads((ROOT / "dashboards" / "store-metrics.json").read_text())
    data = Data(hours=3, dags=2, tasks=2)
    prom, end = prometheus_with(tmp_path, data, [ROOT / "collector" / "rules.yml"])
    try:
        every = measure(prom, dashboard, end, collapsed=True)
        load = measure(prom, dashboard, end)
    finally:
        prom.stop()
    # 50 on load: the open rows' 49 queries that draw lines, and the one that brings "Calls per second
    # by DAG" its exemplars (Grafana runs it as a range query too; its lines are hidden).
    assert len(every) == len(load_queries(dashboard, collapsed=True)) > len(load) == 50
    # The synthetic tasks read, write and fail get(): every panel of the open rows shows something,
    # but the deletes and clears (none made) and the asset store's absent reads.
    empty = {(c.query.panel, c.query.ref) for c in load if c.series == 0}
    assert {panel for panel, ref in empty if (panel, ref) not in NO_CALLS} <= {
        "Deletes and clears",
        "Deletes and clears per second by DAG",
        "Deletes and clears by DAG and task",
        "Asset store calls per second by operation",
        "Task store calls per second by operation",
        "Errors per second by store and method",
        "Errors by DAG, task and method",
        "Resume rate per DAG and task: resumed / (resumed + not resumed)",  # no task is retried
    }, empty
    assert all(c.samples > 0 for c in load if c.series)
    # One sample per recorded series and minute: a day's range reads at most a day of each.
    recorded_series = data.series  # one instance per raw series here
    assert sum(c.samples for c in load) < 4 * len(load) * recorded_series * (data.hours * 60 + 1)
