"""The Grafana dashboard JSON and its provisioning files, checked against Grafana's model and the catalogue.

What each query returns is checked against a real Prometheus in test_prometheus_e2e.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from generators.grafana.dashboard import footprint_specs, specs, trigger_specs
from generators.grafana.footprint_row import FOOTPRINT_ROW_TITLE
from generators.grafana.rows import NO_WATCHERS_NOTE, TRIGGERS_ROW_TITLE
from generators.grafana.server_row import SERVER_ROW_TITLE
from store_metrics import catalogue
from support.dashboard import VARIABLES, assert_laid_out, evaluate_queries, panel_exprs

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"
JSON_PATH = DASHBOARDS / "store-metrics.json"
PROVISIONING = DASHBOARDS / "provisioning"

#: Grafana's current dashboard schema version (grafana/grafana apps/dashboard/pkg/migration/
#: schemaversion/migrations.go LATEST_VERSION); a dashboard below it is migrated on load.
CURRENT_SCHEMA_VERSION = 42
PANEL_TYPES = {"row", "timeseries", "stat", "table", "bargauge"}
LEGACY_PANEL_TYPES = {"graph", "singlestat", "table-old", "grafana-piechart-panel", "grafana-worldmap-panel"}
DS = {"type": "prometheus", "uid": "${datasource}"}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(JSON_PATH.read_text())
    return data


def panels() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = dashboard()["panels"]
    return found


def targets() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(p, t) for p in panels() for t in p.get("targets", [])]


def test_committed_json_is_what_the_generator_makes() -> None:
    result = subprocess.run(
        [sys.executable, str(DASHBOARDS / "generate.py"), "--check"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_current_schema_stable_uid_and_importable() -> None:
    d = dashboard()
    assert d["schemaVersion"] == CURRENT_SCHEMA_VERSION
    assert d["uid"] == "store-metrics-state-store"  # links and provisioning updates rely on it
    assert d["id"] is None  # an import must not overwrite another dashboard by numeric id
    assert d["title"] and d["tags"]
    inputs = d["__inputs"]
    assert inputs == [
        {
            "name": "DS_PROMETHEUS",
            "label": "Prometheus",
            "description": inputs[0]["description"],
            "type": "datasource",
            "pluginId": "prometheus",
            "pluginName": "Prometheus",
        }
    ]
    text = JSON_PATH.read_text()
    # The import dialog's choice lands in the data source variable, and nowhere a provisioned copy
    # would be left with an unresolved ${DS_PROMETHEUS}.
    assert text.count("${DS_PROMETHEUS}") == 2
    datasource = d["templating"]["list"][0]
    assert datasource["current"]["value"] == datasource["current"]["text"] == "${DS_PROMETHEUS}"
    required = {(r["type"], r["id"]) for r in d["__requires"]}
    assert ("datasource", "prometheus") in required and ("grafana", "grafana") in required
    assert {p["type"] for p in panels() if p["type"] != "row"} == {i for t, i in required if t == "panel"}


def test_only_current_panel_types() -> None:
    kinds = {p["type"] for p in panels()}
    assert kinds <= PANEL_TYPES
    assert not kinds & LEGACY_PANEL_TYPES
    assert {"timeseries", "stat", "table", "bargauge"} <= kinds


def test_panel_ids_unique_and_layout_fits_without_overlap() -> None:
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
    assert_laid_out(panels())


def test_every_panel_and_query_uses_the_datasource_variable() -> None:
    for p in panels():
        if p["type"] == "row":
            continue
        assert p["datasource"] == DS, p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DS
            assert t["expr"].strip()


def test_variables_datasource_and_multi_select_with_all() -> None:
    variables = dashboard()["templating"]["list"]
    assert [v["name"] for v in variables] == ["datasource", *VARIABLES]
    assert variables[0]["type"] == "datasource" and variables[0]["query"] == "prometheus"
    for v in variables[1:]:
        assert v["type"] == "query", v["name"]
        assert v["multi"] is True and v["includeAll"] is True, v["name"]
        # All matches any value, and series without the label (team_name on single-team deployments).
        assert v["allValue"] == ".*", v["name"]
        assert v["datasource"] == DS
        assert v["refresh"] == 2  # on time range change: new DAGs show up
        m = re.fullmatch(r"label_values\(\{__name__=~\"([^\"]+)\"(.*)\}, (\w+)\)", v["query"])
        assert m, v["query"]
        assert m.group(3) == v["name"]
        assert set(m.group(1).split("|")) == {
            metric.prometheus_name() for metric in catalogue.STATE_STORE_METRICS
        }
        assert v["definition"] == v["query"]
    # Chained: the DAG list follows the team, the task list follows team and DAG.
    by_name = {v["name"]: v["query"] for v in variables}
    assert 'team_name=~"$team_name"' in by_name["dag_id"]
    assert 'dag_id=~"$dag_id"' in by_name["task_id"]


def test_every_query_applies_every_filter() -> None:
    for panel, target in targets():
        selectors = re.findall(r"\w+\{([^}]*)\}", target["expr"])
        assert selectors, target["expr"]
        for selector in selectors:
            for name in VARIABLES:
                assert f'{name}=~"${name}"' in selector, (panel["title"], selector)


NAME = re.compile(r"\b([a-z][a-z0-9_]*_total)\b")


def test_queries_reference_only_catalogue_metrics_and_cover_them_all() -> None:
    known = {m.prometheus_name() for m in catalogue.STATE_STORE_METRICS}
    used: set[str] = set()
    for panel, target in targets():
        names = set(NAME.findall(target["expr"]))
        assert names, (panel["title"], target["refId"])
        assert names <= known, (panel["title"], names - known)
        used |= names
    for v in dashboard()["templating"]["list"][1:]:
        assert set(NAME.findall(v["query"])) == known
    assert used == known, f"counters no panel shows: {known - used}"


def test_the_issue_s_panels_are_there() -> None:
    titles = {p["title"] for p in panels()}
    for wanted in (
        "Task store calls per second by operation",
        "Asset store calls per second by operation",
        "Reads per write",
        "Reads per write by DAG",
        "Task store found ratio",
        "Asset store found ratio",
        "Found ratio by DAG",
        "Deletes and clears",
        "Deletes and clears per second by DAG",
        "Top DAGs by calls",
        "Calls by DAG and task",
        "Calls by operator",
        "Calls by run type",
        "Calls by team",
        "Errors per second by store and method",
        "Error ratio",
        "Error ratio by DAG",
    ):
        assert wanted in titles, wanted
    for panel in panels():
        if panel["type"] == "row":
            continue
        assert panel.get("description"), panel["title"]
        if panel["type"] in {"stat", "bargauge", "table"}:
            # Summaries of the selected range: evaluated once, at its end.
            assert all(t["instant"] and not t["range"] for t in panel["targets"]), panel["title"]
            assert all("$__range" in t["expr"] for t in panel["targets"]), panel["title"]
        else:
            assert all(t["range"] and "$__rate_interval" in t["expr"] for t in panel["targets"]), panel[
                "title"
            ]


def test_tables_merge_their_queries_and_name_every_column() -> None:
    for panel in panels():
        if panel["type"] != "table":
            continue
        assert all(t.get("format") == "table" for t in panel["targets"])
        ids = [tr["id"] for tr in panel["transformations"]]
        assert ids == ["merge", "organize"]
        renames = panel["transformations"][1]["options"]["renameByName"]
        assert set(renames) == {f"Value #{t['refId']}" for t in panel["targets"]}, panel["title"]


@pytest.mark.parametrize("prefix", ["platform.airflow"])
def test_generator_follows_a_custom_prefix(prefix: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(DASHBOARDS / "generate.py"), "--prefix", prefix, "--out", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "store-metrics.json").read_text()
    assert "platform_airflow_task_state_store_write_total" in text
    assert '"airflow_task_state_store_write_total' not in text


def test_provisioning_datasource() -> None:
    files = list((PROVISIONING / "datasources").glob("*.yml"))
    assert len(files) == 1
    doc = yaml.safe_load(files[0].read_text())
    assert doc["apiVersion"] == 1
    (ds,) = doc["datasources"]
    assert ds["type"] == "prometheus" and ds["access"] == "proxy"
    assert ds["url"].startswith("http") and ds["uid"] and ds["name"]
    assert ds["jsonData"]["httpMethod"] == "POST"
    assert set(ds) <= {
        "name",
        "type",
        "uid",
        "access",
        "url",
        "isDefault",
        "editable",
        "jsonData",
        "orgId",
        "basicAuth",
        "secureJsonData",
        "version",
    }


def test_provisioning_dashboard_provider() -> None:
    files = list((PROVISIONING / "dashboards").glob("*.yml"))
    assert len(files) == 1
    doc = yaml.safe_load(files[0].read_text())
    assert doc["apiVersion"] == 1
    (provider,) = doc["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"].startswith("/")
    assert set(provider) <= {
        "name",
        "orgId",
        "folder",
        "folderUid",
        "type",
        "disableDeletion",
        "updateIntervalSeconds",
        "allowUiUpdates",
        "options",
    }
    assert set(provider["options"]) <= {"path", "foldersFromFilesStructure"}


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
    ids = [p["id"] for p in top] + [p["id"] for r in top[-2:] for p in r["panels"]]
    assert len(ids) == len(set(ids))
    assert_laid_out(row["panels"], below=row["gridPos"]["y"])
    for panel in row["panels"]:
        assert panel["type"] in PANEL_TYPES and panel["datasource"] == DS
        assert "asset_watcher" in panel["description"]


def test_triggers_queries_keep_every_filter_and_only_watcher_calls() -> None:
    known = {m.prometheus_name() for m in catalogue.STATE_STORE_METRICS}
    for panel in triggers_row()["panels"]:
        for target in panel["targets"]:
            assert target["datasource"] == DS
            selectors = re.findall(r"\w+\{([^}]*)\}", target["expr"])
            assert selectors
            for selector in selectors:
                for name in VARIABLES:
                    assert f'{name}=~"${name}"' in selector, (panel["title"], selector)
                assert selector.endswith(',run_type="asset_watcher"'), selector
            assert set(NAME.findall(target["expr"])) <= known
            assert ("$__range" in target["expr"]) == target["instant"] == (panel["type"] == "bargauge")
    titles = {p["title"] for p in triggers_row()["panels"]}
    assert {
        "Asset watcher found ratio by trigger and asset",
        "Asset watcher errors per second by trigger and method",
    } <= titles


#: Two watchers and, with the same trigger class and store, a task's calls that must not count.
WATCHER_INPUT = [
    (
        'airflow_asset_state_store_read_found_total{dag_id="none",task_id="s3_bucket",'
        'run_type="asset_watcher",operator="S3KeyTrigger"}',
        "0+6x20",
    ),
    (
        'airflow_asset_state_store_write_total{dag_id="none",task_id="s3_bucket",'
        'run_type="asset_watcher",operator="S3KeyTrigger"}',
        "0+6x20",
    ),
    (
        'airflow_asset_state_store_read_absent_total{dag_id="none",task_id="orders",'
        'run_type="asset_watcher",operator="SqsTrigger"}',
        "0+30x20",
    ),
    (
        'airflow_asset_state_store_read_found_total{dag_id="d",task_id="t",'
        'run_type="scheduled",operator="S3KeyTrigger"}',
        "0+60x20",
    ),
    (
        'airflow_task_state_store_write_total{dag_id="d",task_id="t",run_type="manual",operator="X"}',
        "0+60x20",
    ),
]
#: (panel title, refId, variables) -> samples at 10m, by hand: 6 a minute is 0.1/s; the series
#: start inside the range ($__range = 1h), so the range panel counts them in full (10 minutes' worth).
WATCHER_EXPECTED: list[tuple[str, str, dict[str, str], dict[str, float]]] = [
    (
        "Asset watcher calls per second by trigger",
        "A",
        {},
        {'{operator="S3KeyTrigger"}': 0.2, '{operator="SqsTrigger"}': 0.5},
    ),
    (
        "Asset watcher calls per second by trigger",
        "A",
        {"operator": "SqsTrigger"},
        {'{operator="SqsTrigger"}': 0.5},
    ),
    ("Asset watcher calls per second by trigger", "A", {"run_type": "scheduled"}, {}),
    ("Asset watcher calls per second by operation", "A", {}, {"{}": 0.1}),
    ("Asset watcher calls per second by operation", "B", {}, {"{}": 0.5}),
    ("Asset watcher calls per second by operation", "C", {}, {"{}": 0.1}),
    ("Asset watcher calls per second by operation", "F", {}, {}),
    (
        "Asset watcher calls by trigger and asset (selected range)",
        "A",
        {},
        {
            '{operator="S3KeyTrigger",task_id="s3_bucket"}': 120,
            '{operator="SqsTrigger",task_id="orders"}': 300,
        },
    ),
]


@pytest.mark.prometheus
def test_triggers_queries_evaluate_to_the_hand_computed_values(tmp_path: Path) -> None:
    committed = panel_exprs(triggers_row())
    assert set(committed) == {(title, ref) for title, ref, _ in trigger_specs()}
    cases = [
        (committed[(title, ref)], variables, samples) for title, ref, variables, samples in WATCHER_EXPECTED
    ]
    evaluate_queries(tmp_path, "1m", WATCHER_INPUT, cases, "10m")


@pytest.mark.prometheus
def test_new_triggers_panels_evaluate_to_the_hand_computed_values(tmp_path: Path) -> None:
    """The watermark found ratio by trigger and asset, and errors by trigger and method."""
    watcher = 'run_type="asset_watcher",dag_id="none"'
    inputs = [
        # S3KeyTrigger on s3_bucket: 6 found and 2 absent reads a minute -> 0.75; 3 get() errors a minute.
        (
            f'airflow_asset_state_store_read_found_total{{task_id="s3_bucket",operator="S3KeyTrigger",{watcher}}}',
            "0+6x20",
        ),
        (
            f'airflow_asset_state_store_read_absent_total{{task_id="s3_bucket",operator="S3KeyTrigger",{watcher}}}',
            "0+2x20",
        ),
        (
            f'airflow_asset_state_store_error_total{{task_id="s3_bucket",operator="S3KeyTrigger",{watcher},'
            'operation="get"}',
            "0+3x20",
        ),
        # SqsTrigger on orders never finds its watermark -> 0.
        (
            f'airflow_asset_state_store_read_absent_total{{task_id="orders",operator="SqsTrigger",{watcher}}}',
            "0+30x20",
        ),
        # A task with the same operator class: not a watcher, counted nowhere in this row.
        (
            'airflow_asset_state_store_read_found_total{dag_id="d",task_id="t",run_type="scheduled",operator="S3KeyTrigger"}',
            "0+60x20",
        ),
        (
            'airflow_asset_state_store_error_total{dag_id="d",task_id="t",run_type="scheduled",operator="S3KeyTrigger",'
            'operation="set"}',
            "0+60x20",
        ),
    ]
    found, errors = (
        "Asset watcher found ratio by trigger and asset",
        "Asset watcher errors per second by trigger and method",
    )
    expected: list[tuple[str, str, dict[str, str], dict[str, float]]] = [
        (
            found,
            "A",
            {},
            {
                '{operator="S3KeyTrigger",task_id="s3_bucket"}': 0.75,
                '{operator="SqsTrigger",task_id="orders"}': 0,
            },
        ),
        (found, "A", {"task_id": "orders"}, {'{operator="SqsTrigger",task_id="orders"}': 0}),
        (errors, "A", {}, {'{operator="S3KeyTrigger",operation="get"}': 0.05}),
        (errors, "A", {"run_type": "scheduled"}, {}),
    ]
    committed = panel_exprs(triggers_row())
    evaluate_queries(
        tmp_path, "1m", inputs, [(committed[(title, ref)], v, s) for title, ref, v, s in expected], "10m"
    )


# -- asset watchers in the DAG panels ----------------------------------------------------------------


def test_per_dag_panels_leave_asset_watchers_out_and_say_so() -> None:
    """A watcher belongs to no DAG: every query grouped by dag_id drops run_type="asset_watcher"."""
    by_dag = {(title, ref) for title, ref, target in specs() if "dag_id" in getattr(target.spec, "by", ())}
    assert len({title for title, _ in by_dag}) >= 8
    for panel, target in targets():
        excludes = 'run_type!="asset_watcher"' in target["expr"]
        selectors = re.findall(r"\{([^}]*)\}", target["expr"])
        if (panel["title"], target["refId"]) in by_dag:
            assert all(s.endswith(',run_type!="asset_watcher"') for s in selectors), (
                panel["title"],
                target["expr"],
            )
            assert NO_WATCHERS_NOTE in panel["description"], panel["title"]
        else:
            assert not excludes, panel["title"]
    # Panels not grouped by DAG count the watchers with the rest, and never say they are left out.
    for panel in panels():
        if panel["type"] != "row" and not any(
            (panel["title"], t["refId"]) in by_dag for t in panel["targets"]
        ):
            assert NO_WATCHERS_NOTE not in panel["description"], panel["title"]


# -- the Footprint row: store-metrics inventory's gauges ---------------------------------------------


def footprint_row() -> dict[str, Any]:
    return collapsed_row(FOOTPRINT_ROW_TITLE)


FOOTPRINT_GAUGES = {m.prometheus_name() for m in catalogue.INVENTORY_METRICS}
TASK_FOOTPRINT = {m.prometheus_name() for m in catalogue.FOOTPRINT_METRICS if m.tags == ("dag_id", "task_id")}
GAUGE_NAME = re.compile(r"\b(airflow_[a-z0-9_]+)\b")


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
        "Top growers by bytes (last 24 h)",
        "Top growers by entries (last 24 h)",
        "Expired entries not cleaned up, by DAG",
        "Task store footprint by DAG and task",
        "Inventory up, by store",
        "Footprint age, by store",
        "Inventory query duration, by store",
    ):
        assert wanted in titles, wanted
    ids = [p["id"] for p in top] + [p["id"] for r in top[-3:] for p in r["panels"]]
    assert len(ids) == len(set(ids))
    assert_laid_out(row["panels"], below=row["gridPos"]["y"])
    for panel in row["panels"]:
        assert panel["type"] in PANEL_TYPES and panel["datasource"] == DS and panel["description"]


def test_footprint_queries_take_one_replica_and_only_the_dag_and_task_filters() -> None:
    used: set[str] = set()
    for panel in footprint_row()["panels"]:
        assert panel["targets"]
        for target in panel["targets"]:
            expr = target["expr"]
            names = set(GAUGE_NAME.findall(expr))
            assert names and names <= FOOTPRINT_GAUGES, (panel["title"], expr)
            used |= names
            for name in names:
                if name in TASK_FOOTPRINT:  # the DAG and task filters, nothing else
                    assert f'{name}{{dag_id=~"$dag_id",task_id=~"$task_id"}}' in expr, expr
                else:
                    assert f"{name}{{" not in expr, expr
                if name.endswith(("_entries", "_bytes", "_age_seconds")) and "inventory" not in name:
                    assert f"max without (instance, pod, job) ({name}" in expr, expr
            for variable in ("$run_type", "$operator", "$team_name"):
                assert variable not in expr
            assert target["instant"] == (panel["type"] in {"bargauge", "table"}), panel["title"]
    assert used == FOOTPRINT_GAUGES - {
        m.prometheus_name()
        for m in catalogue.FOOTPRINT_METRICS
        if m.tags == ("asset",) and m.name.split(".")[-1] not in ("entries", "bytes")
    }


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
    *_both('airflow_task_state_store_footprint_bytes{dag_id="etl",task_id="other"}', "500x300"),
    *_both(
        'airflow_task_state_store_footprint_bytes{dag_id="report",task_id="publish"}', "2000x300", "1900x300"
    ),
    *_both('airflow_task_state_store_footprint_bytes{dag_id="other",task_id="other"}', "7000x300"),
    *_both('airflow_task_state_store_footprint_expired_entries{dag_id="etl",task_id="extract"}', "0x300"),
    *_both('airflow_task_state_store_footprint_expired_entries{dag_id="other",task_id="other"}', "3x300"),
    *_both('airflow_asset_state_store_footprint_bytes{asset="orders"}', "100+10x300"),
    *_both('airflow_asset_state_store_footprint_bytes{asset="other"}', "50x300"),
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
        {'{dag_id="etl"}': 31500, '{dag_id="report"}': 2000, '{dag_id="other"}': 7000},
    ),
    ("Task store bytes by DAG (top 10)", "A", {"dag_id": "etl"}, {'{dag_id="etl"}': 31500}),
    ("Asset store bytes by asset (top 10)", "A", {}, {'{asset="orders"}': 3100, '{asset="other"}': 50}),
    # Growth over the last day: 288 steps of 5 minutes, 100 bytes each for etl, 10 for orders.
    (
        "Top growers by bytes (last 24 h)",
        "A",
        {},
        {'{dag_id="etl"}': 28800, '{dag_id="report"}': 0, '{dag_id="other"}': 0},
    ),
    ("Top growers by bytes (last 24 h)", "B", {}, {'{asset="orders"}': 2880, '{asset="other"}': 0}),
    # DAGs with no expired entry are not shown.
    ("Expired entries not cleaned up, by DAG", "A", {}, {'{dag_id="other"}': 3}),
    (
        "Task store footprint by DAG and task",
        "B",
        {},
        {
            '{dag_id="etl",task_id="extract"}': 31000,
            '{dag_id="etl",task_id="other"}': 500,
            '{dag_id="report",task_id="publish"}': 2000,
            '{dag_id="other",task_id="other"}': 7000,
        },
    ),
    # Health: one replica reading is up; the freshest footprint; the slowest query.
    ("Inventory up, by store", "A", {}, {'{store="task"}': 1}),
    ("Footprint age, by store", "A", {}, {'{store="task"}': 30}),
    ("Inventory query duration, by store", "A", {}, {'{store="task"}': 7}),
]


@pytest.mark.prometheus
def test_footprint_queries_evaluate_to_the_hand_computed_values(tmp_path: Path) -> None:
    committed = panel_exprs(footprint_row())
    assert set(committed) == {(title, ref) for title, ref, _ in footprint_specs()}
    cases = [
        (committed[(title, ref)], variables, samples) for title, ref, variables, samples in FOOTPRINT_EXPECTED
    ]
    evaluate_queries(tmp_path, "5m", FOOTPRINT_INPUT, cases, "25h")
