"""The collapsed Footprint row: what the state store holds, from ``store-metrics inventory --serve``.

Bytes and entries by DAG and by asset, the top growers over the selected range, expired entries
nobody cleaned up, a table by DAG and task, and the inventory's own health (up, age of the
footprint shown, query duration). The panels read footprint-rules.yml's recorded series, which took
the ``max`` across inventory replicas before summing (a second replica during a rollout doubles
nothing); the ``other`` buckets are shown and summed like any DAG, task or asset. The table alone
reads the inventory's gauges (its description says why).

The footprint carries ``dag_id`` and ``task_id`` (task store) or ``asset`` (asset store), no run
type, operator or team: only the dashboard's deployment and DAG filters apply, and the DAG filter
only to the task store; the inventory's series have no job of their own (one inventory per
deployment). Collapsed, like the Triggers and API server rows: a deployment without the inventory
has no such series, and the queries run only when someone opens the row.
"""

from __future__ import annotations

from collections.abc import Callable

from store_metrics import catalogue
from store_metrics.catalogue import Store

from ..dashboard_facts import DAG_ID, TASK_ID
from ..render_context import RenderContext
from . import promql
from .queries import Footprint, Panel, Row, Target

__all__ = ["FOOTPRINT_ROW_TITLE", "TOP", "footprint_row"]

FOOTPRINT_ROW_TITLE = (
    "Footprint: what the state store holds (store-metrics inventory; deployment and DAG filters only)"
)
#: How many DAGs and assets the top panels show.
TOP = 10
ASSET, STORE = catalogue.ASSET, catalogue.STORE

_ABOUT = (
    " From store-metrics inventory --serve, which re-reads the state store tables every "
    "inventory_interval (300 s); the max across inventory replicas (footprint-rules.yml), so a "
    "second one during a rollout doubles nothing."
)
_TASK_FILTERS = " Only the dashboard's deployment and DAG filters apply."
_ASSET_FILTERS = " Only the deployment filter applies (an asset belongs to no DAG)."
_OTHER = " `<other>`: the DAGs (tasks, assets) beyond inventory_top, summed, so totals stay exact."


def _deployment(ctx: RenderContext) -> str:
    return f'{promql.cluster(ctx)}="$cluster"'


def _by_dag(ctx: RenderContext, name: str, modifier: str = "") -> str:
    """The task store's ``name`` per DAG (the dashboard's deployment and DAG filters); ``modifier``
    (``@ end()``, ``offset $__range``) on its selector."""
    recorded = ctx.record(f"dag_id:store_metrics_footprint_{name}:sum")
    return f'sum by ({DAG_ID}) ({recorded}{{{_deployment(ctx)},{DAG_ID}=~"${DAG_ID}"}}{modifier})'


def _by_asset(ctx: RenderContext, name: str, modifier: str = "") -> str:
    """The asset store's ``name`` per asset."""
    recorded = ctx.record(f"asset:store_metrics_footprint_{name}:sum")
    return f"sum by ({ASSET}) ({recorded}{{{_deployment(ctx)}}}{modifier})"


_By = Callable[[RenderContext, str, str], str]


def _top(ctx: RenderContext, by: _By, name: str, label: str) -> str:
    """``name`` per group over time, for the TOP groups largest at the range's end only: a topk
    over a range query would show every group that was ever in the top at some step."""
    return f"{by(ctx, name, '')} and on ({label}) topk({TOP}, {by(ctx, name, ' @ end()')})"


def _growth(ctx: RenderContext, by: _By, name: str) -> str:
    """How much each group grew over the selected range (an instant query at its end), the largest TOP.

    A group first seen inside the range grew by all it holds: ``or 0 * now`` gives it a start of 0,
    where the difference alone would leave it out (a new DAG, a fresh deployment)."""
    now = by(ctx, name, "")
    return f"topk({TOP}, {now} - ({by(ctx, name, ' offset $__range')} or 0 * {now}))"


def _size_panels(ctx: RenderContext) -> list[Panel]:
    """Bytes and entries by DAG and by asset over time, the largest TOP at the range's end."""
    panels = []
    for scope, by, label, filters in (
        ("Task store", _by_dag, DAG_ID, _TASK_FILTERS),
        ("Asset store", _by_asset, ASSET, _ASSET_FILTERS),
    ):
        what = "DAG" if scope == "Task store" else "asset"
        legend = f"{{{{{label}}}}}"
        top = f"the {TOP} largest at the end of the dashboard's time range."
        panels += [
            Panel(
                "timeseries",
                f"{scope} bytes by {what} (top {TOP})",
                f"Bytes of the values the {scope.lower()} holds per {what} (the JSON text, measured by "
                f"the database), {top} A {what} with entries held by a custom state store backend has "
                "no bytes (size unknown): see external entries in the table." + _OTHER + _ABOUT + filters,
                [Target(Footprint(_top(ctx, by, "bytes", label)), legend)],
                unit="bytes",
                w=12,
            ),
            Panel(
                "timeseries",
                f"{scope} entries by {what} (top {TOP})",
                f"Entries (keys) the {scope.lower()} holds per {what}, {top}" + _OTHER + _ABOUT + filters,
                [Target(Footprint(_top(ctx, by, "entries", label)), legend)],
                w=12,
            ),
        ]
    return panels


def _growth_panels(ctx: RenderContext) -> list[Panel]:
    """The top growers over the selected range, and expired entries nobody removed."""
    growth_note = (
        " Growth over the dashboard's time range (the footprint at its end minus at its start); a "
        "DAG or asset that entered the top inventory_top within the range counts from then."
        + _OTHER
        + _ABOUT
        + " Only the deployment filter applies, and the DAG filter to DAGs."
    )
    return [
        Panel(
            "bargauge",
            "Top growers by bytes (selected range)",
            f"The {TOP} DAGs and the {TOP} assets whose state store values grew most." + growth_note,
            [
                Target(Footprint(_growth(ctx, _by_dag, "bytes"), "instant"), "DAG {{dag_id}}", instant=True),
                Target(
                    Footprint(_growth(ctx, _by_asset, "bytes"), "instant"), "asset {{asset}}", instant=True
                ),
            ],
            unit="bytes",
        ),
        Panel(
            "bargauge",
            "Top growers by entries (selected range)",
            f"The {TOP} DAGs and the {TOP} assets whose number of state store entries grew most."
            + growth_note,
            [
                Target(
                    Footprint(_growth(ctx, _by_dag, "entries"), "instant"), "DAG {{dag_id}}", instant=True
                ),
                Target(
                    Footprint(_growth(ctx, _by_asset, "entries"), "instant"), "asset {{asset}}", instant=True
                ),
            ],
            decimals=0,
        ),
        Panel(
            "timeseries",
            "Expired entries not cleaned up, by DAG",
            "Task state store entries whose expires_at has passed but that are still stored, per DAG "
            "(DAGs with none are not shown). Airflow removes them only when `airflow state-store "
            "clean` runs: a count that keeps growing, or never drops, says nobody runs it (alert "
            "StateStoreRetentionNotApplied)." + _OTHER + _ABOUT + _TASK_FILTERS,
            [Target(Footprint(f"{_by_dag(ctx, 'expired_entries')} > 0"), "{{dag_id}}")],
            decimals=0,
        ),
    ]


#: The table's columns: (header, gauge, aggregation, unit or "").
_TABLE_COLUMNS: tuple[tuple[str, str, str, str], ...] = (
    ("entries", "entries", "sum", ""),
    ("bytes", "bytes", "sum", "bytes"),
    ("expired", "expired_entries", "sum", ""),
    ("external", "external_entries", "sum", ""),
    ("oldest entry age", "oldest_age", "max", "s"),
    ("newest entry age", "newest_age", "min", "s"),
)


def _task_gauge(ctx: RenderContext, gauge: str) -> str:
    """The inventory's per-task gauge, the max across replicas, with the deployment, DAG and task filters."""
    metric = ctx.series(catalogue.get(f"{Store.TASK.value}.footprint.{gauge}"))
    selector = f'{{{_deployment(ctx)},{DAG_ID}=~"${DAG_ID}",{TASK_ID}=~"${TASK_ID}"}}'
    return f"max by ({promql.cluster(ctx)}, {DAG_ID}, {TASK_ID}) ({metric}{selector})"


def _table_panel(ctx: RenderContext) -> Panel:
    """The task store's footprint per DAG and task, one column per gauge."""
    by = f"by ({DAG_ID}, {TASK_ID})"
    return Panel(
        "table",
        "Task store footprint by DAG and task",
        "What each DAG's tasks keep in the task state store now: entries, bytes of the values "
        "(empty where entries are held by a custom state store backend), expired entries not yet "
        "cleaned up, entries held by a custom backend ([workers] state_store_backend), and the time "
        "since the least and the most recently written entry (state older than any run still "
        "needs is a candidate for retention=)." + _OTHER + _ABOUT + " The deployment, DAG and task "
        "filters apply. Reads the inventory's own gauges, not a recording rule: they are already one "
        "series per DAG and task (top inventory_top, the rest under `<other>`), read at one instant, so "
        "a rule would only copy them.",
        [
            Target(
                Footprint(f"{aggregation} {by} ({_task_gauge(ctx, gauge)})", "instant"),
                instant=True,
                table=True,
            )
            for _, gauge, aggregation, _ in _TABLE_COLUMNS
        ],
        w=24,
        h=10,
        decimals=0,
        renames={f"Value #{chr(ord('A') + i)}": header for i, (header, *_) in enumerate(_TABLE_COLUMNS)},
        column_units={header: unit for header, _, _, unit in _TABLE_COLUMNS if unit},
    )


def _health(ctx: RenderContext, recorded: str) -> str:
    """The inventory's recorded health series ``recorded`` (its base name) per store."""
    aggregation = recorded.rsplit(":", 1)[1]  # max or min, as recorded
    return f"{aggregation} by ({STORE}) ({ctx.record(recorded)}{{{_deployment(ctx)}}})"


def _health_panels(ctx: RenderContext) -> list[Panel]:
    """The inventory's own health per store: up, the footprint's age, the query's duration."""
    about = (
        " Per store (task, asset), from store-metrics inventory's own gauges; across replicas "
        "the best one counts. Only the deployment filter applies."
    )
    return [
        Panel(
            "timeseries",
            "Inventory up, by store",
            "1 when the inventory's last query of the store's table succeeded, 0 when it failed (the "
            "footprint shown is then the last one read); no line: no inventory reports (alert "
            "StateStoreInventoryDown, export setting inventory_down_for)." + about,
            [Target(Footprint(_health(ctx, "store:store_metrics_inventory_up:max")), "{{store}}")],
            decimals=0,
            max=1,
        ),
        Panel(
            "timeseries",
            "Footprint age, by store",
            "Seconds since the footprint shown was read from the database: up to inventory_interval "
            "(300 s) when healthy. The line is the alert threshold (StateStoreInventoryStale, export "
            "setting inventory_stale_after)." + about,
            [
                Target(
                    Footprint(_health(ctx, "store:store_metrics_inventory_footprint_age_seconds:min")),
                    "{{store}}",
                )
            ],
            unit="s",
            threshold="inventory_stale_after_seconds",
        ),
        Panel(
            "timeseries",
            "Inventory query duration, by store",
            "How long the inventory's last successful aggregate query of the store's table took: one "
            "scan of the table per inventory_interval, under inventory_timeout (30 s)." + about,
            [
                Target(
                    Footprint(_health(ctx, "store:store_metrics_inventory_query_duration_ms:max")),
                    "{{store}}",
                )
            ],
            unit="ms",
        ),
    ]


def footprint_row(ctx: RenderContext) -> Row:
    """The collapsed Footprint row."""
    panels = [*_size_panels(ctx), *_growth_panels(ctx), _table_panel(ctx), *_health_panels(ctx)]
    return Row(FOOTPRINT_ROW_TITLE, panels)
