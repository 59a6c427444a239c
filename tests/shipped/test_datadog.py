"""``datadog/``: the Datadog dashboard and monitors, checked against Datadog's own API models.

* every file parses strictly into the typed models of ``datadog-api-client`` (``Dashboard``,
  ``Monitor``): the client accepts unknown fields silently and turns an unknown widget type or enum
  value into an "unparsed" object instead of raising, so ``strict`` walks the parsed tree and
  fails on each of those (the negative tests prove it does);
* every query names only the catalogue's counters with the export's prefix, sums them as DogStatsD
  counters (``sum:<metric>{...}.as_count()``) and applies every template variable, the environment
  first; widgets grouped by DAG leave the asset watchers out, as the Grafana panels do;
* the formulas compute what their titles say, on hand-made totals;
* every Prometheus alert has one monitor, its twin: the same threshold, window, floor of calls and
  grouping (per environment where the alert is per deployment and job), a priority from its
  severity, renotification, its runbook and a link to the dashboard.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from datadog_api_client import Configuration
from datadog_api_client.exceptions import OpenApiException
from datadog_api_client.model_utils import (
    ModelComposed,
    ModelNormal,
    ModelSimple,
    UnparsedObject,
    validate_and_convert_types,
)
from datadog_api_client.v1.model.dashboard import Dashboard
from datadog_api_client.v1.model.monitor import Monitor

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store
from store_metrics.shipped import settings
from store_metrics.shipped.dashboard_facts import FILTERS
from store_metrics.shipped.datadog import dashboard as dd_dashboard
from store_metrics.shipped.datadog import monitors as dd_monitors
from support.exported import OTHER_PREFIX
from testbed.repository import ROOT

DATADOG = ROOT / "datadog"
PREFIX = OTHER_PREFIX
#: The Grafana dashboard's filter variables (tests/shipped/test_dashboards.py).
GRAFANA_VARIABLES = ("team_name", "dag_id", "task_id", "operator", "run_type")


# -- strict parsing into the client's models ---------------------------------------------------------


def problems(value: object, path: str = "$") -> list[str]:
    """What the client's lenient parse let through: unknown fields, unmatched schemas, bad enums."""
    if isinstance(value, UnparsedObject):
        return [f"{path}: matches no schema the client knows"]
    if isinstance(value, ModelComposed):  # oneOf (a widget definition, a query)
        found = [f"{path}: {type(value).__name__} matched none of its schemas"] if value._unparsed else []
        for instance in value._composed_instances:
            found += problems(instance, path)
        return found
    if isinstance(value, ModelSimple):  # enums
        return [f"{path}: {value.value!r} is not a {type(value).__name__}"] if value._unparsed else []
    if isinstance(value, ModelNormal):
        found = []
        for key, item in value._data_store.items():
            if key not in value.openapi_types:
                found.append(f"{path}.{key}: unknown field of {type(value).__name__}")
            elif key in value.read_only_vars:
                found.append(f"{path}.{key}: read-only field of {type(value).__name__}")
            found += problems(item, f"{path}.{key}")
        return found
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in problems(item, f"{path}[{i}]")]
    return []


class InvalidDefinition(Exception):
    """A dashboard or monitor definition Datadog's API models do not fully accept."""


def strict(data: dict[str, Any], model: type[Dashboard] | type[Monitor]) -> Any:
    """Parse ``data`` as the client parses an API response (JSON names, type checks), then fail on
    anything it did not understand."""
    try:
        parsed = validate_and_convert_types(
            copy.deepcopy(data), (model,), ["body"], True, True, configuration=Configuration()
        )
    except (OpenApiException, TypeError) as exc:  # a wrong type; a required field missing
        raise InvalidDefinition(str(exc)) from exc
    assert isinstance(parsed, model)
    found = problems(parsed)
    if found or parsed._unparsed:
        raise InvalidDefinition("\n".join(found or ["unparsed"]))
    return parsed


def folders(custom: Path) -> list[tuple[str, Path]]:
    return [(catalogue.DEFAULT_PREFIX, DATADOG), (PREFIX, custom / "datadog")]


def board(folder: Path = DATADOG) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / dd_dashboard.FILENAME).read_text())
    return data


def monitor_files(folder: Path = DATADOG) -> dict[str, dict[str, Any]]:
    files = sorted((folder / dd_monitors.FOLDER).glob("*.json"))
    assert [f.name for f in files] == sorted(dd_monitors.MONITORS)
    return {f.name: json.loads(f.read_text()) for f in files}


def test_the_dashboard_and_monitors_parse_strictly(custom: Path) -> None:
    for _, folder in folders(custom):
        parsed = strict(board(folder), Dashboard)
        assert parsed.layout_type.value == "ordered"
        for data in monitor_files(folder).values():
            assert strict(data, Monitor).type.value == "query alert"


def _first_widget(data: dict[str, Any]) -> dict[str, Any]:
    widget: dict[str, Any] = data["widgets"][1]["definition"]["widgets"][0]["definition"]
    return widget


#: A breakage of the dashboard, and what the failure says.
BROKEN_DASHBOARDS = {
    "unknown widget type": (
        lambda d: _first_widget(d).update(type="sparkline_xl"),
        "WidgetDefinition matched none of its schemas",
    ),
    "unknown widget field": (
        lambda d: _first_widget(d).update(legend="right"),
        r"definition\.legend: unknown field of QueryValueWidgetDefinition",
    ),
    "unknown dashboard field": (lambda d: d.update(panels=[]), r"\$\.panels: unknown field of Dashboard"),
    "unknown request field": (
        lambda d: _first_widget(d)["requests"][0].update(expr="x"),
        "expr: unknown field of QueryValueWidgetRequest",
    ),
    "unknown query data source": (
        lambda d: _first_widget(d)["requests"][0]["queries"][0].update(data_source="prometheus"),
        "matched none of its schemas",
    ),
    "unknown aggregator": (
        lambda d: _first_widget(d)["requests"][0]["queries"][0].update(aggregator="total"),
        "matched none of its schemas",
    ),
    "bad layout type": (lambda d: d.update(layout_type="grid"), "'grid' is not a DashboardLayoutType"),
    "read-only field": (lambda d: d.update(id="abc-def-ghi"), "id: read-only field of Dashboard"),
    "wrong type": (
        lambda d: d.update(template_variables={"name": "dag_id"}),
        "Invalid type for variable 'template_variables'",
    ),
}


@pytest.mark.parametrize("breakage", BROKEN_DASHBOARDS, ids=list(BROKEN_DASHBOARDS))
def test_a_broken_dashboard_fails(breakage: str) -> None:
    data = board()
    strict(data, Dashboard)  # sound before
    change, message = BROKEN_DASHBOARDS[breakage]
    change(data)
    with pytest.raises(InvalidDefinition, match=message):
        strict(data, Dashboard)


BROKEN_MONITORS = {
    "unknown monitor type": (
        lambda m: m.update(type="metric alertz"),
        "'metric alertz' is not a MonitorType",
    ),
    "unknown field": (lambda m: m.update(severity="high"), "severity: unknown field of Monitor"),
    "unknown option": (
        lambda m: m["options"].update(notify_on_no_data=True),
        "notify_on_no_data: unknown field of MonitorOptions",
    ),
    "unknown threshold": (
        lambda m: m["options"]["thresholds"].update(alert=1),
        "alert: unknown field of MonitorThresholds",
    ),
    "missing query": (lambda m: m.pop("query"), "missing 1 required positional argument: 'query'"),
}


@pytest.mark.parametrize("breakage", BROKEN_MONITORS, ids=list(BROKEN_MONITORS))
def test_a_broken_monitor_fails(breakage: str) -> None:
    data = monitor_files()["state-store-error-ratio.json"]
    strict(data, Monitor)
    change, message = BROKEN_MONITORS[breakage]
    change(data)
    with pytest.raises(InvalidDefinition, match=message):
        strict(data, Monitor)


# -- queries ------------------------------------------------------------------------------------------


def widgets(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every widget definition, groups' members included."""
    for widget in data["widgets"]:
        definition = widget["definition"]
        yield definition
        if definition["type"] == "group":
            yield from widgets(definition)


def requests(data: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for definition in widgets(data):
        for request in definition.get("requests", []):
            yield definition, request


METRIC_QUERY = re.compile(
    r"^sum:(?P<metric>[A-Za-z0-9_.]+)\{(?P<scope>[^}]*)\}(?: by \{(?P<by>[a-z_,]+)\})?\.as_count\(\)$"
)


def metrics_in(query: str) -> list[str]:
    """The metric names of a Datadog metric query or monitor query."""
    return re.findall(r"\b(?:sum|avg|min|max|count):([A-Za-z0-9_.]+)\{", query)


def counter_names(prefix: str) -> set[str]:
    return {m.full_name(prefix) for m in catalogue.STATE_STORE_METRICS}


def retry_names(prefix: str) -> set[str]:
    return {m.full_name(prefix) for m in catalogue.RETRY_METRICS}


def test_every_query_names_only_catalogue_counters_with_the_prefix(custom: Path) -> None:
    for prefix, folder in folders(custom):
        known = counter_names(prefix) | retry_names(prefix)
        every = {m.full_name(prefix) for m in catalogue.ALL_METRICS}
        used: set[str] = set()
        for _, request in requests(board(folder)):
            for query in request["queries"]:
                assert query["data_source"] == "metrics"
                match = METRIC_QUERY.match(query["query"])
                assert match, query["query"]
                assert match["metric"] in known, query["query"]
                used.add(match["metric"])
        assert used == known  # every counter is shown somewhere
        for data in monitor_files(folder).values():
            names = metrics_in(data["query"])
            assert names and set(names) <= every, data["query"]
        text = (folder / dd_dashboard.FILENAME).read_text()
        if prefix != catalogue.DEFAULT_PREFIX:
            assert not re.search(r"sum:airflow\.", text)


def test_every_query_applies_the_environment_and_every_template_variable() -> None:
    data = board()
    variables = data["template_variables"]
    assert [v["name"] for v in variables] == ["env", *FILTERS]
    assert set(FILTERS) == set(GRAFANA_VARIABLES)
    for variable in variables:
        assert variable["prefix"] == variable["name"] and variable["defaults"] == ["*"]
    wanted = [f"${name}" for name in ("env", *FILTERS)]
    by_dag = 0
    for definition, request in requests(data):
        for query in request["queries"]:
            match = METRIC_QUERY.match(query["query"])
            assert match
            scope = match["scope"].split(",")
            assert scope[: len(wanted)] == wanted, (definition["title"], query["query"])
            extra = scope[len(wanted) :]
            watchers = definition["title"].startswith("Asset watcher")
            grouped_by_dag = "dag_id" in (match["by"] or "").split(",")
            if watchers:
                assert extra == ["run_type:asset_watcher"], query["query"]
            elif grouped_by_dag:  # a watcher belongs to no DAG, as on the Grafana dashboard
                assert extra == ["!run_type:asset_watcher"], query["query"]
                assert "are left out" in definition["description"], definition["title"]
                by_dag += 1
            else:
                assert extra == [], query["query"]
    assert by_dag > 20


def test_formulas_use_exactly_their_request_s_queries() -> None:
    for definition, request in requests(board()):
        names = [q["name"] for q in request["queries"]]
        assert len(names) == len(set(names))
        used = {n for f in request["formulas"] for n in re.findall(r"\bquery\d+\b", f["formula"])}
        assert used == set(names), definition["title"]
        for formula in request["formulas"]:
            assert formula["alias"]
            assert re.fullmatch(r"[\w\s+/()]+", formula["formula"]), formula["formula"]
        scalar = definition["type"] in {"query_value", "toplist", "query_table"}
        assert request["response_format"] == ("scalar" if scalar else "timeseries"), definition["title"]
        assert all((q.get("aggregator") == "sum") == scalar for q in request["queries"]), definition["title"]


def test_the_issue_s_widgets_are_there() -> None:
    titles = {d.get("title") for d in widgets(board())}
    for wanted in (
        "State store calls",
        "Reads per write",
        "Task store found ratio",
        "Asset store found ratio",
        "Error ratio",
        "Calls by DAG and operation",
        "Reads per write by DAG",
        "Found ratio by DAG",
        "Deletes and clears by DAG",
        "Top DAGs by calls",
        "Calls by DAG and task",
        "Calls by operator",
        "Calls by run type",
        "Calls by team",
        "Errors by store and method",
        "Error ratio by DAG",
        "Asset watcher calls by trigger",
        "Retry resume rate",
        "Retried attempts: resumed and started over",
        "Resume rate by DAG and task (selected range)",
    ):
        assert wanted in titles, wanted
    for definition in widgets(board()):
        if definition["type"] not in {"group", "note"}:
            assert definition["description"], definition["title"]


# -- what the formulas compute ------------------------------------------------------------------------------

#: Hand-made totals of one time frame, one per counter (all different, so a wrong term shows).
TOTALS = {
    (Store.TASK, Outcome.READ_FOUND): 3,
    (Store.TASK, Outcome.READ_ABSENT): 5,
    (Store.TASK, Outcome.WRITE): 7,
    (Store.TASK, Outcome.DELETE): 11,
    (Store.TASK, Outcome.CLEAR): 13,
    (Store.TASK, Outcome.ERROR): 17,
    (Store.ASSET, Outcome.READ_FOUND): 19,
    (Store.ASSET, Outcome.READ_ABSENT): 23,
    (Store.ASSET, Outcome.WRITE): 29,
    (Store.ASSET, Outcome.DELETE): 31,
    (Store.ASSET, Outcome.CLEAR): 37,
    (Store.ASSET, Outcome.ERROR): 41,
}
ALL = sum(TOTALS.values())
#: The retry counters' totals: retried attempts, not calls.
RETRY_TOTALS = {catalogue.RETRY_RESUMED: 43, catalogue.RETRY_NOT_RESUMED: 47}
EXPECTED_VALUES = {
    "State store calls": ALL,
    "Reads per write": (3 + 5 + 19 + 23) / (7 + 29),
    "Task store found ratio": 3 / (3 + 5),
    "Asset store found ratio": 19 / (19 + 23),
    "Deletes and clears": 11 + 13 + 31 + 37,
    "Error ratio": (17 + 41) / ALL,
    "Retry resume rate": 43 / (43 + 47),
}


def evaluate(formula: str, queries: list[dict[str, Any]]) -> float:
    by_metric = {catalogue.metric_for(s, o).full_name(): v for (s, o), v in TOTALS.items()}
    by_metric |= {m.full_name(): v for m, v in RETRY_TOTALS.items()}
    values = {}
    for query in queries:
        match = METRIC_QUERY.match(query["query"])
        assert match
        values[query["name"]] = by_metric[match["metric"]]
    result: float = eval(formula, {"__builtins__": {}}, values)  # arithmetic of query names only
    return result


def test_the_overview_formulas_compute_their_titles() -> None:
    seen = {}
    for definition, request in requests(board()):
        if definition["type"] == "query_value":
            (formula,) = request["formulas"]
            seen[definition["title"]] = evaluate(formula["formula"], request["queries"])
    assert seen == pytest.approx(EXPECTED_VALUES)


def test_per_outcome_formulas_sum_the_right_counters() -> None:
    for definition, request in requests(board()):
        for formula in request["formulas"]:
            if formula["alias"] in {o.value for o in Outcome}:
                outcome = Outcome(formula["alias"])
                stores = {"Task store calls by operation": (Store.TASK,)}.get(
                    definition["title"],
                    (Store.ASSET,) if "Asset" in definition["title"] else tuple(Store),
                )
                assert evaluate(formula["formula"], request["queries"]) == sum(
                    TOTALS[(s, outcome)] for s in stores
                ), (definition["title"], formula)


# -- monitors ----------------------------------------------------------------------------------------------


THRESHOLD = re.compile(
    r"^(?P<window>(?:sum|min|max)\(last_(?P<last>\w+)\)):(?P<expr>.+) > (?P<value>[0-9.]+)$"
)
RATIO_MONITORS = (
    "state-store-error-ratio.json",
    "state-store-failing.json",
    "state-store-watcher-error-ratio.json",
)


def rules_of(collector: Path) -> dict[str, dict[str, Any]]:
    """Every alerting rule of the exported rule files, by alert name."""
    found = {}
    for path in collector.glob("*rules.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            found |= {rule["alert"]: rule for rule in group["rules"] if "alert" in rule}
    return found


def twins(folder: Path) -> dict[str, dict[str, Any]]:
    """Each monitor by the Prometheus alert it mirrors (its ``prometheus_alert:`` tag)."""
    found: dict[str, dict[str, Any]] = {}
    for data in monitor_files(folder).values():
        (tag,) = [t for t in data["tags"] if t.startswith("prometheus_alert:")]
        name = tag.split(":", 1)[1]
        assert name not in found, f"two monitors for {name}"
        found[name] = data
    return found


def numbers(expr: str) -> list[float]:
    return [float(n) for n in re.findall(r"(?:>=?|<) ([0-9.]+)", expr)]


def window_of(expr: str) -> str:
    (window,) = set(re.findall(r"\[(\w+)\]\)\)", expr))
    return window


def test_every_alert_has_its_datadog_twin_with_the_same_thresholds(custom: Path) -> None:
    for collector, folder in ((ROOT / "collector", DATADOG), (custom / "collector", custom / "datadog")):
        alerts, monitors = rules_of(collector), twins(folder)
        assert set(monitors) == set(alerts)
        for name, rule in alerts.items():
            data = monitors[name]
            match = THRESHOLD.match(data["query"])
            assert match, data["query"]
            critical = data["options"]["thresholds"]["critical"]
            assert float(match["value"]) == critical, name
            if name in (
                "StateStoreErrorRateHigh",
                "StateStoreWatcherErrorRateHigh",
                "StateStoreFailingAcrossDags",
            ):
                # The same ratio, window and floor of calls (is_greater(calls, floor - 1) == calls >= floor).
                ratio, floor = numbers(rule["expr"])
                assert critical == ratio and match["last"] == window_of(rule["expr"]), name
                (below,) = {int(n) for n in re.findall(r", (\d+)\) > ", data["query"])}
                assert below == floor - 1, name
            elif name == "StateStoreApiServerLoopStalled":
                assert [critical] == numbers(rule["expr"]) and match["last"] == rule["for"]
            elif name == "StateStoreApiServerLongStalls":
                assert (
                    critical / 60 == pytest.approx(numbers(rule["expr"])[0]) and match["last"] == rule["for"]
                )
            elif name == "StateStoreInventoryStale":
                assert [critical] == numbers(rule["expr"]) and match["last"] == rule["for"]
            elif name == "StateStoreInventoryDown":
                assert data["options"]["notify_no_data"] is True  # absent() of the alert
                assert data["options"]["no_data_timeframe"] * 60 == settings.seconds(rule["for"])
                assert match["last"] == rule["for"]
            elif name == "StateStoreRetentionNotApplied":
                assert match["last"] == re.search(r"\[(\w+)\]", rule["expr"]).group(1)
                assert data["options"]["require_full_window"] is True  # the alert's `offset <window>`
            elif name == "StateStoreMetricsMissing":
                assert data["options"]["notify_no_data"] is True  # the alert: the counters are gone
                assert data["options"]["no_data_timeframe"] * 60 == settings.seconds(rule["for"])
                assert match["last"] == rule["for"]
            elif name == "StateStoreRetriesStartOver":
                # The same share of retries that started over, window and floor of retried attempts.
                ratio, floor = numbers(rule["expr"])
                assert critical == ratio and match["last"] == window_of(rule["expr"]), name
                (below,) = {int(n) for n in re.findall(r", (\d+)\) > ", data["query"])}
                assert below == floor - 1, name
            else:
                assert name == "StateStoreTaskStateNeverRead"
                assert match["last"] == window_of(rule["expr"])


def test_monitors_alert_per_environment_with_priority_renotify_runbook_and_dashboard_link(
    custom: Path,
) -> None:
    alerts = rules_of(ROOT / "collector")
    priority = {"critical": 1, "warning": 3, "info": 5}
    for name, data in twins(DATADOG).items():
        rule = alerts[name]
        assert data["name"].startswith("[store-metrics]")
        assert data["priority"] == priority[rule["labels"]["severity"]], name
        assert data["options"]["renotify_interval"] == 240
        assert "{{#is_alert}}" in data["message"] and "{{#is_recovery}}" in data["message"]
        assert f"Runbook: {rule['annotations']['runbook_url']}" in data["message"]
        assert (
            "Dashboard: https://app.datadoghq.com/dashboard/lists?q=store-metrics&tpl_var_env={{env.name}}"
            in (data["message"])
        )
        # Every group of every query is per environment: two environments never mix.
        for by in re.findall(r" by \{([a-z_,]+)\}", data["query"]):
            assert by.split(",")[0] == "env", (name, data["query"])
        assert " by {env" in data["query"], name
    error = twins(DATADOG)["StateStoreErrorRateHigh"]
    assert " by {env,dag_id}" in error["query"] and "{{dag_id.name}}" in error["name"]
    assert "!run_type:asset_watcher" in error["query"]
    assert " by {env}" in twins(DATADOG)["StateStoreFailingAcrossDags"]["query"]  # one alert per environment


def test_the_retry_widgets_and_monitor_divide_by_retried_attempts(custom: Path) -> None:
    """The retry counters count attempts, never calls: no call formula sums them, and the retry
    formulas divide by resumed + started over."""
    for definition, request in requests(board()):
        for formula in request["formulas"]:
            value = evaluate(formula["formula"], request["queries"])
            if formula["alias"] == "resume rate":
                assert value == pytest.approx(43 / (43 + 47)), definition["title"]
            elif formula["alias"] == "resumed":
                assert value == 43
            elif formula["alias"] == "started over":
                assert value == 47
            else:
                used = {METRIC_QUERY.match(q["query"])["metric"] for q in request["queries"]}  # type: ignore[index]
                assert not used & retry_names(catalogue.DEFAULT_PREFIX), (definition["title"], formula)
    for prefix, folder in folders(custom):
        data = monitor_files(folder)["state-store-retries-start-over.json"]
        match = THRESHOLD.match(data["query"])
        assert match
        numerator, denominator = match["expr"].split(") / (")
        denominator, floor = denominator.split(") * is_greater(")
        assert set(metrics_in(numerator)) == {catalogue.RETRY_NOT_RESUMED.full_name(prefix)}
        assert sorted(metrics_in(denominator)) == sorted(retry_names(prefix))
        assert sorted(metrics_in(floor)) == sorted(retry_names(prefix))
        assert " by {env,dag_id,task_id}" in data["query"]


def test_monitor_ratios_divide_errors_by_all_calls(custom: Path) -> None:
    for prefix, folder in folders(custom):
        files = monitor_files(folder)
        for name in RATIO_MONITORS:
            match = THRESHOLD.match(files[name]["query"])
            assert match
            numerator, denominator = match["expr"].split(") / (")
            denominator = denominator.split(") * is_greater(")[0]
            errors = {catalogue.metric_for(s, Outcome.ERROR).full_name(prefix) for s in Store}
            assert set(metrics_in(numerator)) == errors
            assert sorted(metrics_in(denominator)) == sorted(counter_names(prefix))
