"""``datadog/dashboard.json``: the Datadog dashboard over the DogStatsD series.

The same questions as the Grafana dashboard, in groups: an overview of the selected range, errors,
calls by store, DAG and operation, reads per write and found ratios, whether retries resumed (the
retry counters, per retried attempt), top DAGs and tasks, deletes and clears, breakdowns by
operator, run type and team, and the asset watchers' calls in the triggerer. Template variables
filter every query by environment (the export setting ``datadog_env_tag``, ``env`` by default:
environments never mix), ``team_name``, ``dag_id``, ``task_id``, ``operator`` and ``run_type``;
widgets grouped by DAG leave the asset watchers out.

The JSON is the body of ``POST /api/v1/dashboard`` (ordered layout, automatic reflow: no widget
positions) and what the UI's "Import dashboard JSON" takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store

from ..dashboard_facts import (
    ALL_OUTCOMES,
    BOTH,
    DAG_ID,
    DOCS,
    FILTERS,
    OPERATION,
    OPERATOR,
    READS,
    RUN_TYPE,
    TABLE_BY,
    TASK_ID,
    TEAM_NAME,
    TITLE,
    WATCHER,
    WATCHER_NOTE,
    store_word,
)
from ..render_context import RenderContext, dumps
from .queries import (
    ALL_CALLS,
    ENV,
    ERRORS,
    OTHER_CALLS,
    READ_CALLS,
    RESUMED,
    RETRIED,
    STARTED_OVER,
    WRITES,
    Formula,
    counter_of,
    request,
    terms,
)

__all__ = ["FILENAME", "dashboard", "render"]

FILENAME = "dashboard.json"
#: The Triggers group's own tag: the calls asset-watcher triggers make in the triggerer.
WATCHERS: tuple[tuple[str, str], ...] = (WATCHER,)
RANGE_NOTE = " Counted over the dashboard's time frame."
COUNTS_NOTE = " Calls per rollup interval (DogStatsD counters as_count())."
_WATCHER_NOTE = WATCHER_NOTE
#: Said by the widgets grouped by DAG (their queries leave the asset watchers out).
_BY_DAG_NOTE = (
    f" Asset watchers' calls (run_type:{catalogue.RUN_TYPE_ASSET_WATCHER}, `dag_id:"
    f"{catalogue.DAG_ID_NONE}`) are left out: they belong to no DAG (the Triggers group has them)."
)


def _found(store: Store) -> Formula:
    return Formula(
        terms((store,), (Outcome.READ_FOUND,)), f"{store_word(store)} store found", terms((store,), READS)
    )


REMOVALS = [(s, o) for s in BOTH for o in (Outcome.DELETE, Outcome.CLEAR)]


# -- widgets ------------------------------------------------------------------------------------


def _widget(definition: dict[str, Any]) -> dict[str, Any]:
    return {"definition": definition}


def _timeseries(
    title: str,
    description: str,
    formulas: Sequence[Formula],
    ctx: RenderContext,
    by: Sequence[str] = (),
    *,
    bars: bool = True,
    only: Sequence[tuple[str, str]] = (),
    marker: str | None = None,
) -> dict[str, Any]:
    req = request(formulas, ctx, by, only=only)
    req["display_type"] = "bars" if bars else "line"
    definition: dict[str, Any] = {
        "type": "timeseries",
        "title": title,
        "description": description,
        "show_legend": True,
        "legend_layout": "auto",
        "legend_columns": ["avg", "max", "value"],
        "requests": [req],
    }
    if marker is not None:  # a line at an alert's threshold (an export setting)
        definition["markers"] = [
            {"label": "alert", "value": f"y = {ctx.setting(marker)}", "display_type": "error dashed"}
        ]
    return _widget(definition)


def _value(
    title: str,
    description: str,
    formula: Formula,
    ctx: RenderContext,
    precision: int,
    *,
    alert_above: str | None = None,
) -> dict[str, Any]:
    req = request([formula], ctx, scalar=True)
    if alert_above is not None:
        req["conditional_formats"] = [
            {"comparator": ">", "value": ctx.number(alert_above), "palette": "white_on_red"},
            {"comparator": "<=", "value": ctx.number(alert_above), "palette": "white_on_green"},
        ]
    return _widget(
        {
            "type": "query_value",
            "title": title,
            "description": description,
            "autoscale": True,
            "precision": precision,
            "requests": [req],
        }
    )


def _toplist(
    title: str,
    description: str,
    formula: Formula,
    ctx: RenderContext,
    by: Sequence[str],
    *,
    only: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    return _widget(
        {
            "type": "toplist",
            "title": title,
            "description": description,
            "requests": [request([formula], ctx, by, scalar=True, only=only)],
        }
    )


def _table(
    title: str, description: str, formulas: Sequence[Formula], ctx: RenderContext, by: Sequence[str]
) -> dict[str, Any]:
    return _widget(
        {
            "type": "query_table",
            "title": title,
            "description": description,
            "has_search_bar": "auto",
            "requests": [request(formulas, ctx, by, scalar=True)],
        }
    )


def _group(title: str, widgets: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return _widget(
        {
            "type": "group",
            "title": title,
            "show_title": True,
            "layout_type": "ordered",
            "widgets": list(widgets),
        }
    )


def _outcome_formulas(stores: Sequence[Store]) -> list[Formula]:
    """One formula per outcome, the stores' counters summed; a counter the catalogue records with the
    calls under an outcome of its own gets its line too, after them."""
    tags = {store.tag for store in stores}
    others: dict[str, list[catalogue.Metric]] = {}
    for metric in map(counter_of, OTHER_CALLS):
        labels = dict(metric.recording.labels) if metric.recording else {}
        if labels.get(catalogue.STORE) in tags:
            others.setdefault(labels.get(catalogue.OUTCOME, metric.name), []).append(metric)
    return [Formula(terms(stores, (o,)), o.value) for o in ALL_OUTCOMES] + [
        Formula(tuple(metrics), outcome) for outcome, metrics in others.items()
    ]


# -- groups -------------------------------------------------------------------------------------


def _overview(ctx: RenderContext) -> dict[str, Any]:
    calls = Formula(ALL_CALLS, "calls")
    return _group(
        "Overview (selected time frame)",
        [
            _value(
                "State store calls",
                "Every state store call: reads, writes, deletes, clears, and calls that raised." + RANGE_NOTE,
                calls,
                ctx,
                0,
            ),
            _value(
                "Reads per write",
                "Task and asset store reads (found + absent) per write." + RANGE_NOTE,
                Formula(READ_CALLS, "reads per write", WRITES),
                ctx,
                2,
            ),
            _value(
                "Task store found ratio",
                "read_found / (read_found + read_absent) of the task store: how often a task's get() "
                "found state saved by an earlier attempt of the same run, i.e. a retry that could "
                "resume." + RANGE_NOTE,
                _found(Store.TASK),
                ctx,
                2,
            ),
            _value(
                "Asset store found ratio",
                "read_found / (read_found + read_absent) of the asset store: how often a watermark "
                "read found a value." + RANGE_NOTE,
                _found(Store.ASSET),
                ctx,
                2,
            ),
            _value(
                "Deletes and clears",
                "delete and clear calls, task and asset stores." + RANGE_NOTE,
                Formula(tuple(REMOVALS), "deletes and clears"),
                ctx,
                0,
            ),
            _value(
                "Error ratio",
                "Calls that raised / all calls. Red above the monitors' threshold (export setting "
                "error_ratio)." + RANGE_NOTE,
                Formula(ERRORS, "error ratio", ALL_CALLS),
                ctx,
                4,
                alert_above="error_ratio",
            ),
        ],
    )


def _calls(ctx: RenderContext) -> dict[str, Any]:
    return _group(
        "Calls by store, DAG and operation",
        [
            _timeseries(
                "Task store calls by operation",
                "task_state_store calls, one bar per outcome." + COUNTS_NOTE,
                _outcome_formulas((Store.TASK,)),
                ctx,
            ),
            _timeseries(
                "Asset store calls by operation",
                "asset_state_store calls, one bar per outcome." + COUNTS_NOTE,
                _outcome_formulas((Store.ASSET,)),
                ctx,
            ),
            _timeseries(
                "Calls by DAG and operation",
                "State store calls (task + asset store) per DAG and outcome." + COUNTS_NOTE + _BY_DAG_NOTE,
                _outcome_formulas(BOTH),
                ctx,
                (DAG_ID,),
            ),
        ],
    )


def _ratios(ctx: RenderContext) -> dict[str, Any]:
    return _group(
        "Read/write and found ratios",
        [
            _timeseries(
                "Reads per write by DAG",
                "Reads (found + absent) per write, both stores, where the DAG wrote in the interval."
                + _BY_DAG_NOTE,
                [Formula(READ_CALLS, "reads per write", WRITES)],
                ctx,
                (DAG_ID,),
                bars=False,
            ),
            _timeseries(
                "Found ratio by DAG",
                "read_found / (read_found + read_absent) per DAG and store, where the DAG read in the "
                "interval." + _BY_DAG_NOTE,
                [_found(Store.TASK), _found(Store.ASSET)],
                ctx,
                (DAG_ID,),
                bars=False,
            ),
            _table(
                "Found ratio by DAG (selected range)",
                "read_found / (read_found + read_absent) per DAG and store." + RANGE_NOTE + _BY_DAG_NOTE,
                [_found(Store.TASK), _found(Store.ASSET)],
                ctx,
                (DAG_ID,),
            ),
        ],
    )


#: Said by every widget of the Retries group: what one count is.
_RETRY_NOTE = (
    " One count per retried attempt (try 2 and later; each map index its own) that read its task "
    "store, decided at its first read: resumed when it found a value, started over when it found "
    "nothing."
)


def _retries(ctx: RenderContext) -> dict[str, Any]:
    rate = Formula(RESUMED, "resume rate", RETRIED)
    return _group(
        "Retries: did they resume?",
        [
            _value(
                "Retry resume rate",
                "retry_resumed / (retry_resumed + retry_not_resumed): the share of retried attempts "
                "whose first task store read found what an earlier attempt saved." + _RETRY_NOTE + RANGE_NOTE,
                rate,
                ctx,
                2,
            ),
            _timeseries(
                "Retried attempts: resumed and started over",
                "Retried attempts per rollup interval, resumed (retry_resumed) and started over "
                "(retry_not_resumed)." + _RETRY_NOTE + _BY_DAG_NOTE,
                [Formula(RESUMED, "resumed"), Formula(STARTED_OVER, "started over")],
                ctx,
                (DAG_ID,),
            ),
            _table(
                "Resume rate by DAG and task (selected range)",
                "Per DAG and task: retried attempts that resumed, that started over, and the resume "
                "rate. A task whose retries keep starting over although it saves state: monitor "
                "state-store-retries-start-over.json (runbook StateStoreRetriesStartOver)."
                + _RETRY_NOTE
                + RANGE_NOTE
                + _BY_DAG_NOTE,
                [
                    Formula(RESUMED, "resumed", limit=(500, "desc")),
                    Formula(STARTED_OVER, "started over"),
                    rate,
                ],
                ctx,
                (DAG_ID, TASK_ID),
            ),
        ],
    )


def _top(ctx: RenderContext) -> dict[str, Any]:
    return _group(
        "Top DAGs and tasks",
        [
            _toplist(
                "Top DAGs by calls",
                "The 10 DAGs with the most state store calls." + RANGE_NOTE + _BY_DAG_NOTE,
                Formula(ALL_CALLS, "calls", limit=(10, "desc")),
                ctx,
                (DAG_ID,),
            ),
            _table(
                "Calls by DAG and task",
                "State store calls per DAG, task, operator and run type, by kind of call."
                + RANGE_NOTE
                + _BY_DAG_NOTE,
                [
                    Formula(READ_CALLS, "reads", limit=(500, "desc")),
                    Formula(WRITES, "writes"),
                    Formula(terms(BOTH, (Outcome.DELETE,)), "deletes"),
                    Formula(terms(BOTH, (Outcome.CLEAR,)), "clears"),
                    Formula(ERRORS, "errors"),
                    *([Formula(OTHER_CALLS, "other calls")] if OTHER_CALLS else []),
                ],
                ctx,
                TABLE_BY,
            ),
        ],
    )


def _removals(ctx: RenderContext) -> dict[str, Any]:
    formulas = [Formula(((s, o),), f"{store_word(s)} {o.value}") for s, o in REMOVALS]
    return _group(
        "Delete and clear usage",
        [
            _timeseries(
                "Deletes and clears by DAG",
                "delete and clear calls per DAG and store." + COUNTS_NOTE + _BY_DAG_NOTE,
                formulas,
                ctx,
                (DAG_ID,),
            ),
            _table(
                "Deletes and clears by DAG and task",
                "delete and clear calls per DAG and task, by store." + RANGE_NOTE + _BY_DAG_NOTE,
                formulas,
                ctx,
                (DAG_ID, TASK_ID),
            ),
        ],
    )


def _breakdowns(ctx: RenderContext) -> dict[str, Any]:
    calls = Formula(ALL_CALLS, "calls", limit=(25, "desc"))
    return _group(
        "Breakdowns",
        [
            _toplist(
                "Calls by operator",
                "State store calls per operator class. Operators call the store at very different "
                "grains (one call per step vs one per task), so compare usage, not volume." + RANGE_NOTE,
                calls,
                ctx,
                (OPERATOR,),
            ),
            _toplist(
                "Calls by run type",
                "State store calls per run type: the DAG run's (manual, scheduled, backfill, "
                "asset_triggered), or asset_watcher for the calls asset-watcher triggers make in the "
                "triggerer." + RANGE_NOTE,
                calls,
                ctx,
                (RUN_TYPE,),
            ),
            _toplist(
                "Calls by team",
                "State store calls per team (multi-team deployments; calls without a team have no "
                "team_name tag)." + RANGE_NOTE,
                calls,
                ctx,
                (TEAM_NAME,),
            ),
        ],
    )


def _errors(ctx: RenderContext) -> dict[str, Any]:
    per_store = [Formula(((s, Outcome.ERROR),), f"{store_word(s)} store errors") for s in BOTH]
    return _group(
        "Errors",
        [
            _timeseries(
                "Errors by store and method",
                "Calls that raised, by store and the method that raised (get, set, delete, clear)."
                + COUNTS_NOTE,
                per_store,
                ctx,
                (OPERATION,),
            ),
            _timeseries(
                "Error ratio by DAG",
                "Calls that raised / all calls, per DAG, where the DAG made calls in the interval. The "
                "line is the monitor's threshold (over its own window)." + _BY_DAG_NOTE,
                [Formula(ERRORS, "error ratio", ALL_CALLS)],
                ctx,
                (DAG_ID,),
                bars=False,
                marker="error_ratio",
            ),
            _table(
                "Errors by DAG, task and method",
                "Calls that raised per DAG, task and method, by store." + RANGE_NOTE + _BY_DAG_NOTE,
                per_store,
                ctx,
                (DAG_ID, TASK_ID, OPERATION),
            ),
        ],
    )


def _triggers(ctx: RenderContext) -> dict[str, Any]:
    return _group(
        "Triggers: asset watchers in the triggerer (run_type asset_watcher)",
        [
            _timeseries(
                "Asset watcher calls by trigger",
                "State store calls of asset-watcher triggers, per trigger class."
                + _WATCHER_NOTE
                + COUNTS_NOTE,
                [Formula(ALL_CALLS, "calls")],
                ctx,
                (OPERATOR,),
                only=WATCHERS,
            ),
            _timeseries(
                "Asset watcher calls by operation",
                "Asset store calls of asset-watcher triggers, one bar per outcome: watermark reads that "
                "found a value or not, writes, deletes, clears, calls that raised."
                + _WATCHER_NOTE
                + COUNTS_NOTE,
                _outcome_formulas((Store.ASSET,)),
                ctx,
                only=WATCHERS,
            ),
            _toplist(
                "Asset watcher calls by trigger and asset",
                "State store calls of asset-watcher triggers per trigger class and watched asset."
                + _WATCHER_NOTE
                + RANGE_NOTE,
                Formula(ALL_CALLS, "calls", limit=(25, "desc")),
                ctx,
                (OPERATOR, TASK_ID),
                only=WATCHERS,
            ),
            _timeseries(
                "Asset watcher found ratio by trigger and asset",
                "read_found / (read_found + read_absent) of asset-watcher triggers' asset store reads, "
                "per trigger class and watched asset: how often a watcher found the watermark it "
                "keeps. 0 for long: it never finds it and starts over at every poll." + _WATCHER_NOTE,
                [_found(Store.ASSET)],
                ctx,
                (OPERATOR, TASK_ID),
                bars=False,
                only=WATCHERS,
            ),
            _timeseries(
                "Asset watcher errors by trigger and method",
                "State store calls of asset-watcher triggers that raised, by trigger class and the "
                "method that raised (get, set, delete, clear); monitor "
                "state-store-watcher-error-ratio.json alerts above the export setting error_ratio."
                + _WATCHER_NOTE
                + COUNTS_NOTE,
                [Formula(ERRORS, "errors")],
                ctx,
                (OPERATOR, OPERATION),
                only=WATCHERS,
            ),
        ],
    )


def _note(ctx: RenderContext) -> dict[str, Any]:
    example = ctx.full_name(catalogue.get("task_state_store.write"))
    return _widget(
        {
            "type": "note",
            "content": (
                "**Airflow state store usage**, from the store-metrics plugin's DogStatsD counters "
                f"(`{example}` and its siblings), sent by `[store_metrics] backend = dogstatsd` to "
                "the Datadog Agent. Every call of a task's `task_state_store` or `asset_state_store` "
                "counts once, by outcome; tags dag_id, task_id, run_type, operator (and team_name), "
                "never a key. The template variables filter every widget."
            ),
            "background_color": "white",
            "font_size": "14",
            "text_align": "left",
            "show_tick": False,
            "has_padding": True,
        }
    )


def _template_variables(ctx: RenderContext) -> list[dict[str, Any]]:
    env = {"name": ENV, "prefix": ctx.setting("datadog_env_tag"), "available_values": [], "defaults": ["*"]}
    return [
        env,
        *({"name": tag, "prefix": tag, "available_values": [], "defaults": ["*"]} for tag in FILTERS),
    ]


def dashboard(ctx: RenderContext) -> dict[str, Any]:
    """The dashboard definition (the body of ``POST /api/v1/dashboard``)."""
    return {
        "title": TITLE,
        "description": "Per-DAG usage of Airflow's task and asset state stores, from the store-metrics "
        "DogStatsD counters. Monitors, settings and runbooks: " + DOCS,
        "layout_type": "ordered",
        "reflow_type": "auto",
        "template_variables": _template_variables(ctx),
        "widgets": [
            _note(ctx),
            _overview(ctx),
            _errors(ctx),
            _calls(ctx),
            _ratios(ctx),
            _retries(ctx),
            _top(ctx),
            _removals(ctx),
            _breakdowns(ctx),
            _triggers(ctx),
        ],
    }


def render(ctx: RenderContext) -> str:
    """``datadog/dashboard.json`` for the export's prefix and settings."""
    return dumps(dashboard(ctx))
