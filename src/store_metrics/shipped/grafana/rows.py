"""The task side's dashboard rows, one builder per row, all filtered by the dashboard's variables.

Each builder takes a ``Queries`` (the query specs over the recorded calls) and returns its
``Row``; ``build_rows`` lists them in dashboard order (the Errors row right
under the Overview).

Asset watchers' calls (``run_type="asset_watcher"``, ``dag_id="<none>"``) belong to no DAG: every
query grouped by ``dag_id`` leaves them out (``Queries.m``) and its panel's description says
so; the collapsed Triggers row shows them by trigger class and watched asset. Panels that do not
group by DAG (totals, by operation, operator, run type, team) count them with the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store

from ..dashboard_facts import (
    ALL_OUTCOMES,
    BOTH,
    DAG_ID,
    OPERATION,
    OPERATOR,
    READS,
    RUN_TYPE,
    TABLE_BY,
    TASK_ID,
    TEAM_NAME,
    WATCHER,
    WATCHER_NOTE,
    store_word,
)
from ..render_context import RenderContext
from . import promql
from .queries import FILTER_MATCHERS, Measure, Panel, Ratio, Retries, Row, Spec, Target, TopK, ref_id

__all__ = [
    "NO_WATCHERS_NOTE",
    "ROW_BUILDERS",
    "TRIGGERS_ROW_TITLE",
    "WATCHERS",
    "Queries",
    "build_rows",
    "build_triggers_row",
    "triggers_row",
]

#: Every state store call: both stores, every outcome (errors included).
EVERYTHING = (BOTH, ALL_OUTCOMES)
RANGE_NOTE = (
    " Counted over the dashboard's time range from the recorded calls (rules.yml): exact, a DAG's "
    "first run included."
)
#: The Triggers row keeps to the asset watchers' calls; the per-DAG queries leave them out.
WATCHERS: tuple[tuple[str, str], ...] = (WATCHER,)
#: Said by every panel whose queries group by DAG.
NO_WATCHERS_NOTE = (
    f" Asset watchers' calls (run_type {catalogue.RUN_TYPE_ASSET_WATCHER}, "
    f"dag_id `{catalogue.DAG_ID_NONE}`) are left out: they belong to no DAG (the Triggers row shows them)."
)
#: Said on a panel that shows exemplars.
EXEMPLARS_NOTE = (
    " With traces on, a marker is a call's exemplar: click it to open that call's trace (the data "
    "source's trace links; see Traces in the docs). The markers come from the raw counters, not a "
    "recording rule: recorded series carry no exemplars."
)


@dataclass(frozen=True)
class Queries:
    """The query specs of the task-side rows, rendered for ``ctx``."""

    ctx: RenderContext

    def m(
        self,
        kind: str,
        stores: Sequence[Store],
        outcomes: Sequence[Outcome],
        by: Sequence[str] = (),
        only: Sequence[tuple[str, str]] = (),
    ) -> Measure:
        """Calls of ``stores`` x ``outcomes``: in the range (``count``) or per second (``rate``).

        Grouped by ``dag_id`` (and not restricted by ``only``), the asset watchers' calls are left
        out: they would all show up as one DAG called ``none``.
        """
        exclude = WATCHERS if DAG_ID in by and not only else ()
        return Measure(kind, tuple(stores), tuple(outcomes), tuple(by), tuple(only), exclude, ctx=self.ctx)

    def everything(self, kind: str, by: Sequence[str] = (), only: Sequence[tuple[str, str]] = ()) -> Measure:
        return self.m(kind, *EVERYTHING, by, only)

    def found(self, kind: str, store: Store, by: Sequence[str] = ()) -> Ratio:
        """read_found / (read_found + read_absent) of one store."""
        return Ratio(self.m(kind, (store,), (Outcome.READ_FOUND,), by), self.m(kind, (store,), READS, by))

    def reads_per_write(self, kind: str, by: Sequence[str] = ()) -> Ratio:
        return Ratio(self.m(kind, BOTH, READS, by), self.m(kind, BOTH, (Outcome.WRITE,), by))

    def error_ratio(self, kind: str, by: Sequence[str] = ()) -> Ratio:
        return Ratio(self.m(kind, BOTH, (Outcome.ERROR,), by), self.everything(kind, by))


# -- panel shapes the rows share ---------------------------------------------------------------

#: A ratio's scale: 0 to 1, shown as a percentage.
_PERCENT: dict[str, Any] = {"unit": "percentunit", "max": 1}


def _stat(title: str, description: str, spec: Spec, legend: str, **options: Any) -> Panel:
    """One of the Overview row's stat panels: one value over the selected range."""
    return Panel(
        "stat", title, description + RANGE_NOTE, [Target(spec, legend, instant=True)], w=4, h=5, **options
    )


def _ops(title: str, description: str, targets: list[Target], **layout: Any) -> Panel:
    """A time series of calls per second."""
    return Panel("timeseries", title, description, targets, unit="ops", **layout)


def _ratio_series(title: str, description: str, targets: list[Target], threshold: str | None = None) -> Panel:
    """A time series of a ratio (0 to 1), with a line at an alert's ``threshold`` if any."""
    return Panel("timeseries", title, description, targets, threshold=threshold, **_PERCENT)


def _table(title: str, description: str, columns: Sequence[tuple[Measure, str]], **layout: Any) -> Panel:
    """A table over the selected range: one query per ``(measure, column name)``; each row links to
    the dashboard filtered to its DAG and task."""
    labels = [label for label in (DAG_ID, TASK_ID) if label in columns[0][0].by]
    return Panel(
        "table",
        title,
        description + " Click a row to filter the dashboard to it.",
        [Target(measure, instant=True, table=True) for measure, _ in columns],
        decimals=0,
        renames={f"Value #{ref_id(i)}": name for i, (_, name) in enumerate(columns)},
        link_labels=labels,
        **layout,
    )


def _calls_by(q: Queries, label: str, title: str, description: str) -> Panel:
    """A bar per ``label`` value: every call in the selected range."""
    return Panel(
        "bargauge",
        title,
        description + RANGE_NOTE,
        [Target(q.everything("count", (label,)), f"{{{{{label}}}}}", instant=True)],
        decimals=0,
    )


def _per_outcome(q: Queries, store: Store, only: Sequence[tuple[str, str]] = ()) -> list[Target]:
    """Calls per second of one store, one line per outcome."""
    return [Target(q.m("rate", (store,), (o,), (), only), o.value) for o in ALL_OUTCOMES]


def _found_by_dag(q: Queries, kind: str) -> list[Target]:
    """The found ratio per DAG, one query per store (instant over the range for ``count``)."""
    return [
        Target(q.found(kind, s, (DAG_ID,)), f"{{{{dag_id}}}} {store_word(s)} store", instant=kind == "count")
        for s in BOTH
    ]


# -- rows -------------------------------------------------------------------------------------


def overview_row(q: Queries) -> Row:
    """Stat panels over the selected range: calls, ratios, deletes and clears, errors."""
    return Row(
        "Overview (selected time range)",
        [
            _stat(
                "State store calls",
                "Every state store call in the range: reads, writes, deletes, clears, and calls that raised.",
                q.everything("count"),
                "calls",
                decimals=0,
            ),
            _stat(
                "Reads per write",
                "Task and asset store reads (found + absent) per write.",
                q.reads_per_write("count"),
                "reads per write",
                unit="none",
                decimals=2,
            ),
            _stat(
                "Task store found ratio",
                "read_found / (read_found + read_absent) of the "
                "task store: how often a task's get() found state saved by an earlier attempt of the "
                "same run, i.e. a retry that could resume.",
                q.found("count", Store.TASK),
                "found",
                **_PERCENT,
            ),
            _stat(
                "Asset store found ratio",
                "read_found / (read_found + read_absent) of the "
                "asset store: how often a watermark read found a value.",
                q.found("count", Store.ASSET),
                "found",
                **_PERCENT,
            ),
            _stat(
                "Deletes and clears",
                "delete and clear calls, task and asset stores.",
                q.m("count", BOTH, (Outcome.DELETE, Outcome.CLEAR)),
                "deletes + clears",
                decimals=0,
            ),
            _stat(
                "Error ratio",
                "Calls that raised / all calls. Red above the alert threshold (export setting "
                "error_ratio, StateStoreErrorRateHigh).",
                q.error_ratio("count"),
                "errors",
                threshold="error_ratio",
                **_PERCENT,
            ),
        ],
    )


def calls_per_second_row(q: Queries) -> Row:
    """Calls per second by store and outcome, and by DAG."""
    return Row(
        "Calls per second",
        [
            _ops(
                "Task store calls per second by operation",
                "task_state_store calls per second, one line per outcome.",
                _per_outcome(q, Store.TASK),
            ),
            _ops(
                "Asset store calls per second by operation",
                "asset_state_store calls per second, one line per outcome.",
                _per_outcome(q, Store.ASSET),
            ),
            _ops(
                "Calls per second by DAG",
                "All state store calls per second, per DAG." + NO_WATCHERS_NOTE + EXEMPLARS_NOTE,
                [Target(q.everything("rate", (DAG_ID,)), "{{dag_id}}")],
                exemplars=q.everything("rate", (DAG_ID,)),
            ),
        ],
    )


def ratios_row(q: Queries) -> Row:
    """Reads per write and found ratios by DAG, over time and over the selected range."""
    return Row(
        "Read/write and found ratios",
        [
            Panel(
                "timeseries",
                "Reads per write by DAG",
                "Reads (found + absent) per write, both stores, where the DAG wrote in the interval."
                + NO_WATCHERS_NOTE,
                [Target(q.reads_per_write("rate", (DAG_ID,)), "{{dag_id}}")],
                unit="none",
            ),
            _ratio_series(
                "Found ratio by DAG",
                "read_found / (read_found + read_absent) per DAG "
                "and store, where the DAG read in the interval." + NO_WATCHERS_NOTE,
                _found_by_dag(q, "rate"),
            ),
            Panel(
                "bargauge",
                "Found ratio by DAG (selected range)",
                "read_found / (read_found + read_absent) per DAG and store." + RANGE_NOTE + NO_WATCHERS_NOTE,
                _found_by_dag(q, "count"),
                **_PERCENT,
            ),
        ],
    )


def top_row(q: Queries) -> Row:
    """The busiest DAGs, and calls by DAG and task by kind of call."""
    return Row(
        "Top DAGs and tasks",
        [
            Panel(
                "bargauge",
                "Top DAGs by calls",
                "The 10 DAGs with the most state store calls." + RANGE_NOTE + NO_WATCHERS_NOTE,
                [Target(TopK(10, q.everything("count", (DAG_ID,))), "{{dag_id}}", instant=True)],
                w=8,
                h=10,
                decimals=0,
            ),
            _table(
                "Calls by DAG and task",
                "State store calls per DAG, task, operator and run type, by kind of call."
                + RANGE_NOTE
                + NO_WATCHERS_NOTE,
                [
                    (q.m("count", BOTH, outcomes, TABLE_BY), column)
                    for outcomes, column in (
                        (READS, "reads"),
                        ((Outcome.WRITE,), "writes"),
                        ((Outcome.DELETE,), "deletes"),
                        ((Outcome.CLEAR,), "clears"),
                        ((Outcome.ERROR,), "errors"),
                    )
                ],
                w=16,
                h=10,
            ),
        ],
    )


def delete_clear_row(q: Queries) -> Row:
    """delete and clear calls per DAG and store, over time and by task."""
    removals = [(s, o) for s in BOTH for o in (Outcome.DELETE, Outcome.CLEAR)]
    return Row(
        "Delete and clear usage",
        [
            _ops(
                "Deletes and clears per second by DAG",
                "delete and clear calls per second, per DAG and store." + NO_WATCHERS_NOTE,
                [
                    Target(q.m("rate", (s,), (o,), (DAG_ID,)), f"{{{{dag_id}}}} {store_word(s)} {o.value}")
                    for s, o in removals
                ],
                w=12,
            ),
            _table(
                "Deletes and clears by DAG and task",
                "delete and clear calls per DAG and task, by store." + RANGE_NOTE + NO_WATCHERS_NOTE,
                [
                    (q.m("count", (s,), (o,), (DAG_ID, TASK_ID)), f"{store_word(s)} {o.value}s")
                    for s, o in removals
                ],
                w=12,
            ),
        ],
    )


def breakdowns_row(q: Queries) -> Row:
    """Calls by operator, run type and team over the selected range."""
    return Row(
        "Breakdowns",
        [
            _calls_by(
                q,
                OPERATOR,
                "Calls by operator",
                "State store calls per operator class. Operators "
                "call the store at very different grains (one call per step vs one per task), so "
                "compare usage, not volume.",
            ),
            _calls_by(
                q,
                RUN_TYPE,
                "Calls by run type",
                "State store calls per run type: the DAG run's (manual, scheduled, backfill, "
                "asset_triggered), or asset_watcher for the calls asset-watcher triggers make in the "
                "triggerer (the Triggers row below has them by trigger).",
            ),
            _calls_by(
                q,
                TEAM_NAME,
                "Calls by team",
                "State store calls per team (multi-team deployments; an empty name is a DAG without a team).",
            ),
        ],
    )


def errors_row(q: Queries) -> Row:
    """Calls that raised: by store and method, error ratio by DAG, and by DAG, task and method."""
    return Row(
        "Errors",
        [
            _ops(
                "Errors per second by store and method",
                "Calls that raised, per "
                "second, by store and the method that raised (get, set, delete, clear).",
                [
                    Target(
                        q.m("rate", (s,), (Outcome.ERROR,), (OPERATION,)),
                        f"{store_word(s)} {{{{operation}}}}",
                    )
                    for s in BOTH
                ],
            ),
            _ratio_series(
                "Error ratio by DAG",
                "Calls that raised / all calls, per DAG, where the DAG made calls in the interval. The "
                "line is the alert threshold (StateStoreErrorRateHigh, over its own window)."
                + NO_WATCHERS_NOTE,
                [Target(q.error_ratio("rate", (DAG_ID,)), "{{dag_id}}")],
                threshold="error_ratio",
            ),
            _table(
                "Errors by DAG, task and method",
                "Calls that raised per DAG, task and method, by store." + RANGE_NOTE + NO_WATCHERS_NOTE,
                [
                    (
                        q.m("count", (s,), (Outcome.ERROR,), (DAG_ID, TASK_ID, OPERATION)),
                        f"{store_word(s)} store errors",
                    )
                    for s in BOTH
                ],
            ),
        ],
    )


def _retried(ctx: RenderContext, outcome: str = "") -> str:
    """Retried attempts (of ``outcome``, or all) within the range, per DAG and task."""
    matchers = [promql.scope(ctx), *FILTER_MATCHERS]
    if outcome:
        matchers.append(f'outcome="{outcome}"')
    matchers.append(f'{RUN_TYPE}!="{catalogue.RUN_TYPE_ASSET_WATCHER}"')
    selector = ",".join(matchers)
    return f"sum by ({DAG_ID}, {TASK_ID}) (sum_over_time({promql.retries(ctx)}{{{selector}}}[$__range]))"


def retries_row(q: Queries) -> Row:
    """Did the retries resume? Per DAG and task: resumed, started over, and the resume rate."""
    resumed, started_over = _retried(q.ctx, "retry_resumed"), _retried(q.ctx, "retry_not_resumed")
    rate = promql.ratio(resumed, _retried(q.ctx))
    return Row(
        "Retries: did they resume?",
        [
            Panel(
                "table",
                "Resume rate per DAG and task: resumed / (resumed + not resumed)",
                "Per DAG and task, the retried attempts (try 2 and later, each map index its own) that "
                "read their task store within the selected range: resumed (the first read found what an "
                "earlier attempt saved), started over (it found nothing), and the resume rate. A task "
                "whose retries keep starting over: alert StateStoreRetriesStartOver (export settings "
                "retry_start_over_ratio, retry_min_attempts, retry_window)." + RANGE_NOTE + NO_WATCHERS_NOTE,
                [
                    Target(Retries(resumed), "resumed", instant=True, table=True),
                    Target(Retries(started_over), "started over", instant=True, table=True),
                    Target(Retries(rate), "resume rate", instant=True, table=True),
                ],
                w=24,
                h=8,
                renames={"Value #A": "resumed", "Value #B": "started over", "Value #C": "resume rate"},
                column_units={"resume rate": "percentunit"},
            )
        ],
    )


TRIGGERS_ROW_TITLE = "Triggers: asset watchers in the triggerer (run_type asset_watcher)"
_WATCHER_NOTE = WATCHER_NOTE


def triggers_row(q: Queries) -> Row:
    """Calls asset-watcher triggers make (``run_type="asset_watcher"``): by trigger, by outcome, by
    asset; the watermark found ratio by trigger and asset; errors by trigger and method.

    Collapsed in the dashboard, like the API server row: most deployments have no watcher, and its
    queries then run only when someone opens it.
    """
    return Row(
        TRIGGERS_ROW_TITLE,
        [
            _ops(
                "Asset watcher calls per second by trigger",
                "State store calls per second of asset-watcher triggers, per trigger class." + _WATCHER_NOTE,
                [Target(q.everything("rate", (OPERATOR,), WATCHERS), "{{operator}}")],
            ),
            _ops(
                "Asset watcher calls per second by operation",
                "Asset store calls per second of asset-watcher triggers, one line per outcome: a "
                "watermark read that found a value, one that did not, writes, deletes, clears and "
                "calls that raised." + _WATCHER_NOTE,
                _per_outcome(q, Store.ASSET, WATCHERS),
            ),
            Panel(
                "bargauge",
                "Asset watcher calls by trigger and asset (selected range)",
                "State store calls of asset-watcher triggers per trigger class and watched asset."
                + _WATCHER_NOTE
                + RANGE_NOTE,
                [
                    Target(
                        q.everything("count", (OPERATOR, TASK_ID), WATCHERS),
                        "{{operator}} {{task_id}}",
                        instant=True,
                    )
                ],
                decimals=0,
            ),
            _ratio_series(
                "Asset watcher found ratio by trigger and asset",
                "read_found / (read_found + read_absent) of asset-watcher triggers' asset store reads, "
                "per trigger class and watched asset: how often a watcher found the watermark it "
                "keeps. Near 1 for a healthy watcher after its first poll; 0 for long means it never "
                "finds it (a key it never writes, or state lost) and starts over at every poll."
                + _WATCHER_NOTE,
                [
                    Target(
                        Ratio(
                            q.m("rate", (Store.ASSET,), (Outcome.READ_FOUND,), (OPERATOR, TASK_ID), WATCHERS),
                            q.m("rate", (Store.ASSET,), READS, (OPERATOR, TASK_ID), WATCHERS),
                        ),
                        "{{operator}} {{task_id}}",
                    )
                ],
            ),
            _ops(
                "Asset watcher errors per second by trigger and method",
                "State store calls of asset-watcher triggers that raised, per second, by trigger class "
                "and the method that raised (get, set, delete, clear); alert "
                "StateStoreWatcherErrorRateHigh (export settings error_ratio, error_window)." + _WATCHER_NOTE,
                [
                    Target(
                        q.m("rate", BOTH, (Outcome.ERROR,), (OPERATOR, OPERATION), WATCHERS),
                        "{{operator}} {{operation}}",
                    )
                ],
            ),
        ],
    )


#: The task-side rows, top to bottom.
ROW_BUILDERS: tuple[Callable[[Queries], Row], ...] = (
    overview_row,
    errors_row,
    calls_per_second_row,
    ratios_row,
    top_row,
    delete_clear_row,
    breakdowns_row,
    retries_row,
)


def build_rows(ctx: RenderContext) -> list[Row]:
    """The task-side rows, in dashboard order."""
    queries = Queries(ctx)
    return [build(queries) for build in ROW_BUILDERS]


def build_triggers_row(ctx: RenderContext) -> Row:
    """The collapsed Triggers row."""
    return triggers_row(Queries(ctx))
