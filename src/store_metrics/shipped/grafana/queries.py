"""The dashboard's query specs and panel model.

Every task-side query is a small declarative spec (``Measure``, ``Ratio``, ``TopK``) over the
recorded calls (``promql.calls``), rendered for one export (a ``Measure`` carries its
``RenderContext``), so the tests can compute, independently of PromQL, what each query must return
for the calls a scenario made (tests/support/e2e.py reads ``spec.kind``, ``spec.by``, ``spec.series``
and the class names). ``Server`` is a literal query over the API server's recorded series, which have no DAG
labels and so take no DAG filter; ``Footprint`` one over the inventory's (``store-metrics
inventory``), which take the DAG filter only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store

from ..dashboard_facts import ALL_OUTCOMES, BOTH, FILTERS, WATCHER
from ..render_context import RenderContext
from . import promql

__all__ = [
    "DS",
    "Footprint",
    "Measure",
    "Panel",
    "Ratio",
    "Retries",
    "Row",
    "Server",
    "Spec",
    "Target",
    "TopK",
    "ref_id",
]

#: The data source every panel and query uses: the dashboard's ``datasource`` variable.
DS = {"type": "prometheus", "uid": "${datasource}"}
#: The dashboard's filters, one variable per label (an unset one is All: ``.*``).
FILTER_MATCHERS = [f'{label}=~"${label}"' for label in FILTERS]


@dataclass(frozen=True)
class Measure:
    """Calls of ``stores`` x ``outcomes`` summed and grouped ``by``: within the range ("count") or
    per second ("rate")."""

    kind: str  # "count" | "rate"
    stores: tuple[Store, ...]
    outcomes: tuple[Outcome, ...]
    by: tuple[str, ...] = ()
    #: Exact ``(label, value)`` matchers added to the dashboard's filters (the Triggers row's
    #: ``run_type="asset_watcher"``).
    only: tuple[tuple[str, str], ...] = ()
    #: ``(label, value)`` pairs a series must not have (the per-DAG panels leave out
    #: ``run_type="asset_watcher"``: a watcher belongs to no DAG).
    exclude: tuple[tuple[str, str], ...] = ()
    #: The export this query is rendered for (its prefix and settings).
    ctx: RenderContext = field(kw_only=True, compare=False, repr=False)

    @property
    def series(self) -> tuple[str, ...]:
        """The counters whose calls this counts, as series names for the default prefix (the tests
        count the scenarios' calls by them)."""
        return tuple(metric.prometheus_name() for metric in self.counters())

    def counters(self) -> tuple[catalogue.Metric, ...]:
        """The counters of ``stores`` x ``outcomes``; for both stores and every outcome, the catalogue's
        counters recorded with the calls (a counter added there is one of them)."""
        if self.stores == BOTH and self.outcomes == ALL_OUTCOMES:
            return catalogue.call_counters()
        return tuple(catalogue.metric_for(s, o) for s in self.stores for o in self.outcomes)

    @property
    def selector(self) -> str:
        """The dashboard's deployment, job (the watchers' own job where ``only`` keeps to them) and
        filters, the stores and outcomes, ``only``, ``exclude``.

        A label may appear twice (``run_type=~"$run_type",run_type="asset_watcher"``): a series
        must match both, so the panel follows the dashboard's filter and keeps to (or away from)
        its own value.
        """
        matchers = [self._scope(), *FILTER_MATCHERS, *promql.calls_matchers(self.stores, self.outcomes)]
        matchers += [f'{label}="{value}"' for label, value in self.only]
        matchers += [f'{label}!="{value}"' for label, value in self.exclude]
        return ",".join(matchers)

    def _scope(self) -> str:
        return promql.watcher_scope(self.ctx) if WATCHER in self.only else promql.scope(self.ctx)

    def expr(self) -> str:
        if self.kind == "count":
            return promql.count(self.ctx, self.selector, self.by)
        return promql.per_second(self.ctx, self.selector, self.by)

    def raw_expr(self) -> str:
        """The raw counters of these calls (the series that carry exemplars), summed by group: the
        dashboard's deployment, job and filters, ``only`` and ``exclude``; the counters by name.

        Its lines are hidden: what matters is its selector, which picks the series whose exemplars
        Grafana asks ``query_exemplars`` for. No ``rate()``: it drops ``__name__``, and two counters
        of one task (its reads and its writes) would then be one label set twice, which Prometheus
        refuses ("vector cannot contain metrics with the same labelset")."""
        names = "|".join(self.ctx.series(metric) for metric in self.counters())
        matchers = [f'__name__=~"{names}"', self._scope(), *FILTER_MATCHERS]
        matchers += [f'{label}="{value}"' for label, value in self.only]
        matchers += [f'{label}!="{value}"' for label, value in self.exclude]
        return f"sum {promql.by(self.by)}({{{','.join(matchers)}}})"


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
        return promql.ratio(self.num.expr(), self.den.expr(), grouped=bool(self.by))


@dataclass(frozen=True)
class TopK:
    """The ``k`` largest groups of a count over the range (an instant query: exactly ``k``)."""

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
    """A query over the API server's recorded series (no DAG labels, so no DAG filter)."""

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


@dataclass(frozen=True)
class Retries:
    """A query over the recorded retried attempts (``task:..._retries:increase``), with the
    dashboard's deployment, job and filters, watchers left out, summed over the selected range."""

    promql: str
    by: tuple[str, ...] = ("dag_id", "task_id")
    kind: str = "count"

    def expr(self) -> str:
        return self.promql


Spec = Measure | Ratio | TopK | Server | Footprint | Retries


def ref_id(index: int) -> str:
    """Grafana's query letters: A, B, C, ..."""
    return chr(ord("A") + index)


@dataclass
class Target:
    spec: Spec
    legend: str = ""
    instant: bool = False
    table: bool = False

    def to_json(self, ref: str, ctx: RenderContext) -> dict[str, Any]:
        target: dict[str, Any] = {
            "datasource": DS,
            "refId": ref,
            "expr": self.spec.expr(),
            "legendFormat": self.legend or "__auto",
            "range": not self.instant,
            "instant": self.instant,
            "editorMode": "code",
        }
        if not self.instant:
            # Min step: every point spans at least one recorded sample ($__interval >= it).
            target["interval"] = ctx.setting("rule_interval")
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
    #: A line (time series) or colour (stat) at an alert's threshold: the setting's name.
    threshold: str | None = None
    #: A table's link from each row to the dashboard filtered to its labels.
    link_labels: Sequence[str] = ()
    #: The calls whose exemplars the panel shows (a point's link to the trace of a call that
    #: counted it): its raw counters, read by one more query whose own lines are hidden. The
    #: recorded series carry no exemplars, so the panel's lines cannot bring them.
    exemplars: Measure | None = None


@dataclass
class Row:
    title: str
    panels: list[Panel]
