"""The dashboard's collapsed rows: asset watchers (the Triggers row, and their absence from the DAG
panels) and the state store's footprint (store-metrics inventory's recorded gauges).

Each row's queries are checked as text (filters, series) and evaluated with promtool against
hand-computed values; the rest of the dashboard: ``test_dashboards.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from store_metrics import catalogue
from store_metrics.shipped.grafana.dashboard import footprint_specs, trigger_specs
from store_metrics.shipped.grafana.footprint_row import FOOTPRINT_ROW_TITLE
from store_metrics.shipped.grafana.rows import NO_WATCHERS_NOTE, TRIGGERS_ROW_TITLE
from store_metrics.shipped.grafana.server_row import SERVER_ROW_TITLE
from store_metrics.shipped.render_context import RenderContext
from support.dashboard import (
    DATASOURCE,
    PANEL_TYPES,
    VARIABLES,
    assert_laid_out,
    evaluate_queries,
    panel_exprs,
    panels,
    targets,
    with_rules,
)
from support.e2e import CALLS

#: The Triggers row's own job: the jobs carrying asset watchers' calls.
WATCHER_SCOPE = 'cluster="$cluster",job="$watcher_job"'


# -- the Triggers row: asset watchers (run_type="asset_watcher") ------------------------------------


def collapsed_row(title: str) -> dict[str, Any]:
    """The one row titled ``title`` (collapsed: its panels inside it)."""
    rows = [p for p in panels() if p["type"] == "row" and p["title"] == title]
    assert len(rows) == 1
    return rows[0]


def triggers_row() -> dict[str, Any]:
    return collapsed_row(TRIGGERS_ROW_TITLE)


def test_the_triggers_row_is_collapsed_just_above_the_server_row() -> None:
    row = triggers_row()
    top = panels()
    assert top[-2] == row and top[-1]["title"] == SERVER_ROW_TITLE  # the API server row stays last
    assert row["collapsed"] is True and len(row["panels"]) == 5
    assert_laid_out(row["panels"], below=row["gridPos"]["y"])
    for panel in row["panels"]:
        assert panel["type"] in PANEL_TYPES and panel["datasource"] == DATASOURCE
        assert "asset_watcher" in panel["description"]


def test_triggers_queries_keep_every_filter_and_only_watcher_calls() -> None:
    for panel in triggers_row()["panels"]:
        for target in panel["targets"]:
            selectors = re.findall(r"([\w:]+)\{([^}]*)\}", target["expr"])
            assert selectors
            for name, selector in selectors:
                assert name == CALLS and selector.startswith(WATCHER_SCOPE)
                for variable in VARIABLES:
                    assert f'{variable}=~"${variable}"' in selector, (panel["title"], selector)
                assert selector.endswith(',run_type="asset_watcher"'), selector
            assert ("$__range" in target["expr"]) == target["instant"] == (panel["type"] == "bargauge")
    titles = {p["title"] for p in triggers_row()["panels"]}
    assert {
        "Asset watcher found ratio by trigger and asset",
        "Asset watcher errors per second by trigger and method",
    } <= titles


_WATCHER = 'job="airflow",dag_id="<none>",run_type="asset_watcher"'
#: Two watchers and, with the same trigger class and store, a task's calls that must not count.
WATCHER_INPUT = [
    (
        f'airflow_asset_state_store_read_found_total{{{_WATCHER},task_id="s3_bucket",operator="S3KeyTrigger"}}',
        "0+6x20",
    ),
    (
        f'airflow_asset_state_store_read_absent_total{{{_WATCHER},task_id="s3_bucket",operator="S3KeyTrigger"}}',
        "0+2x20",
    ),
    (
        f'airflow_asset_state_store_write_total{{{_WATCHER},task_id="s3_bucket",operator="S3KeyTrigger"}}',
        "0+6x20",
    ),
    (
        f'airflow_asset_state_store_error_total{{{_WATCHER},task_id="s3_bucket",operator="S3KeyTrigger",operation="get"}}',
        "0+3x20",
    ),
    (
        f'airflow_asset_state_store_read_absent_total{{{_WATCHER},task_id="orders",operator="SqsTrigger"}}',
        "0+30x20",
    ),
    (
        'airflow_asset_state_store_read_found_total{job="airflow",dag_id="d",task_id="t",run_type="scheduled",operator="S3KeyTrigger"}',
        "0+60x20",
    ),
    (
        'airflow_task_state_store_write_total{job="airflow",dag_id="d",task_id="t",run_type="manual",operator="X"}',
        "0+60x20",
    ),
]
#: (panel title, refId, variables) -> samples at 10m, by hand: per second n / 60; the range (minutes
#: 0..9 recorded) 9 minutes' worth.
WATCHER_EXPECTED: list[tuple[str, str, dict[str, str], dict[str, float]]] = [
    (
        "Asset watcher calls per second by trigger",
        "A",
        {},
        {'{operator="S3KeyTrigger"}': 17 / 60, '{operator="SqsTrigger"}': 0.5},
    ),
    (
        "Asset watcher calls per second by trigger",
        "A",
        {"operator": "SqsTrigger"},
        {'{operator="SqsTrigger"}': 0.5},
    ),
    ("Asset watcher calls per second by trigger", "A", {"run_type": "scheduled"}, {}),
    ("Asset watcher calls per second by operation", "A", {}, {"{}": 0.1}),
    ("Asset watcher calls per second by operation", "B", {}, {"{}": 32 / 60}),
    ("Asset watcher calls per second by operation", "C", {}, {"{}": 0.1}),
    (
        "Asset watcher calls by trigger and asset (selected range)",
        "A",
        {},
        {
            '{operator="S3KeyTrigger",task_id="s3_bucket"}': 153,
            '{operator="SqsTrigger",task_id="orders"}': 270,
        },
    ),
    (
        "Asset watcher found ratio by trigger and asset",
        "A",
        {},
        {
            '{operator="S3KeyTrigger",task_id="s3_bucket"}': 0.75,
            '{operator="SqsTrigger",task_id="orders"}': 0,
        },
    ),
    (
        "Asset watcher errors per second by trigger and method",
        "A",
        {},
        {'{operator="S3KeyTrigger",operation="get"}': 0.05},
    ),
    ("Asset watcher errors per second by trigger and method", "A", {"run_type": "scheduled"}, {}),
]


@pytest.mark.prometheus
def test_triggers_queries_evaluate_to_the_hand_computed_values(tmp_path: Path) -> None:
    committed = panel_exprs(triggers_row())
    assert set(committed) == {(title, ref) for title, ref, _ in trigger_specs(RenderContext())}
    cases = [
        (committed[(title, ref)], variables, samples) for title, ref, variables, samples in WATCHER_EXPECTED
    ]
    evaluate_queries(
        tmp_path, "1m", WATCHER_INPUT, cases, "10m", rule_files=with_rules(tmp_path, "rules.yml")
    )


# -- asset watchers in the DAG panels ----------------------------------------------------------------


def test_per_dag_panels_leave_asset_watchers_out_and_say_so() -> None:
    """A watcher belongs to no DAG: every query grouped by dag_id drops run_type="asset_watcher"."""
    for panel, target in targets():
        by_dag = re.search(r"by \([^)]*\bdag_id\b", target["expr"]) is not None
        selectors = re.findall(r"\{([^}]*)\}", target["expr"])
        if by_dag:
            assert all(s.endswith(',run_type!="asset_watcher"') for s in selectors), (
                panel["title"],
                target["expr"],
            )
            assert NO_WATCHERS_NOTE in panel["description"], panel["title"]
        else:
            assert 'run_type!="asset_watcher"' not in target["expr"], panel["title"]
    # Panels not grouped by DAG count the watchers with the rest, and never say they are left out.
    for panel in panels():
        if panel["type"] != "row" and not any(
            re.search(r"by \([^)]*\bdag_id\b", t["expr"]) for t in panel["targets"]
        ):
            assert NO_WATCHERS_NOTE not in panel["description"], panel["title"]


# -- the Footprint row: store-metrics inventory's recorded gauges --------------------------------------


def footprint_row() -> dict[str, Any]:
    return collapsed_row(FOOTPRINT_ROW_TITLE)


GAUGE_NAME = re.compile(r"(?<![:\w])(airflow_[a-z0-9_]+)\b")


def test_the_footprint_row_is_collapsed_above_the_triggers_row() -> None:
    top = panels()
    row = footprint_row()
    assert top[-3] == row and top[-2]["title"] == TRIGGERS_ROW_TITLE
    assert row["collapsed"] is True and len(row["panels"]) >= 10
    titles = {p["title"] for p in row["panels"]}
    for wanted in (
        "Task store bytes by DAG (top 10)",
        "Task store entries by DAG (top 10)",
        "Asset store bytes by asset (top 10)",
        "Asset store entries by asset (top 10)",
        "Top growers by bytes (selected range)",
        "Top growers by entries (selected range)",
        "Expired entries not cleaned up, by DAG",
        "Task store footprint by DAG and task",
        "Inventory up, by store",
        "Footprint age, by store",
        "Inventory query duration, by store",
    ):
        assert wanted in titles, wanted
    assert_laid_out(row["panels"], below=row["gridPos"]["y"])
    for panel in row["panels"]:
        assert panel["type"] in PANEL_TYPES and panel["datasource"] == DATASOURCE and panel["description"]


def test_footprint_queries_read_the_footprint_rules_and_only_the_deployment_and_dag_filters() -> None:
    task_gauges = {
        m.prometheus_name() for m in catalogue.FOOTPRINT_METRICS if m.tags == ("dag_id", "task_id")
    }
    for panel in footprint_row()["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            raw = set(GAUGE_NAME.findall(expr))
            if raw:  # the table only: one series per task already, a rule would copy it
                assert raw <= task_gauges and "not a recording rule" in panel["description"], panel["title"]
                assert f"max by (cluster, dag_id, task_id) ({raw.pop()}{{" in expr
            else:
                assert re.search(r"\b(dag_id|asset|store):airflow_store_metrics_\w+:\w+\{", expr), expr
            assert 'cluster="$cluster"' in expr
            for variable in ("$run_type", "$operator", "$team_name", "$job"):
                assert variable not in expr
            assert target["instant"] == (panel["type"] in {"bargauge", "table"}), panel["title"]


#: Two inventory replicas (b lags on report.publish), five minutes apart for 25 hours; etl.extract's
#: values grow by 100 bytes every 5 minutes, asset orders' by 10.
_R = [
    'instance="10.0.0.1:9490",pod="inv-a",job="store-metrics-inventory"',
    'instance="10.0.0.2:9490",pod="inv-b",job="store-metrics-inventory"',
]


def _both(series: str, values: str, lagging: str | None = None) -> list[tuple[str, str]]:
    return [(f"{series[:-1]},{_R[0]}}}", values), (f"{series[:-1]},{_R[1]}}}", lagging or values)]


FOOTPRINT_INPUT = [
    *_both('airflow_task_state_store_footprint_bytes{dag_id="etl",task_id="extract"}', "1000+100x300"),
    *_both('airflow_task_state_store_footprint_bytes{dag_id="etl",task_id="<other>"}', "500x300"),
    *_both(
        'airflow_task_state_store_footprint_bytes{dag_id="report",task_id="publish"}', "2000x300", "1900x300"
    ),
    *_both('airflow_task_state_store_footprint_bytes{dag_id="<other>",task_id="<other>"}', "7000x300"),
    *_both('airflow_task_state_store_footprint_expired_entries{dag_id="etl",task_id="extract"}', "0x300"),
    *_both('airflow_task_state_store_footprint_expired_entries{dag_id="<other>",task_id="<other>"}', "3x300"),
    *_both('airflow_asset_state_store_footprint_bytes{asset="orders"}', "100+10x300"),
    *_both('airflow_asset_state_store_footprint_bytes{asset="<other>"}', "50x300"),
    *_both('airflow_state_store_inventory_up{store="task"}', "1x300", "0x300"),
    *_both('airflow_state_store_inventory_footprint_age_seconds{store="task"}', "30x300", "2000x300"),
    *_both('airflow_state_store_inventory_query_duration_milliseconds{store="task"}', "5x300", "7x300"),
]
#: (panel title, refId, variables) -> samples at 25h, by hand: each replica's series counted once.
FOOTPRINT_EXPECTED: list[tuple[str, str, dict[str, str], dict[str, float]]] = [
    # etl 1000 + 300 * 100 + 500 = 31500; report max(2000, 1900); other 7000 (not 63000, 4000, 14000).
    (
        "Task store bytes by DAG (top 10)",
        "A",
        {},
        {'{dag_id="etl"}': 31500, '{dag_id="report"}': 2000, '{dag_id="<other>"}': 7000},
    ),
    ("Task store bytes by DAG (top 10)", "A", {"dag_id": "etl"}, {'{dag_id="etl"}': 31500}),
    ("Asset store bytes by asset (top 10)", "A", {}, {'{asset="orders"}': 3100, '{asset="<other>"}': 50}),
    # Growth over the range (1h): 12 steps of 5 minutes, 100 bytes each for etl, 10 for orders.
    (
        "Top growers by bytes (selected range)",
        "A",
        {},
        {'{dag_id="etl"}': 1200, '{dag_id="report"}': 0, '{dag_id="<other>"}': 0},
    ),
    ("Top growers by bytes (selected range)", "B", {}, {'{asset="orders"}': 120, '{asset="<other>"}': 0}),
    # DAGs with no expired entry are not shown.
    ("Expired entries not cleaned up, by DAG", "A", {}, {'{dag_id="<other>"}': 3}),
    (
        "Task store footprint by DAG and task",
        "B",
        {},
        {
            '{dag_id="etl",task_id="extract"}': 31000,
            '{dag_id="etl",task_id="<other>"}': 500,
            '{dag_id="report",task_id="publish"}': 2000,
            '{dag_id="<other>",task_id="<other>"}': 7000,
        },
    ),
    # Health: one replica reading is up; the freshest footprint; the slowest query.
    ("Inventory up, by store", "A", {}, {'{store="task"}': 1}),
    (
        "Footprint age, by store",
        "A",
        {},
        {'{store="task"}': 30},
    ),
    (
        "Inventory query duration, by store",
        "A",
        {},
        {'{store="task"}': 7},
    ),
]


@pytest.mark.prometheus
def test_footprint_queries_evaluate_to_the_hand_computed_values(tmp_path: Path) -> None:
    committed = panel_exprs(footprint_row())
    assert set(committed) == {(title, ref) for title, ref, _ in footprint_specs(RenderContext())}
    cases = [
        (committed[(title, ref)], variables, samples) for title, ref, variables, samples in FOOTPRINT_EXPECTED
    ]
    rules = with_rules(tmp_path, "footprint-rules.yml")
    evaluate_queries(tmp_path, "5m", FOOTPRINT_INPUT, cases, "25h", rule_files=rules)
