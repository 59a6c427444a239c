"""``store-metrics.json``: the Grafana dashboard as JSON, from the rows' specs.

Lays the task-side rows out on Grafana's 24-column grid (the Errors row under the Overview), adds
the collapsed Footprint (``store-metrics inventory``), Triggers (asset watchers) and API server rows,
the data source, deployment, job and filter variables, links, and what the import dialog checks
(``__requires``).

Schema 39 and ``__requires`` Grafana 11.0.0: the oldest Grafana the docs support (docs/alerts.md),
the version that writes schema 39 (Grafana 10.4 to 11.2 do; 11.3 writes 40). A newer Grafana
migrates the dashboard on load; an older one would refuse options it does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..dashboard_facts import DOCS, FILTERS, TITLE, UID, WATCHER
from ..render_context import RenderContext, dumps
from . import promql
from .footprint_row import footprint_row
from .queries import DS, Measure, Panel, Row, Target, ref_id
from .rows import build_rows, build_triggers_row
from .server_row import REQUESTS as SERVER_REQUESTS
from .server_row import server_row

__all__ = [
    "FILENAME",
    "SCHEMA_VERSION",
    "dashboard",
    "footprint_specs",
    "render",
    "server_specs",
    "specs",
    "trigger_specs",
]

FILENAME = "store-metrics.json"
SCHEMA_VERSION = 39
OLDEST_GRAFANA = "11.0.0"
GRID_WIDTH = 24
PANEL_NAMES = {"bargauge": "Bar gauge", "stat": "Stat", "table": "Table", "timeseries": "Time series"}
#: The data source variable's saved value: Grafana's "default" option, the instance's default data
#: source when it is a Prometheus (kube-prometheus-stack's sidecar provisions its Prometheus as the
#: default). Grafana offers that option only when the saved value and text are both "default"
#: (public/app/features/dashboard-scene/utils/variables.ts: defaultOptionEnabled; the legacy
#: variables add it too); any other saved value that matches no data source falls to the first
#: Prometheus by name (scenes' MultiValueVariable; DatasourceSrv.getList sorts by name), which is
#: not the default where there are several.
DEFAULT_DS = {"text": "default", "value": "default"}
_TITLES = {
    "team_name": "Team",
    "dag_id": "DAG",
    "task_id": "Task",
    "operator": "Operator",
    "run_type": "Run type",
}


# -- variables --------------------------------------------------------------------------------


def _query_variable(name: str, label: str, selector: str, *, metric: str, **options: Any) -> dict[str, Any]:
    query = f"label_values({metric}{selector}, {label})"
    return {
        "name": name,
        "label": options.pop("title"),
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": query,
        "refresh": 2,
        "regex": "",
        "sort": 1,
        "hide": 0,
        "skipUrlSync": False,
        "options": [],
        "current": {},
        **options,
    }


def _scope_variables(ctx: RenderContext) -> list[dict[str, Any]]:
    """One deployment, and one job per component, never All: two of them carrying the same calls (a
    second cluster, a migration scraped twice) are never added up. Without a cluster label, $cluster
    is empty and matches the series that have none.

    A job per component, as the monitoring mixins keep a selector per component: $job offers the
    jobs that carry DAG tasks' calls, $watcher_job those carrying asset watchers' calls (the Triggers
    row), $server_job those carrying the API server's own series (its row). With one job for all
    (every shipped topology) the three pick that job; with a job per component, each row still has
    its component's data.
    """
    cluster = promql.cluster(ctx)
    in_cluster = f'{cluster}="$cluster"'
    watcher = f'{WATCHER[0]}="{WATCHER[1]}"'
    one: dict[str, Any] = {"multi": False, "includeAll": False, "metric": promql.calls(ctx)}
    requests = ctx.record(SERVER_REQUESTS)
    return [
        _query_variable("cluster", cluster, "", title="Deployment", **one),
        _query_variable("job", "job", f'{{{in_cluster},{WATCHER[0]}!="{WATCHER[1]}"}}', title="Job", **one),
        _query_variable("watcher_job", "job", f"{{{in_cluster},{watcher}}}", title="Watchers' job", **one),
        _query_variable(
            "server_job", "job", f"{{{in_cluster}}}", **{**one, "metric": requests}, title="API server job"
        ),
    ]


def _filter_variable(ctx: RenderContext, label: str, previous: Sequence[str]) -> dict[str, Any]:
    matchers = [f'{promql.cluster(ctx)}="$cluster"', 'job="$job"', *(f'{f}=~"${f}"' for f in previous)]
    selector = "{" + ",".join(matchers) + "}"
    return _query_variable(
        label,
        label,
        selector,
        metric=promql.calls(ctx),
        title=_TITLES[label],
        multi=True,
        includeAll=True,
        allValue=".*",
    )


def _datasource_variable() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        # The instance's default Prometheus, whether a sidecar loads the dashboard or someone
        # imports it by hand; pick another one in the dashboard's Data source list.
        "current": {"selected": True, **DEFAULT_DS},
        "regex": "",
        "refresh": 1,
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "skipUrlSync": False,
    }


def templating(ctx: RenderContext) -> list[dict[str, Any]]:
    """The data source, the deployment and job, then the chained filters (team, DAG, task, ...)."""
    return [
        _datasource_variable(),
        *_scope_variables(ctx),
        *(_filter_variable(ctx, label, FILTERS[:i]) for i, label in enumerate(FILTERS)),
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
    defaults.setdefault("thresholds", {"mode": "absolute", "steps": [{"color": "blue", "value": None}]})
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


def _threshold(ctx: RenderContext, panel: Panel, defaults: dict[str, Any]) -> None:
    """Red from the alert's threshold (an export setting) up: a dashed line on a time series."""
    if panel.threshold is None:
        return
    base = "green" if panel.kind == "stat" else "transparent"
    steps = [{"color": base, "value": None}, {"color": "red", "value": ctx.number(panel.threshold)}]
    defaults["thresholds"] = {"mode": "absolute", "steps": steps}
    if panel.kind == "timeseries":
        defaults.setdefault("custom", {})["thresholdsStyle"] = {"mode": "dashed"}


def _links(panel: Panel) -> list[dict[str, Any]]:
    """A table row's link: this dashboard, same time range, deployment and job, filtered to its labels."""
    if not panel.link_labels:
        return []
    filters = "".join(f"&var-{label}=${{__data.fields.{label}}}" for label in panel.link_labels)
    url = f"/d/{UID}/store-metrics?${{__url_time_range}}&${{cluster:queryparam}}&${{job:queryparam}}{filters}"
    return [{"title": f"Filter the dashboard to this {' and '.join(panel.link_labels)}", "url": url}]


def _panel_json(ctx: RenderContext, panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit, "color": {"mode": "palette-classic"}}
    if panel.decimals is not None:
        defaults["decimals"] = panel.decimals
    if panel.max is not None:
        defaults["min"] = 0
        defaults["max"] = panel.max
    if links := _links(panel):
        defaults["links"] = links
    if panel.kind not in _OPTIONS:  # pragma: no cover - guarded by the tests
        raise ValueError(panel.kind)
    options = _OPTIONS[panel.kind](defaults)
    _threshold(ctx, panel, defaults)
    overrides = [
        {"matcher": {"id": "byName", "options": column}, "properties": [{"id": "unit", "value": unit}]}
        for column, unit in panel.column_units.items()
    ]
    targets = [t.to_json(ref_id(i), ctx) for i, t in enumerate(panel.targets)]
    if panel.exemplars is not None:
        targets.append(_exemplar_target(panel.exemplars, ref_id(len(targets))))
        overrides.append(_hidden(ref_id(len(targets) - 1)))
    result: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DS,
        "gridPos": {"h": panel.h, "w": panel.w, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": overrides},
        "options": options,
        "targets": targets,
    }
    if panel.kind == "table":
        result["transformations"] = _table_transformations(panel)
    return result


def _exemplar_target(measure: Measure, ref: str) -> dict[str, Any]:
    """The query that brings a panel its exemplars: the raw counters of ``measure`` (recorded series
    carry none), ``exemplar`` on; Grafana asks Prometheus' ``query_exemplars`` with its expression
    and marks each exemplar on the panel, linked to its trace by the data source's
    ``exemplarTraceIdDestinations`` (dashboards/provisioning/datasources/store-metrics.yml)."""
    return {
        "datasource": DS,
        "refId": ref,
        "expr": measure.raw_expr(),
        "legendFormat": "traces",
        "range": True,
        "instant": False,
        "editorMode": "code",
        "exemplar": True,
    }


def _hidden(ref: str) -> dict[str, Any]:
    """An override that hides query ``ref``'s own lines (legend, tooltip and graph), not its exemplars."""
    hide = {"legend": True, "tooltip": True, "viz": True}
    return {
        "matcher": {"id": "byFrameRefID", "options": ref},
        "properties": [{"id": "custom.hideFrom", "value": hide}],
    }


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


def _place(
    ctx: RenderContext, panels: Sequence[Panel], first_id: int, y: int
) -> tuple[list[dict[str, Any]], int]:
    """Panels left to right from ``y``, wrapping at the grid's width; and the y below them."""
    placed: list[dict[str, Any]] = []
    x = row_height = 0
    for offset, panel in enumerate(panels):
        if x + panel.w > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        placed.append(_panel_json(ctx, panel, first_id + offset, x, y))
        x += panel.w
        row_height = max(row_height, panel.h)
    return placed, y + row_height


def _layout(ctx: RenderContext) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The dashboard's top-level panels, and the panels nested in the collapsed rows."""
    panels: list[dict[str, Any]] = []
    panel_id, y = 1, 0
    for row in build_rows(ctx):
        panels.append(_row_json(row, panel_id, y, collapsed=False, nested=[]))
        placed, y = _place(ctx, row.panels, panel_id + 1, y + 1)
        panels += placed
        panel_id += 1 + len(placed)
    # The Footprint, Triggers and API server rows, collapsed: their panels live inside the row and
    # load when it is opened.
    nested: list[dict[str, Any]] = []
    for row in (footprint_row(ctx), build_triggers_row(ctx), server_row(ctx)):
        inside, _ = _place(ctx, row.panels, panel_id + 1, y + 1)
        panels.append(_row_json(row, panel_id, y, collapsed=True, nested=inside))
        nested += inside
        panel_id, y = panel_id + 1 + len(inside), y + 1
    return panels, nested


def _requires(kinds: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"type": "grafana", "id": "grafana", "name": "Grafana", "version": OLDEST_GRAFANA},
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


def _dashboard_links() -> list[dict[str, Any]]:
    return [
        {
            "title": "Alerts, settings and runbooks",
            "type": "link",
            "url": DOCS,
            "icon": "doc",
            "targetBlank": True,
            "tooltip": "store-metrics: what each panel and alert means, and what to do",
        }
    ]


def dashboard(ctx: RenderContext) -> dict[str, Any]:
    """The dashboard's JSON document for the export's prefix and settings."""
    panels, nested = _layout(ctx)
    kinds = sorted({p["type"] for p in [*panels, *nested] if p["type"] != "row"})
    return {
        "__elements": {},
        "__requires": _requires(kinds),
        "annotations": _annotations(),
        "description": "Per-DAG usage of Airflow's task and asset state stores, from the recorded calls "
        "of store-metrics' rules (rules.yml). Panels, alerts and settings: " + DOCS,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": _dashboard_links(),
        "panels": panels,
        "refresh": ctx.setting("dashboard_refresh"),
        "schemaVersion": SCHEMA_VERSION,
        "tags": ["airflow", "store-metrics", "state-store"],
        "templating": {"list": templating(ctx)},
        "time": {"from": ctx.setting("dashboard_from"), "to": "now"},
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


def specs(ctx: RenderContext) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the task-side rows, in JSON order."""
    return _targets(build_rows(ctx))


def footprint_specs(ctx: RenderContext) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the collapsed Footprint row."""
    return _targets([footprint_row(ctx)])


def trigger_specs(ctx: RenderContext) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the collapsed Triggers row."""
    return _targets([build_triggers_row(ctx)])


def server_specs(ctx: RenderContext) -> list[tuple[str, str, Target]]:
    """(panel title, refId, target) for every query of the collapsed API server row."""
    return _targets([server_row(ctx)])


def render(ctx: RenderContext) -> str:
    """``store-metrics.json`` for the export's prefix and settings."""
    return dumps(dashboard(ctx))
