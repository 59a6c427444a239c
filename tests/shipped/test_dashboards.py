"""The Grafana dashboard (dashboards/store-metrics.json): what it is made of, and what its queries return.

It must import into the oldest Grafana the docs support (schema 39, Grafana 11.0), never leave a
``${DS_PROMETHEUS}`` behind, scope every query to one deployment and one job (so two never add
up), read the recorded series of the rule files (or say why a panel does not), draw the alert
thresholds, link its tables to itself filtered, and return what hand-computed examples say,
evaluated by promtool over raw series and the rule files that record them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from support.dashboard import (
    DATASOURCE,
    JSON_PATH,
    LEGACY_PANEL_TYPES,
    OLDEST_GRAFANA,
    PANEL_TYPES,
    PROVISIONING,
    SCHEMA_VERSION,
    TASK_SCOPE,
    VARIABLES,
    assert_laid_out,
    dashboard,
    evaluate_queries,
    every_panel,
    panel_exprs,
    panels,
    targets,
    threshold,
    with_rules,
)
from support.e2e import CALLS
from support.exported import run_export
from testbed.repository import ROOT


def test_committed_json_is_what_the_generator_makes() -> None:
    result = run_export(ROOT, "--check")  # the repository's copy of the export, dashboards included
    assert result.returncode == 0, result.stderr


def test_oldest_supported_schema_stable_uid_and_no_unresolved_data_source() -> None:
    d = dashboard()
    assert d["schemaVersion"] == SCHEMA_VERSION
    assert {"type": "grafana", "id": "grafana", "name": "Grafana", "version": OLDEST_GRAFANA} in d[
        "__requires"
    ]
    assert d["uid"] == "store-metrics-state-store"  # links, alerts and provisioning rely on it
    assert d["id"] is None  # an import must not overwrite another dashboard by numeric id
    assert d["title"] and d["tags"]
    # Nothing for the import dialog to fill in, so nothing a provisioned copy could keep unresolved.
    assert "__inputs" not in d and "DS_PROMETHEUS" not in JSON_PATH.read_text()
    required = {(r["type"], r["id"]) for r in d["__requires"]}
    assert ("datasource", "prometheus") in required
    assert {p["type"] for p in every_panel()} == {i for t, i in required if t == "panel"}


def test_default_range_and_refresh_and_a_link_to_the_docs() -> None:
    d = dashboard()
    assert d["time"] == {"from": "now-24h", "to": "now"} and d["refresh"] == "5m"
    (link,) = d["links"]
    assert link["url"] == "https://store-metrics.github.io/airflow-store-metrics/alerts/"


def test_only_current_panel_types() -> None:
    kinds = {p["type"] for p in panels()}
    assert kinds <= PANEL_TYPES
    assert not kinds & LEGACY_PANEL_TYPES
    assert {"timeseries", "stat", "table", "bargauge"} <= kinds


def test_panel_ids_unique_and_layout_fits_without_overlap() -> None:
    ids = [p["id"] for p in panels()] + [p["id"] for r in panels() for p in r.get("panels", [])]
    assert len(ids) == len(set(ids))
    assert_laid_out(panels())


def test_every_panel_and_query_uses_the_datasource_variable() -> None:
    for p in every_panel():
        assert p["datasource"] == DATASOURCE, p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DATASOURCE
            assert t["expr"].strip()


JOBS = ("job", "watcher_job", "server_job")
SERVER_REQUESTS = "store_operation_outcome:airflow_store_metrics_api_requests:rate5m"


def test_variables_one_deployment_one_job_per_component_then_multi_select_filters() -> None:
    variables = dashboard()["templating"]["list"]
    assert [v["name"] for v in variables] == ["datasource", "cluster", *JOBS, *VARIABLES]
    datasource = variables[0]
    assert datasource["type"] == "datasource" and datasource["query"] == "prometheus"
    # Saved as Grafana's "default" option (value and text both "default", which is what makes Grafana
    # offer it): the instance's default Prometheus, kube-prometheus-stack's as its sidecar loads the
    # dashboard, or any Grafana's as imported by hand. The provisioned data source is never the default.
    assert (datasource["current"]["value"], datasource["current"]["text"]) == ("default", "default")
    provisioned = yaml.safe_load((PROVISIONING / "datasources" / "store-metrics.yml").read_text())
    ds, traces = provisioned["datasources"]
    assert ds["isDefault"] is False and traces["isDefault"] is False
    for v in variables[1:]:
        assert v["type"] == "query" and v["datasource"] == DATASOURCE and v["refresh"] == 2, v["name"]
        metric = SERVER_REQUESTS if v["name"] == "server_job" else CALLS
        m = re.fullmatch(rf"label_values\({re.escape(metric)}(\{{.*\}})?, (\w+)\)", v["query"])
        assert m and v["definition"] == v["query"], v["query"]
        assert m.group(2) == ("job" if v["name"] in JOBS else v["name"])
    for v in variables[1:5]:  # never All: two deployments or two jobs never add up
        assert v["multi"] is False and v["includeAll"] is False, v["name"]
    for v in variables[5:]:
        assert v["multi"] is True and v["includeAll"] is True and v["allValue"] == ".*", v["name"]
        assert TASK_SCOPE in v["query"]
    by_name = {v["name"]: v["query"] for v in variables}
    # Each job variable offers the jobs that carry its component: DAG tasks, watchers, the API server.
    assert 'cluster="$cluster",run_type!="asset_watcher"}' in by_name["job"]
    assert 'cluster="$cluster",run_type="asset_watcher"}' in by_name["watcher_job"]
    assert by_name["server_job"] == f'label_values({SERVER_REQUESTS}{{cluster="$cluster"}}, job)'
    assert 'team_name=~"$team_name"' in by_name["dag_id"] and 'dag_id=~"$dag_id"' in by_name["task_id"]


def test_every_task_side_query_reads_the_recorded_calls_with_every_filter() -> None:
    pairs: set[tuple[str, str]] = set()
    for panel, target in targets():
        selectors = re.findall(r"([\w:]+)\{([^}]*)\}", target["expr"])
        assert selectors, target["expr"]
        for name, selector in selectors:
            # The calls, or (the resume rate's panel) the retried attempts, recorded the same way.
            assert name in (CALLS, CALLS.replace("_calls:", "_retries:")), (panel["title"], name)
            assert selector.startswith(TASK_SCOPE), (panel["title"], selector)
            for variable in VARIABLES:
                assert f'{variable}=~"${variable}"' in selector, (panel["title"], selector)
            if name != CALLS:
                continue
            stores = re.findall(r'store="(\w+)"', selector) or ["task", "asset"]
            outcome = re.search(r'outcome=~?"([\w|]+)"', selector)
            outcomes = outcome.group(1).split("|") if outcome else [o.value for o in catalogue.Outcome]
            pairs |= {(s, o) for s in stores for o in outcomes}
    # Every counter shows somewhere.
    assert pairs == {(s.value.split("_")[0], o.value) for s in catalogue.Store for o in catalogue.Outcome}


def test_the_issue_s_panels_are_there_and_errors_right_under_the_overview() -> None:
    rows = [p["title"] for p in panels() if p["type"] == "row"]
    assert rows[:2] == ["Overview (selected time range)", "Errors"]
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
            assert all("[$__range]" in t["expr"] for t in panel["targets"]), panel["title"]
        else:
            # Per point, at least one recorded interval: the min step is the rules' interval.
            for t in (t for t in panel["targets"] if not t.get("exemplar")):
                assert t["range"] and "[$__interval]" in t["expr"] and t["interval"] == "1m", panel["title"]
                assert t["expr"].endswith(" / 60") or "/ 60) / (" in t["expr"], t["expr"]


def test_topk_only_in_instant_queries_and_time_series_keep_the_top_at_the_range_end() -> None:
    for panel in every_panel():
        for t in panel["targets"]:
            if "topk(" not in t["expr"]:
                continue
            if t["range"]:
                # A topk per step would show every series that was in the top at some step.
                assert "@ end()" in t["expr"] and " and on (" in t["expr"], (panel["title"], t["expr"])
            else:
                assert t["instant"], panel["title"]
    assert "[1d:5m]" not in JSON_PATH.read_text()


def test_alert_thresholds_are_drawn_at_the_alert_values() -> None:
    def steps(title: str) -> list[Any]:
        (panel,) = [p for p in every_panel() if p["title"] == title]
        return [s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]

    assert steps("Error ratio") == [None, threshold("StateStoreErrorRateHigh")]
    assert steps("Error ratio by DAG") == [None, threshold("StateStoreErrorRateHigh")]
    assert steps("Event-loop stalled share, by worker") == [None, threshold("StateStoreApiServerLoopStalled")]
    assert steps("Footprint age, by store") == [None, threshold("StateStoreInventoryStale")]
    (by_dag,) = [p for p in every_panel() if p["title"] == "Error ratio by DAG"]
    assert by_dag["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"] == {"mode": "dashed"}


def test_latency_panels_plot_one_quantile_each() -> None:
    for quantile in ("0.99", "0.5"):
        name = f"p{round(float(quantile) * 100)}"
        (panel,) = [p for p in every_panel() if p["title"].startswith(f"Request latency {name} ")]
        assert [t["expr"].split(",")[0] for t in panel["targets"]] == [f"histogram_quantile({quantile}"]


def test_tables_merge_their_queries_name_every_column_and_link_to_the_filtered_dashboard() -> None:
    tables = [p for p in every_panel() if p["type"] == "table"]
    assert tables
    for panel in tables:
        assert all(t.get("format") == "table" for t in panel["targets"])
        ids = [tr["id"] for tr in panel["transformations"]]
        assert ids == ["merge", "organize"]
        renames = panel["transformations"][1]["options"]["renameByName"]
        assert set(renames) == {f"Value #{t['refId']}" for t in panel["targets"]}, panel["title"]
    for title in ("Calls by DAG and task", "Errors by DAG, task and method"):
        (panel,) = [p for p in tables if p["title"] == title]
        (link,) = panel["fieldConfig"]["defaults"]["links"]
        assert link["url"].startswith("/d/store-metrics-state-store/store-metrics?${__url_time_range}")
        for label in ("dag_id", "task_id"):
            assert f"&var-{label}=${{__data.fields.{label}}}" in link["url"]
        assert "${cluster:queryparam}" in link["url"] and "${job:queryparam}" in link["url"]


@pytest.mark.parametrize("prefix", ["platform.airflow"])
def test_generator_follows_a_custom_prefix(prefix: str, tmp_path: Path) -> None:
    result = run_export(tmp_path, "--prefix", prefix)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "dashboards" / "store-metrics.json").read_text()
    assert "platform_airflow_task_state_store_footprint_bytes" in text
    assert '"airflow_task_state_store' not in text and "(airflow_task_state_store" not in text


def test_provisioning_datasource_never_takes_over_the_default() -> None:
    files = list((PROVISIONING / "datasources").glob("*.yml"))
    assert len(files) == 1
    doc = yaml.safe_load(files[0].read_text())
    assert doc["apiVersion"] == 1
    ds, traces = doc["datasources"]
    assert traces["isDefault"] is False
    assert ds["type"] == "prometheus" and ds["access"] == "proxy"
    assert ds["url"].startswith("http") and ds["uid"] and ds["name"]
    assert ds["isDefault"] is False
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
    assert set(traces) <= set(ds) and traces["type"] in ("jaeger", "tempo")


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


# -- the queries, evaluated ---------------------------------------------------------------------------

#: Two DAGs (job airflow): etl reads found 2 and absent 1 a minute, writes 1 and fails 1 set() a
#: minute; report (team analytics) writes 3 asset values a minute. The same etl scraped by a second
#: job (statsd): never added to airflow's. An asset watcher: out of every per-DAG panel.
CALLS_INPUT = [
    (
        'airflow_task_state_store_read_found_total{job="airflow",dag_id="etl",task_id="t",run_type="manual",operator="X"}',
        "0+2x20",
    ),
    (
        'airflow_task_state_store_read_absent_total{job="airflow",dag_id="etl",task_id="t",run_type="manual",operator="X"}',
        "0+1x20",
    ),
    (
        'airflow_task_state_store_write_total{job="airflow",dag_id="etl",task_id="t",run_type="manual",operator="X"}',
        "0+1x20",
    ),
    (
        'airflow_task_state_store_error_total{job="airflow",dag_id="etl",task_id="t",run_type="manual",operator="X",operation="set"}',
        "0+1x20",
    ),
    (
        'airflow_asset_state_store_write_total{job="airflow",dag_id="report",task_id="p",run_type="scheduled",operator="Y",team_name="analytics"}',
        "0+3x20",
    ),
    (
        'airflow_task_state_store_write_total{job="statsd",dag_id="etl",task_id="t",run_type="manual",operator="X"}',
        "0+100x20",
    ),
    (
        'airflow_asset_state_store_read_found_total{job="airflow",dag_id="<none>",task_id="orders",run_type="asset_watcher",operator="SqsTrigger"}',
        "0+50x20",
    ),
]
#: At 10m the rules have recorded minutes 0..9 (30 s behind): 9 minutes of calls in the range; each
#: point's 5-minute window holds five recorded minutes, so the per-second rates are n / 60.
CALLS_EXPECTED: list[tuple[str, str, dict[str, str], dict[str, float]]] = [
    # etl 5 a minute, report 3, the watcher 50: 58 x 9.
    ("State store calls", "A", {}, {"{}": 522}),
    ("State store calls", "A", {"job": "statsd"}, {"{}": 900}),
    ("Error ratio", "A", {}, {"{}": 9 / 522}),
    ("Error ratio", "A", {"dag_id": "etl"}, {"{}": 1 / 5}),
    # Per DAG: the watcher is no DAG; report makes no error (0, not missing).
    ("Error ratio by DAG", "A", {}, {'{dag_id="etl"}': 0.2, '{dag_id="report"}': 0}),
    ("Calls per second by DAG", "A", {}, {'{dag_id="etl"}': 5 / 60, '{dag_id="report"}': 3 / 60}),
    ("Calls per second by DAG", "A", {"team_name": "analytics"}, {'{dag_id="report"}': 3 / 60}),
    ("Task store found ratio", "A", {}, {"{}": 2 / 3}),
    ("Top DAGs by calls", "A", {}, {'{dag_id="etl"}': 45, '{dag_id="report"}': 27}),
    (
        "Calls by run type",
        "A",
        {},
        {'{run_type="manual"}': 45, '{run_type="scheduled"}': 27, '{run_type="asset_watcher"}': 450},
    ),
    ("Errors per second by store and method", "A", {}, {'{operation="set"}': 1 / 60}),
    ("Errors by DAG, task and method", "A", {}, {'{dag_id="etl",task_id="t",operation="set"}': 9}),
]


@pytest.mark.prometheus
def test_task_side_queries_over_the_rules_evaluate_to_the_hand_computed_values(tmp_path: Path) -> None:
    committed = {
        key: expr
        for p in panels()
        if p["type"] != "row"
        for key, expr in panel_exprs({"panels": [p]}).items()
    }
    cases = [
        (committed[(title, ref)], variables, samples) for title, ref, variables, samples in CALLS_EXPECTED
    ]
    evaluate_queries(tmp_path, "1m", CALLS_INPUT, cases, "10m", rule_files=with_rules(tmp_path, "rules.yml"))


# -- exemplars: from a point of the per-DAG calls to its trace -------------------------------------------


def test_the_calls_by_dag_panel_asks_for_exemplars_of_the_raw_counters_and_hides_their_lines() -> None:
    (panel,) = [p for p in every_panel() if p["title"] == "Calls per second by DAG"]
    lines, marks = panel["targets"]
    assert "exemplar" not in lines and lines["expr"].startswith(f"sum by (dag_id) (avg_over_time({CALLS}{{")
    # Recorded series carry no exemplars: the marks come from the raw counters, every state store
    # counter of a call, with the panel's deployment, job, filters and its exclusion of the watchers.
    assert marks["exemplar"] is True and marks["refId"] == "B" and marks["range"] is True
    names = re.fullmatch(r'sum by \(dag_id\) \(\{__name__=~"([^"]+)",(.*)\}\)', marks["expr"])
    assert names, marks["expr"]
    assert set(names.group(1).split("|")) == {
        catalogue.metric_for(store, outcome).prometheus_name()
        for store in catalogue.Store
        for outcome in catalogue.Outcome
        if catalogue.metric_for(store, outcome).name.split(".", 1)[1]
        in ("read_found", "read_absent", "write", "delete", "clear", "error")
    }
    assert names.group(2) == (
        f'{TASK_SCOPE},team_name=~"$team_name",dag_id=~"$dag_id",task_id=~"$task_id",operator=~"$operator",'
        'run_type=~"$run_type",run_type!="asset_watcher"'
    )
    # Its own lines are hidden everywhere (the panel's lines are the recorded calls): only its marks show.
    assert panel["fieldConfig"]["overrides"] == [
        {
            "matcher": {"id": "byFrameRefID", "options": "B"},
            "properties": [
                {"id": "custom.hideFrom", "value": {"legend": True, "tooltip": True, "viz": True}}
            ],
        }
    ]
    # The only panel that asks for exemplars.
    assert [p["title"] for p in every_panel() if any(t.get("exemplar") for t in p["targets"])] == [
        panel["title"]
    ]


@pytest.mark.parametrize(
    ("settings", "trace_type", "trace_url"),
    [
        ((), "jaeger", "http://jaeger:16686"),
        (("trace_datasource=tempo", "trace_url=http://tempo:3200"), "tempo", "http://tempo:3200"),
    ],
)
def test_the_provisioned_prometheus_links_exemplars_to_the_provisioned_trace_data_source(
    tmp_path: Path, settings: tuple[str, ...], trace_type: str, trace_url: str
) -> None:
    args = [a for setting in settings for a in ("--set", setting)]
    assert run_export(tmp_path, *args).returncode == 0
    provisioned = yaml.safe_load(
        (tmp_path / "dashboards/provisioning/datasources/store-metrics.yml").read_text()
    )
    prometheus, traces = provisioned["datasources"]
    # Grafana's Prometheus data source: each exemplar's trace_id label (the Collector's OpenMetrics
    # exemplars carry trace_id and span_id) opens that trace in the data source of this uid.
    assert prometheus["jsonData"]["exemplarTraceIdDestinations"] == [
        {"name": "trace_id", "datasourceUid": traces["uid"]}
    ]
    assert (traces["type"], traces["url"], traces["uid"]) == (trace_type, trace_url, "store-metrics-traces")


def test_a_trace_data_source_grafana_cannot_link_is_refused_by_name(tmp_path: Path) -> None:
    result = run_export(tmp_path, "--set", "trace_datasource=zipkin")
    assert result.returncode != 0
    assert "setting trace_datasource: 'zipkin' is not a choice (one of jaeger, tempo)" in result.stderr
