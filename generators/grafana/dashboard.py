"""``store-metrics.json``: the Grafana dashboard as JSON (schema 42), from the rows' specs.

Lays the task-side rows out on Grafana's 24-column grid, adds the collapsed Footprint
(``store-metrics inventory``), Triggers (asset watchers) and API server rows, the data source and
filter variables, and what the import dialog needs (``__inputs``, ``__requires``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from store_metrics import catalogue

from .. import promql
from .footprint_row import footprint_row
from .queries import DS, Panel, Row, Target, ref_id
from .rows import DAG_ID, OPERATOR, RUN_TYPE, TASK_ID, TEAM_NAME, build_rows, build_triggers_row
from .server_row import server_row

__all__ = [
    "FILENAME",
    "SCHEMA_VERSION",
    "TITLE",
    "UID",
    "dashboard",
    "footprint_specs",
    "render",
    "server_specs",
    "specs",
    "trigger_specs",
]

FILENAME = "store-metrics.json"
UID = "store-metrics-state-store"
TITLE = "Airflow state store usage (store-metrics)"
SCHEMA_VERSION = 42  # Grafana's current dashboard schema (apps/dashboard/pkg/migration/schemaversion)
GRID_WIDTH = 24
PANEL_NAMES = {"bargauge": "Bar gauge", "stat": "Stat", "table": "Table", "timeseries": "Time series"}


# -- variables --------------------------------------------------------------------------------


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


def _datasource_variable() -> dict[str, Any]:
    return {
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
    }


def templating(prefix: str) -> list[dict[str, Any]]:
    """The data source variable, then the chained filters (team, DAG, task, operator, run type)."""
    return [
        _datasource_variable(),
        _variable(TEAM_NAME, "Team", (), prefix),
        _variable(DAG_ID, "DAG", (TEAM_NAME,), prefix),
        _variable(TASK_ID, "Task", (TEAM_NAME, DAG_ID), prefix),
        _variable(OPERATOR, "Operator", (TEAM_NAME, DAG_ID, TASK_ID), prefix),
        _variable(RUN_TYPE, "Run type", (TEAM_NAME, DAG_ID, TASK_ID), prefix),
    ]


# -- panels -----------------------------------------------------------------------------------


def _reduce() -> dict[str, Any]:
    return {"calcs": ["lastNotNull"], "fields": "", "values": False}


def _timeseries(defaults: dict[str, Any]) -> dict[str, Any]:
    defaults["custom"] = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 10,
        "showPoints": "never",
        "spanNulls": False,
    }
    return {
        "legend": {
            "displayMode": "table",
            "placement": "bottom",
            "showLegend": True,
            "calcs": ["mean", "max"],
        },
        "tooltip": {"mode": "multi", "sort": "desc"},
    }


def _stat(defaults: dict[str, Any]) -> dict[str, Any]:
    defaults["color"] = {"mode": "thresholds"}
    defaults["thresholds"] = {"mode": "absolute", "steps": [{"color": "blue", "value": None}]}
    return {
        "reduceOptions": _reduce(),
        "colorMode": "value",
        "graphMode": "none",
        "justifyMode": "auto",
        "textMode": "auto",
        "orientation": "auto",
    }


def _bargauge(defaults: dict[str, Any]) -> dict[str, Any]:
    defaults["color"] = {"mode": "continuous-BlPu"}
    return {
        "reduceOptions": _reduce(),
        "orientation": "horizontal",
        "displayMode": "gradient",
        "showUnfilled": True,
        "valueMode": "color",
        "namePlacement": "auto",
        "sizing": "auto",
    }


def _table(defaults: dict[str, Any]) -> dict[str, Any]:
    return {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}}


#: Per panel type: set the type's field defaults and return its options.
_OPTIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "timeseries": _timeseries,
    "stat": _stat,
    "bargauge": _bargauge,
    "table": _table,
}


def _table_transformations(panel: Panel) -> list[dict[str, Any]]:
    """Merge a table's queries into one row per group and name each query's column."""
    return [
        {"id": "merge", "options": {}},
        {
            "id": "organize",
            "options": {"excludeByName": {"Time": True}, "renameByName": panel.renames, "indexByName": {}},
        },
    ]


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit, "color": {"mode": "palette-classic"}}
    if panel.decimals is not None:
        defaults["decimals"] = panel.decimals
    if panel.max is not None:
        defaults["min"] = 0
        defaults["max"] = panel.max
    if panel.kind not in _OPTIONS:  # pragma: no cover - guarded by the tests
        raise ValueError(panel.kind)
    options = _OPTIONS[panel.kind](defaults)
    overrides = [
        {"matcher": {"id": "byName", "options": column}, "properties": [{"id": "unit", "value": unit}]}
        for column, unit in panel.column_units.items()
    ]
    result: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DS,
        "gridPos": {"h": panel.h, "w": panel.w, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": overrides},
        "options": options,
        "targets": [t.to_json(ref_id(i)) for i, t in enumerate(panel.targets)],
    }
    if panel.kind == "table":
        result["transformations"] = _table_transformations(panel)
    return result


# -- layout -----------------------------------------------------------------------------------


def _row_json(row: Row, row_id: int, y: int, collapsed: bool, nested: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": row_id,
        "type": "row",
        "title": row.title,
        "collapsed": collapsed,
        "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
        "panels": nested,
    }


def _place(panels: Sequence[Panel], first_id: int, y: int) -> tuple[list[dict[str, Any]], int]:
    """Panels left to right from ``y``, wrapping at the grid's width; and the y below them."""
    placed: list[dict[str, Any]] = []
    x = row_height = 0
    for offset, panel in enumerate(panels):
        if x + panel.w > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        placed.append(_panel_json(panel, first_id + offset, x, y))
        x += panel.w
        row_height = max(row_height, panel.h)
    return placed, y + row_height


def _layout(prefix: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The dashboard's top-level panels, and the panels nested in the collapsed rows."""
    panels: list[dict[str, Any]] = []
    panel_id, y = 1, 0
    for row in build_rows(prefix):
        panels.append(_row_json(row, panel_id, y, collapsed=False, nested=[]))
        placed, y = _place(row.panels, panel_id + 1, y + 1)
        panels += placed
        panel_id += 1 + len(placed)
    # The Footprint, Triggers and API server rows, collapsed: their panels live inside the row and
    # load when it is opened.
    nested: list[dict[str, Any]] = []
    for row in (footprint_row(prefix), build_triggers_row(prefix), server_row(prefix)):
        inside, _ = _place(row.panels, panel_id + 1, y + 1)
        panels.append(_row_json(row, panel_id, y, collapsed=True, nested=inside))
        nested += inside
        panel_id, y = panel_id + 1 + len(inside), y + 1
    return panels, nested


def _requires(kinds: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "11.0.0"},
        {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
        *({"type": "panel", "id": k, "name": PANEL_NAMES[k], "version": ""} for k in kinds),
    ]


def _annotations() -> dict[str, Any]:
    return {
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
    }


def dashboard(prefix: str = catalogue.DEFAULT_PREFIX) -> dict[str, Any]:
    panels, nested = _layout(prefix)
    kinds = sorted({p["type"] for p in [*panels, *nested] if p["type"] != "row"})
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
        "__requires": _requires(kinds),
        "annotations": _annotations(),
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


# -- queries for the tests ------------------------------------------------------------------------


def _targets(rows: Sequence[Row]) -> list[tuple[str, str, Target]]:
    return [
        (panel.title, ref_id(i), target)
        for row in rows
        for panel in row.panels
        for i, target in enumerate(panel.targets)
    ]


def specs(prefix: str = catalogue.DEFAULT_PREFIX) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the task-side rows, in JSON order."""
    return _targets(build_rows(prefix))


def footprint_specs(prefix: str = catalogue.DEFAULT_PREFIX) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the collapsed Footprint row."""
    return _targets([footprint_row(prefix)])


def trigger_specs(prefix: str = catalogue.DEFAULT_PREFIX) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the collapsed Triggers row."""
    return _targets([build_triggers_row(prefix)])


def server_specs(prefix: str = catalogue.DEFAULT_PREFIX) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the collapsed API server row."""
    return _targets([server_row(prefix)])


def render(prefix: str = catalogue.DEFAULT_PREFIX) -> str:
    """``store-metrics.json``."""
    return json.dumps(dashboard(prefix), indent=2) + "\n"
