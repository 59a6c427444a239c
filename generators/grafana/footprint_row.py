"""The collapsed Footprint row: what the state store holds, from ``store-metrics inventory --serve``.

Bytes and entries by DAG and by asset, the top growers of the last day, expired entries nobody
cleaned up, a table by DAG and task, and the inventory's own health (up, age of the footprint shown,
query duration). Every query takes the ``max`` across inventory replicas before it sums
(:func:`~store_metrics.pipeline.promql.one_replica`), as ``footprint-rules.yml`` does, so a second
replica during a rollout doubles nothing; the ``other`` buckets are shown and summed like any DAG,
task or asset.

The footprint gauges carry ``dag_id`` and ``task_id`` (task store) or ``asset`` (asset store), no
run type, operator or team: only the dashboard's DAG and task filters apply, and only to the task
store. Collapsed, like the Triggers and API server rows: a deployment without the inventory has no
such series, and the queries run only when someone opens the row.
"""

from __future__ import annotations

from dataclasses import dataclass

from store_metrics import catalogue
from store_metrics.catalogue import Metric, Store

from ..promql import one_replica
from .queries import Footprint, Panel, Row, Target

__all__ = ["FOOTPRINT_ROW_TITLE", "GROWTH_WINDOW", "TOP", "footprint_row"]

FOOTPRINT_ROW_TITLE = (
    "Footprint: what the state store holds (store-metrics inventory; DAG and task filters only)"
)
#: How many DAGs and assets the top panels show.
TOP = 10
#: The growth panels' window and subquery resolution (one point per default inventory_interval).
GROWTH_WINDOW = "1d"
GROWTH_STEP = "5m"
DAG_ID, TASK_ID, ASSET, STORE = catalogue.DAG_ID, catalogue.TASK_ID, catalogue.ASSET, catalogue.STORE
#: The dashboard's filters that apply to the task store's footprint.
TASK_SELECTOR = f'{{{DAG_ID}=~"${DAG_ID}",{TASK_ID}=~"${TASK_ID}"}}'

_ABOUT = (
    " From store-metrics inventory --serve, which re-reads the state store tables every "
    "inventory_interval (300 s); the max across inventory replicas, so a second one during a "
    "rollout doubles nothing."
)
_TASK_FILTERS = " Only the dashboard's DAG and task filters apply."
_ASSET_FILTERS = " No dashboard filter applies (an asset belongs to no DAG)."
_OTHER = ' "other": the DAGs (tasks, assets) beyond inventory_top, summed, so totals stay exact.'


@dataclass(frozen=True)
class _Gauges:
    """The inventory's series names for one prefix, with the task store's filters applied."""

    prefix: str

    def task(self, name: str) -> str:
        metric = catalogue.get(f"{Store.TASK.value}.footprint.{name}")
        return one_replica(f"{metric.prometheus_name(self.prefix)}{TASK_SELECTOR}")

    def asset(self, name: str) -> str:
        metric = catalogue.get(f"{Store.ASSET.value}.footprint.{name}")
        return one_replica(metric.prometheus_name(self.prefix))

    def health(self, metric: Metric) -> str:
        return metric.prometheus_name(self.prefix)


def _by_dag(g: _Gauges, name: str) -> str:
    return f"sum by ({DAG_ID}) ({g.task(name)})"


def _by_asset(g: _Gauges, name: str) -> str:
    return f"sum by ({ASSET}) ({g.asset(name)})"


def _growth(expr: str) -> str:
    """How much each group grew over the last GROWTH_WINDOW, the largest TOP."""
    return f"topk({TOP}, delta(({expr})[{GROWTH_WINDOW}:{GROWTH_STEP}]))"


def _size_panels(g: _Gauges) -> list[Panel]:
    """Bytes and entries by DAG and by asset over time, the largest TOP."""
    panels = []
    for scope, by, legend, filters in (
        ("Task store", _by_dag, "{{dag_id}}", _TASK_FILTERS),
        ("Asset store", _by_asset, "{{asset}}", _ASSET_FILTERS),
    ):
        what = "DAG" if scope == "Task store" else "asset"
        panels += [
            Panel(
                "timeseries",
                f"{scope} bytes by {what} (top {TOP})",
                f"Bytes of the values the {scope.lower()} holds per {what} (the JSON text, measured by "
                "the database), the largest "
                f"{TOP}. A {what} with entries held by a custom state store backend has no bytes "
                "(size unknown): see external entries in the table." + _OTHER + _ABOUT + filters,
                [Target(Footprint(f"topk({TOP}, {by(g, 'bytes')})"), legend)],
                unit="bytes",
                w=12,
            ),
            Panel(
                "timeseries",
                f"{scope} entries by {what} (top {TOP})",
                f"Entries (keys) the {scope.lower()} holds per {what}, the largest {TOP}."
                + _OTHER
                + _ABOUT
                + filters,
                [Target(Footprint(f"topk({TOP}, {by(g, 'entries')})"), legend)],
                w=12,
            ),
        ]
    return panels


def _growth_panels(g: _Gauges) -> list[Panel]:
    """The top growers of the last day, and expired entries nobody removed."""
    growth_note = (
        f" Growth over the last 24 hours (delta of a {GROWTH_STEP}-step subquery, at the end of the "
        "dashboard's time range); a DAG or asset that entered the top inventory_top within the day "
        "counts from then." + _OTHER + _ABOUT + " Only the dashboard's DAG and task filters apply, to DAGs."
    )
    return [
        Panel(
            "bargauge",
            "Top growers by bytes (last 24 h)",
            f"The {TOP} DAGs and the {TOP} assets whose state store values grew most." + growth_note,
            [
                Target(Footprint(_growth(_by_dag(g, "bytes")), "instant"), "DAG {{dag_id}}", instant=True),
                Target(Footprint(_growth(_by_asset(g, "bytes")), "instant"), "asset {{asset}}", instant=True),
            ],
            unit="bytes",
        ),
        Panel(
            "bargauge",
            "Top growers by entries (last 24 h)",
            f"The {TOP} DAGs and the {TOP} assets whose number of state store entries grew most."
            + growth_note,
            [
                Target(Footprint(_growth(_by_dag(g, "entries")), "instant"), "DAG {{dag_id}}", instant=True),
                Target(
                    Footprint(_growth(_by_asset(g, "entries")), "instant"), "asset {{asset}}", instant=True
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
            "StateStoreRetentionNotApplied). The asset store has no expiry."
            + _OTHER
            + _ABOUT
            + _TASK_FILTERS,
            [Target(Footprint(f"{_by_dag(g, 'expired_entries')} > 0"), "{{dag_id}}")],
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


def _table_panel(g: _Gauges) -> Panel:
    """The task store's footprint per DAG and task, one column per gauge."""
    by = f"by ({DAG_ID}, {TASK_ID})"
    return Panel(
        "table",
        "Task store footprint by DAG and task",
        "What each DAG's tasks keep in the task state store now: entries, bytes of the values "
        "(empty where entries are held by a custom state store backend), expired entries not yet "
        "cleaned up, entries held by a custom backend ([workers] state_store_backend), and the time "
        "since the least and the most recently written entry (state older than any run still "
        "needs is a candidate for retention=)." + _OTHER + _ABOUT + _TASK_FILTERS,
        [
            Target(Footprint(f"{aggregation} {by} ({g.task(gauge)})", "instant"), instant=True, table=True)
            for _, gauge, aggregation, _ in _TABLE_COLUMNS
        ],
        w=24,
        h=10,
        decimals=0,
        renames={f"Value #{chr(ord('A') + i)}": header for i, (header, *_) in enumerate(_TABLE_COLUMNS)},
        column_units={header: unit for header, _, _, unit in _TABLE_COLUMNS if unit},
    )


def _health_panels(g: _Gauges) -> list[Panel]:
    """The inventory's own health per store: up, the footprint's age, the query's duration."""
    about = (
        " Per store (task, asset), from store-metrics inventory's own gauges; across replicas "
        "the best one counts. No dashboard filter applies."
    )
    return [
        Panel(
            "timeseries",
            "Inventory up, by store",
            "1 when the inventory's last query of the store's table succeeded, 0 when it failed (the "
            "footprint shown is then the last one read); no line: no inventory reports (alert "
            "StateStoreInventoryDown, 0 or no series for 15 minutes)." + about,
            [Target(Footprint(f"max by ({STORE}) ({g.health(catalogue.INVENTORY_UP)})"), "{{store}}")],
            decimals=0,
            max=1,
        ),
        Panel(
            "timeseries",
            "Footprint age, by store",
            "Seconds since the footprint shown was read from the database: up to inventory_interval "
            "(300 s) when healthy (alert StateStoreInventoryStale above 900 s for 5 minutes)." + about,
            [
                Target(
                    Footprint(f"min by ({STORE}) ({g.health(catalogue.INVENTORY_FOOTPRINT_AGE)})"),
                    "{{store}}",
                )
            ],
            unit="s",
        ),
        Panel(
            "timeseries",
            "Inventory query duration, by store",
            "How long the inventory's last successful aggregate query of the store's table took: one "
            "scan of the table per inventory_interval, under inventory_timeout (30 s)." + about,
            [
                Target(
                    Footprint(f"max by ({STORE}) ({g.health(catalogue.INVENTORY_QUERY_DURATION)})"),
                    "{{store}}",
                )
            ],
            unit="ms",
        ),
    ]


def footprint_row(prefix: str) -> Row:
    """The collapsed Footprint row for ``prefix``."""
    g = _Gauges(prefix)
    return Row(
        FOOTPRINT_ROW_TITLE,
        [*_size_panels(g), *_growth_panels(g), _table_panel(g), *_health_panels(g)],
    )
