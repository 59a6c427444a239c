"""Generate the Grafana dashboard ``dashboards/store-metrics.json`` from the metric catalogue.

    python dashboards/generate.py            # rewrite the dashboard
    python dashboards/generate.py --check    # exit 1 if the committed JSON is out of date
    python dashboards/generate.py --prefix myco --out /tmp/x   # for a non-default metric prefix

The committed JSON is what users import. Every query is built from a small declarative spec
(:class:`Measure`, :class:`Ratio`, :class:`TopK`) so the tests can compute, independently of
PromQL, what each query must return for the calls a scenario made.

The last row, collapsed, is the API server side (:func:`server_row`): the state store routes'
latency and value sizes and each worker's event-loop stalls. Its series have no DAG labels, so
the dashboard's filters do not apply to it; its queries load only when the row is opened.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "collector"))

import promql  # noqa: E402
from promql import ALL_OUTCOMES, COMPLETED, READS  # noqa: E402

from store_metrics import catalogue  # noqa: E402
from store_metrics.catalogue import Outcome, Store  # noqa: E402

UID = "store-metrics-state-store"
TITLE = "Airflow state store usage (store-metrics)"
SCHEMA_VERSION = 42  # Grafana's current dashboard schema (apps/dashboard/pkg/migration/schemaversion)
DS = {"type": "prometheus", "uid": "${datasource}"}
RANGE = "$__range"
RATE_INTERVAL = "$__rate_interval"

DAG_ID, TASK_ID, RUN_TYPE, OPERATOR, TEAM_NAME, OPERATION = (
    catalogue.DAG_ID,
    catalogue.TASK_ID,
    catalogue.RUN_TYPE,
    catalogue.OPERATOR,
    catalogue.TEAM_NAME,
    catalogue.OPERATION,
)
BOTH = (Store.TASK, Store.ASSET)


# -- query specs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measure:
    """Calls of ``series`` summed and grouped ``by``: within the range ("count") or per second ("rate")."""

    kind: str  # "count" | "rate"
    series: tuple[str, ...]
    by: tuple[str, ...] = ()

    def expr(self) -> str:
        sel = promql.DASHBOARD_SELECTOR
        if self.kind == "count":
            return promql.count_sum(self.series, sel, RANGE, self.by)
        return promql.rate_sum(self.series, sel, RATE_INTERVAL, self.by)


@dataclass(frozen=True)
class Ratio:
    """``num / den`` per group, only where ``den > 0``; a group ``num`` lacks counts as 0."""

    num: Measure
    den: Measure

    @property
    def by(self) -> tuple[str, ...]:
        return self.num.by

    @property
    def kind(self) -> str:
        return self.num.kind

    def expr(self) -> str:
        fill = promql.groups(self.den.series, promql.DASHBOARD_SELECTOR, self.den.by)
        return promql.ratio(self.num.expr(), self.den.expr(), fill)


@dataclass(frozen=True)
class TopK:
    k: int
    measure: Measure

    @property
    def by(self) -> tuple[str, ...]:
        return self.measure.by

    @property
    def kind(self) -> str:
        return self.measure.kind

    def expr(self) -> str:
        return f"topk({self.k}, {self.measure.expr()})"


@dataclass(frozen=True)
class Server:
    """A query over the API server's series (no DAG labels, so no dashboard filters)."""

    promql: str
    kind: str = "rate"  # "rate" (time series) | "count" (selected range, instant)

    def expr(self) -> str:
        return self.promql


Spec = Measure | Ratio | TopK | Server


def series(scopes: Sequence[Store], outcomes: Sequence[Outcome], prefix: str) -> tuple[str, ...]:
    return tuple(promql.names(scopes, outcomes, prefix))


@dataclass
class Target:
    spec: Spec
    legend: str = ""
    instant: bool = False
    table: bool = False

    def to_json(self, ref: str) -> dict[str, Any]:
        target: dict[str, Any] = {
            "datasource": DS,
            "refId": ref,
            "expr": self.spec.expr(),
            "legendFormat": self.legend or "__auto",
            "range": not self.instant,
            "instant": self.instant,
            "editorMode": "code",
        }
        if self.table:
            target["format"] = "table"
        return target


@dataclass
class Panel:
    kind: str  # timeseries | stat | table | bargauge
    title: str
    description: str
    targets: list[Target]
    unit: str = "short"
    w: int = 8
    h: int = 8
    decimals: int | None = None
    max: float | None = None
    renames: dict[str, str] = field(default_factory=dict)


@dataclass
class Row:
    title: str
    panels: list[Panel]


def build_rows(prefix: str) -> list[Row]:
    def m(kind: str, scopes: Sequence[Store], outcomes: Sequence[Outcome], by: Sequence[str] = ()) -> Measure:
        return Measure(kind, series(scopes, outcomes, prefix), tuple(by))

    everything = (BOTH, ALL_OUTCOMES)
    all_completed_or_error = (*COMPLETED, Outcome.ERROR)
    assert set(all_completed_or_error) == set(ALL_OUTCOMES)
    table_by = (DAG_ID, TASK_ID, OPERATOR, RUN_TYPE)

    def found(kind: str, scope: Store, by: Sequence[str] = ()) -> Ratio:
        return Ratio(m(kind, (scope,), (Outcome.READ_FOUND,), by), m(kind, (scope,), READS, by))

    def reads_per_write(kind: str, by: Sequence[str] = ()) -> Ratio:
        return Ratio(m(kind, BOTH, READS, by), m(kind, BOTH, (Outcome.WRITE,), by))

    def error_ratio(kind: str, by: Sequence[str] = ()) -> Ratio:
        return Ratio(m(kind, BOTH, (Outcome.ERROR,), by), m(kind, *everything, by))

    range_note = (
        " Counted over the dashboard's time range; a series first seen inside the range (a DAG's "
        "first run) counts in full."
    )
    return [
        Row(
            "Overview (selected time range)",
            [
                Panel(
                    "stat",
                    "State store calls",
                    "Every state store call in the range: reads, writes, "
                    "deletes, clears, and calls that raised." + range_note,
                    [Target(m("count", *everything), "calls", instant=True)],
                    w=4,
                    h=5,
                    decimals=0,
                ),
                Panel(
                    "stat",
                    "Reads per write",
                    "Task and asset store reads (found + absent) per write." + range_note,
                    [Target(reads_per_write("count"), "reads per write", instant=True)],
                    unit="none",
                    w=4,
                    h=5,
                    decimals=2,
                ),
                Panel(
                    "stat",
                    "Task store found ratio",
                    "read_found / (read_found + read_absent) of the "
                    "task store: how often a task's get() found state saved by an earlier attempt of the "
                    "same run, i.e. a retry that could resume." + range_note,
                    [Target(found("count", Store.TASK), "found", instant=True)],
                    unit="percentunit",
                    w=4,
                    h=5,
                    max=1,
                ),
                Panel(
                    "stat",
                    "Asset store found ratio",
                    "read_found / (read_found + read_absent) of the "
                    "asset store: how often a watermark read found a value." + range_note,
                    [Target(found("count", Store.ASSET), "found", instant=True)],
                    unit="percentunit",
                    w=4,
                    h=5,
                    max=1,
                ),
                Panel(
                    "stat",
                    "Deletes and clears",
                    "delete and clear calls, task and asset stores." + range_note,
                    [
                        Target(
                            m("count", BOTH, (Outcome.DELETE, Outcome.CLEAR)),
                            "deletes + clears",
                            instant=True,
                        )
                    ],
                    w=4,
                    h=5,
                    decimals=0,
                ),
                Panel(
                    "stat",
                    "Error ratio",
                    "Calls that raised / all calls." + range_note,
                    [Target(error_ratio("count"), "errors", instant=True)],
                    unit="percentunit",
                    w=4,
                    h=5,
                    max=1,
                ),
            ],
        ),
        Row(
            "Calls per second",
            [
                Panel(
                    "timeseries",
                    "Task store calls per second by operation",
                    "task_state_store calls per second, one line per outcome.",
                    [Target(m("rate", (Store.TASK,), (o,)), o.value) for o in ALL_OUTCOMES],
                    unit="ops",
                ),
                Panel(
                    "timeseries",
                    "Asset store calls per second by operation",
                    "asset_state_store calls per second, one line per outcome.",
                    [Target(m("rate", (Store.ASSET,), (o,)), o.value) for o in ALL_OUTCOMES],
                    unit="ops",
                ),
                Panel(
                    "timeseries",
                    "Calls per second by DAG",
                    "All state store calls per second, per DAG.",
                    [Target(m("rate", *everything, (DAG_ID,)), "{{dag_id}}")],
                    unit="ops",
                ),
            ],
        ),
        Row(
            "Read/write and found ratios",
            [
                Panel(
                    "timeseries",
                    "Reads per write by DAG",
                    "Reads (found + absent) per write, both stores, where the DAG wrote in the interval.",
                    [Target(reads_per_write("rate", (DAG_ID,)), "{{dag_id}}")],
                    unit="none",
                ),
                Panel(
                    "timeseries",
                    "Found ratio by DAG",
                    "read_found / (read_found + read_absent) per DAG "
                    "and store, where the DAG read in the interval.",
                    [
                        Target(found("rate", Store.TASK, (DAG_ID,)), "{{dag_id}} task store"),
                        Target(found("rate", Store.ASSET, (DAG_ID,)), "{{dag_id}} asset store"),
                    ],
                    unit="percentunit",
                    max=1,
                ),
                Panel(
                    "bargauge",
                    "Found ratio by DAG (selected range)",
                    "read_found / (read_found + read_absent) per DAG and store." + range_note,
                    [
                        Target(found("count", Store.TASK, (DAG_ID,)), "{{dag_id}} task store", instant=True),
                        Target(
                            found("count", Store.ASSET, (DAG_ID,)), "{{dag_id}} asset store", instant=True
                        ),
                    ],
                    unit="percentunit",
                    max=1,
                ),
            ],
        ),
        Row(
            "Top DAGs and tasks",
            [
                Panel(
                    "bargauge",
                    "Top DAGs by calls",
                    "The 10 DAGs with the most state store calls." + range_note,
                    [Target(TopK(10, m("count", *everything, (DAG_ID,))), "{{dag_id}}", instant=True)],
                    w=8,
                    h=10,
                    decimals=0,
                ),
                Panel(
                    "table",
                    "Calls by DAG and task",
                    "State store calls per DAG, task, operator and run type, by kind of call." + range_note,
                    [
                        Target(m("count", BOTH, READS, table_by), instant=True, table=True),
                        Target(m("count", BOTH, (Outcome.WRITE,), table_by), instant=True, table=True),
                        Target(m("count", BOTH, (Outcome.DELETE,), table_by), instant=True, table=True),
                        Target(m("count", BOTH, (Outcome.CLEAR,), table_by), instant=True, table=True),
                        Target(m("count", BOTH, (Outcome.ERROR,), table_by), instant=True, table=True),
                    ],
                    w=16,
                    h=10,
                    decimals=0,
                    renames={
                        "Value #A": "reads",
                        "Value #B": "writes",
                        "Value #C": "deletes",
                        "Value #D": "clears",
                        "Value #E": "errors",
                    },
                ),
            ],
        ),
        Row(
            "Delete and clear usage",
            [
                Panel(
                    "timeseries",
                    "Deletes and clears per second by DAG",
                    "delete and clear calls per second, per DAG and store.",
                    [
                        Target(
                            m("rate", (s,), (o,), (DAG_ID,)),
                            f"{{{{dag_id}}}} {s.value.split('_')[0]} {o.value}",
                        )
                        for s in BOTH
                        for o in (Outcome.DELETE, Outcome.CLEAR)
                    ],
                    unit="ops",
                    w=12,
                ),
                Panel(
                    "table",
                    "Deletes and clears by DAG and task",
                    "delete and clear calls per DAG and task, by store." + range_note,
                    [
                        Target(m("count", (s,), (o,), (DAG_ID, TASK_ID)), instant=True, table=True)
                        for s in BOTH
                        for o in (Outcome.DELETE, Outcome.CLEAR)
                    ],
                    w=12,
                    decimals=0,
                    renames={
                        "Value #A": "task deletes",
                        "Value #B": "task clears",
                        "Value #C": "asset deletes",
                        "Value #D": "asset clears",
                    },
                ),
            ],
        ),
        Row(
            "Breakdowns",
            [
                Panel(
                    "bargauge",
                    "Calls by operator",
                    "State store calls per operator class. Operators "
                    "call the store at very different grains (one call per step vs one per task), so "
                    "compare usage, not volume." + range_note,
                    [Target(m("count", *everything, (OPERATOR,)), "{{operator}}", instant=True)],
                    decimals=0,
                ),
                Panel(
                    "bargauge",
                    "Calls by run type",
                    "State store calls per DAG run type (manual, "
                    "scheduled, backfill, asset_triggered)." + range_note,
                    [Target(m("count", *everything, (RUN_TYPE,)), "{{run_type}}", instant=True)],
                    decimals=0,
                ),
                Panel(
                    "bargauge",
                    "Calls by team",
                    "State store calls per team (multi-team deployments; "
                    "an empty name is a DAG without a team)." + range_note,
                    [Target(m("count", *everything, (TEAM_NAME,)), "{{team_name}}", instant=True)],
                    decimals=0,
                ),
            ],
        ),
        Row(
            "Errors",
            [
                Panel(
                    "timeseries",
                    "Errors per second by store and method",
                    "Calls that raised, per "
                    "second, by store and the method that raised (get, set, delete, clear).",
                    [
                        Target(
                            m("rate", (s,), (Outcome.ERROR,), (OPERATION,)),
                            f"{s.value.split('_')[0]} {{{{operation}}}}",
                        )
                        for s in BOTH
                    ],
                    unit="ops",
                ),
                Panel(
                    "timeseries",
                    "Error ratio by DAG",
                    "Calls that raised / all calls, per DAG, where the DAG made calls in the interval.",
                    [Target(error_ratio("rate", (DAG_ID,)), "{{dag_id}}")],
                    unit="percentunit",
                    max=1,
                ),
                Panel(
                    "table",
                    "Errors by DAG, task and method",
                    "Calls that raised per DAG, task and method, by store." + range_note,
                    [
                        Target(
                            m("count", (s,), (Outcome.ERROR,), (DAG_ID, TASK_ID, OPERATION)),
                            instant=True,
                            table=True,
                        )
                        for s in BOTH
                    ],
                    decimals=0,
                    renames={"Value #A": "task store errors", "Value #B": "asset store errors"},
                ),
            ],
        ),
    ]


SERVER_ROW_TITLE = "API server: state store routes and event loop (not filtered by DAG)"


def server_row(prefix: str) -> Row:
    """Panels over the API server side's series, by store/operation and by worker."""
    requests = catalogue.SERVER_REQUESTS.prometheus_name(prefix)
    duration = catalogue.SERVER_DURATION.prometheus_name(prefix)
    request_size = catalogue.SERVER_REQUEST_SIZE.prometheus_name(prefix)
    response_size = catalogue.SERVER_RESPONSE_SIZE.prometheus_name(prefix)
    stall = catalogue.LOOP_STALL.prometheus_name(prefix)
    stall_max = catalogue.LOOP_STALL_MAX.prometheus_name(prefix)
    long_stalls = catalogue.LONG_STALLS.prometheus_name(prefix)
    rate = RATE_INTERVAL

    def quantile(q: str, series: str, by: str, matchers: str = "") -> str:
        return f"histogram_quantile({q}, sum by (le, {by}) (rate({series}_bucket{matchers}[{rate}])))"

    def sizes(series: str, operation: str) -> str:
        return f'sum by (le) (increase({series}_bucket{{operation="{operation}"}}[{RANGE}]))'

    about = (
        " From the API server's root middleware (every task's state store calls reach it as "
        "Execution API requests); one series per worker, summed here."
    )
    return Row(
        SERVER_ROW_TITLE,
        [
            Panel(
                "timeseries",
                "State store requests per second (API server)",
                "Execution API state store requests per second by store, operation and outcome (a GET "
                "answered 404 is read_absent, as on the task side)." + about,
                [
                    Target(
                        Server(f"sum by (store, operation, outcome) (rate({requests}[{rate}]))"),
                        "{{store}} {{operation}} {{outcome}}",
                    )
                ],
                unit="reqps",
            ),
            Panel(
                "timeseries",
                "Request latency p99 by operation and value size",
                "99th percentile of the time from the request reaching the API server's app to the last "
                "byte of its response, by store, operation and the size class of the value moved (the "
                "body of a set, the response to a get)." + about,
                [
                    Target(
                        Server(quantile("0.99", duration, "store, operation, value_size")),
                        "p99 {{store}} {{operation}} {{value_size}}",
                    ),
                    Target(
                        Server(quantile("0.5", duration, "store, operation, value_size")),
                        "p50 {{store}} {{operation}} {{value_size}}",
                    ),
                ],
                unit="ms",
            ),
            Panel(
                "bargauge",
                "Value sizes (selected range)",
                "Requests per body size bucket, cumulative (each bar counts requests up to that size): "
                "request bodies of sets, response bodies of gets." + about,
                [
                    Target(Server(sizes(request_size, "set"), "count"), "set <= {{le}} B", instant=True),
                    Target(Server(sizes(response_size, "get"), "count"), "get <= {{le}} B", instant=True),
                ],
                decimals=0,
            ),
            Panel(
                "timeseries",
                "Event-loop stall: largest per interval, by worker",
                "The longest a worker's event loop could not run anything in each export interval (the "
                "stall monitor's late ticks). Healthy: a few ms. A spike is time every request that worker "
                "serves had to wait.",
                [Target(Server(f"max by (worker) ({stall_max})"), "{{worker}}")],
                unit="ms",
            ),
            Panel(
                "timeseries",
                "Event-loop stalled share, by worker",
                "Share of time each worker's event loop was stalled: stalled ms per second / 1000 (alert "
                "StateStoreApiServerLoopStalled above 5% for 10 minutes).",
                [Target(Server(f"sum by (worker) (rate({stall}_sum[{rate}])) / 1000"), "{{worker}}")],
                unit="percentunit",
            ),
            Panel(
                "timeseries",
                "Long stalls per second by state store route in flight",
                "Stalls of stall_threshold_ms (default 100 ms) or more per second, by the state store "
                "route in flight during them; none/none: no state store request was, look elsewhere "
                "(another route, a plugin, garbage collection).",
                [
                    Target(
                        Server(f"sum by (store, operation) (rate({long_stalls}[{rate}]))"),
                        "{{store}} {{operation}}",
                    )
                ],
                unit="ops",
            ),
            Panel(
                "bargauge",
                "Event-loop stalls by length (selected range)",
                "Stalls (ticks at least 1 ms late) per length bucket, cumulative (each bar counts stalls up "
                "to that length), all workers.",
                [
                    Target(
                        Server(f"sum by (le) (increase({stall}_bucket[{RANGE}]))", "count"),
                        "<= {{le}} ms",
                        instant=True,
                    )
                ],
                decimals=0,
            ),
        ],
    )


# -- JSON ---------------------------------------------------------------------------------------


def _variable(label: str, title: str, filters: Sequence[str], prefix: str) -> dict[str, Any]:
    matchers = [f'__name__=~"{promql.name_regex(promql.all_names(prefix))}"']
    matchers += [f'{f}=~"${f}"' for f in filters]
    query = f"label_values({{{', '.join(matchers)}}}, {label})"
    return {
        "name": label,
        "label": title,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": query,
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {},
        "regex": "",
        "sort": 1,
        "hide": 0,
        "skipUrlSync": False,
        "options": [],
    }


def templating(prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            # Import through the UI replaces ${DS_PROMETHEUS}; a provisioned copy falls back to the
            # default Prometheus data source.
            "current": {"selected": False, "text": "${DS_PROMETHEUS}", "value": "${DS_PROMETHEUS}"},
            "regex": "",
            "refresh": 1,
            "hide": 0,
            "includeAll": False,
            "multi": False,
            "options": [],
            "skipUrlSync": False,
        },
        _variable(TEAM_NAME, "Team", (), prefix),
        _variable(DAG_ID, "DAG", (TEAM_NAME,), prefix),
        _variable(TASK_ID, "Task", (TEAM_NAME, DAG_ID), prefix),
        _variable(OPERATOR, "Operator", (TEAM_NAME, DAG_ID, TASK_ID), prefix),
        _variable(RUN_TYPE, "Run type", (TEAM_NAME, DAG_ID, TASK_ID), prefix),
    ]


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit, "color": {"mode": "palette-classic"}}
    if panel.decimals is not None:
        defaults["decimals"] = panel.decimals
    if panel.max is not None:
        defaults["min"] = 0
        defaults["max"] = panel.max
    options: dict[str, Any]
    if panel.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10,
            "showPoints": "never",
            "spanNulls": False,
        }
        options = {
            "legend": {
                "displayMode": "table",
                "placement": "bottom",
                "showLegend": True,
                "calcs": ["mean", "max"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    elif panel.kind == "stat":
        defaults["color"] = {"mode": "thresholds"}
        defaults["thresholds"] = {"mode": "absolute", "steps": [{"color": "blue", "value": None}]}
        options = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "none",
            "justifyMode": "auto",
            "textMode": "auto",
            "orientation": "auto",
        }
    elif panel.kind == "bargauge":
        defaults["color"] = {"mode": "continuous-BlPu"}
        options = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "orientation": "horizontal",
            "displayMode": "gradient",
            "showUnfilled": True,
            "valueMode": "color",
            "namePlacement": "auto",
            "sizing": "auto",
        }
    elif panel.kind == "table":
        options = {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}}
    else:  # pragma: no cover - guarded by the tests
        raise ValueError(panel.kind)
    result: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DS,
        "gridPos": {"h": panel.h, "w": panel.w, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options,
        "targets": [t.to_json(chr(ord("A") + i)) for i, t in enumerate(panel.targets)],
    }
    if panel.kind == "table":
        result["transformations"] = [
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True},
                    "renameByName": panel.renames,
                    "indexByName": {},
                },
            },
        ]
    return result


def dashboard(prefix: str = catalogue.DEFAULT_PREFIX) -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    panel_id = 1
    y = 0
    for row in build_rows(prefix):
        panels.append(
            {
                "id": panel_id,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        panel_id += 1
        y += 1
        x = 0
        row_height = 0
        for panel in row.panels:
            if x + panel.w > 24:
                x = 0
                y += row_height
                row_height = 0
            panels.append(_panel_json(panel, panel_id, x, y))
            panel_id += 1
            x += panel.w
            row_height = max(row_height, panel.h)
        y += row_height
    # The API server row, collapsed: its panels live inside the row and load when it is opened.
    server = server_row(prefix)
    nested: list[dict[str, Any]] = []
    row_id, panel_id = panel_id, panel_id + 1
    x, row_height, inner_y = 0, 0, y + 1
    for panel in server.panels:
        if x + panel.w > 24:
            x, inner_y, row_height = 0, inner_y + row_height, 0
        nested.append(_panel_json(panel, panel_id, x, inner_y))
        panel_id += 1
        x += panel.w
        row_height = max(row_height, panel.h)
    panels.append(
        {
            "id": row_id,
            "type": "row",
            "title": server.title,
            "collapsed": True,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            "panels": nested,
        }
    )
    kinds = sorted({p["type"] for p in [*panels, *nested] if p["type"] != "row"})
    names = {"bargauge": "Bar gauge", "stat": "Stat", "table": "Table", "timeseries": "Time series"}
    return {
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "description": "The Prometheus that scrapes the store-metrics series",
                "type": "datasource",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
            }
        ],
        "__elements": {},
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "11.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
            *({"type": "panel", "id": k, "name": names[k], "version": ""} for k in kinds),
        ],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "description": "Per-DAG usage of Airflow's task and asset state stores, from the store-metrics "
        "counters. Wiring and topologies: docs/wiring.md of store-metrics.",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "panels": panels,
        "refresh": "1m",
        "schemaVersion": SCHEMA_VERSION,
        "tags": ["airflow", "store-metrics", "state-store"],
        "templating": {"list": templating(prefix)},
        "time": {"from": "now-24h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": TITLE,
        "uid": UID,
        "version": 1,
        "weekStart": "",
    }


def specs(prefix: str = catalogue.DEFAULT_PREFIX) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the dashboard, in JSON order."""
    out = []
    for row in build_rows(prefix):
        for panel in row.panels:
            for i, target in enumerate(panel.targets):
                out.append((panel.title, chr(ord("A") + i), target))
    return out


def server_specs(prefix: str = catalogue.DEFAULT_PREFIX) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the collapsed API server row."""
    return [
        (panel.title, chr(ord("A") + i), target)
        for panel in server_row(prefix).panels
        for i, target in enumerate(panel.targets)
    ]


def render(prefix: str = catalogue.DEFAULT_PREFIX) -> str:
    return json.dumps(dashboard(prefix), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed JSON is out of date")
    parser.add_argument(
        "--prefix", default=catalogue.DEFAULT_PREFIX, help="metric name prefix (default airflow)"
    )
    parser.add_argument("--out", type=Path, default=HERE, help="output directory (default dashboards/)")
    args = parser.parse_args(argv)
    path = args.out / "store-metrics.json"
    text = render(args.prefix)
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"out of date (run python dashboards/generate.py): {path}", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
