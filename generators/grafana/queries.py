"""The dashboard's query specs and panel model.

Every task-side query is a small declarative spec (:class:`Measure`, :class:`Ratio`,
:class:`TopK`), so the tests can compute, independently of PromQL, what each query must return
for the calls a scenario made (tests/test_prometheus_e2e.py reads ``spec.kind``, ``spec.by``,
``spec.series`` and the class names). :class:`Server` is a literal query over the API server's
series, which have no DAG labels and so take no dashboard filter; :class:`Footprint` one over the
inventory's gauges (``store-metrics inventory``), which take the DAG and task filters only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from store_metrics.catalogue import Outcome, Store

from .. import promql

__all__ = [
    "DS",
    "RANGE",
    "RATE_INTERVAL",
    "Footprint",
    "Measure",
    "Panel",
    "Ratio",
    "Row",
    "Server",
    "Spec",
    "Target",
    "TopK",
    "ref_id",
    "series",
]

#: The data source every panel and query uses: the dashboard's ``datasource`` variable.
DS = {"type": "prometheus", "uid": "${datasource}"}
RANGE = "$__range"
RATE_INTERVAL = "$__rate_interval"


@dataclass(frozen=True)
class Measure:
    """Calls of ``series`` summed and grouped ``by``: within the range ("count") or per second ("rate")."""

    kind: str  # "count" | "rate"
    series: tuple[str, ...]
    by: tuple[str, ...] = ()
    #: Exact ``(label, value)`` matchers added to the dashboard's filters (the Triggers row's
    #: ``run_type="asset_watcher"``).
    only: tuple[tuple[str, str], ...] = ()
    #: ``(label, value)`` pairs a series must not have (the per-DAG panels leave out
    #: ``run_type="asset_watcher"``: a watcher belongs to no DAG).
    exclude: tuple[tuple[str, str], ...] = ()

    @property
    def selector(self) -> str:
        return promql.dashboard_selector(self.only, self.exclude)

    def expr(self) -> str:
        sel = self.selector
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
        fill = promql.groups(self.den.series, self.den.selector, self.den.by)
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


@dataclass(frozen=True)
class Footprint:
    """A query over the inventory's gauges (the state store footprint and the inventory's health)."""

    promql: str
    kind: str = "gauge"  # "gauge" (time series) | "instant" (one value per group, at the range's end)

    def expr(self) -> str:
        return self.promql


Spec = Measure | Ratio | TopK | Server | Footprint


def series(stores: Sequence[Store], outcomes: Sequence[Outcome], prefix: str) -> tuple[str, ...]:
    return tuple(promql.names(stores, outcomes, prefix))


def ref_id(index: int) -> str:
    """Grafana's query letters: A, B, C, ..."""
    return chr(ord("A") + index)


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
    #: A table column's unit, by its (renamed) column name, where it differs from ``unit``.
    column_units: dict[str, str] = field(default_factory=dict)


@dataclass
class Row:
    title: str
    panels: list[Panel]
