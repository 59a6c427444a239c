"""PromQL building blocks derived from the metric catalogue.

Used by :mod:`.grafana` (the dashboard) and :mod:`.datadog`. Every
metric name in a generated query comes from the catalogue (:func:`name` for the state store
counters, :meth:`~store_metrics.catalogue.Metric.prometheus_name` for the rest); nothing here
spells a metric name by hand.

Two facts of Prometheus 2.x shape the helpers:

* ``rate()``/``increase()`` drop the metric name, so ``rate({__name__=~"a|b"}[5m])`` fails
  with "vector cannot contain metrics with the same labelset" whenever two counters share a
  tag set (they always do here). Several counters are therefore combined by tagging each
  one's result with ``label_replace`` and joining them with ``or`` before summing.
* A series Prometheus sees for the first time already holds its first count (a DAG's first
  run, the first error), and ``increase()`` only counts growth *between* samples. The
  "calls in the selected range" queries therefore take a series that did not exist at the
  start of the range at its full value and use ``increase()`` for the others.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from store_metrics import catalogue
from store_metrics.catalogue import Metric, Outcome, Store

PREFIX = catalogue.DEFAULT_PREFIX

#: The labels every dashboard filter and every recording rule keeps, in catalogue order.
FILTER_LABELS: tuple[str, ...] = (*catalogue.BASE_TAGS, catalogue.TEAM_NAME)
#: Aggregation level of the per-DAG recording rules.
DAG_LEVEL: tuple[str, ...] = (catalogue.DAG_ID, catalogue.TEAM_NAME)
#: The label ``label_replace`` adds to tell counters apart before they are summed.
COUNTER_LABEL = "store_metrics_counter"

READS = (Outcome.READ_FOUND, Outcome.READ_ABSENT)
COMPLETED = (Outcome.READ_FOUND, Outcome.READ_ABSENT, Outcome.WRITE, Outcome.DELETE, Outcome.CLEAR)
ALL_OUTCOMES = (*COMPLETED, Outcome.ERROR)


def metric(scope: Store, outcome: Outcome) -> Metric:
    return catalogue.metric_for(scope, outcome)


def name(scope: Store, outcome: Outcome, prefix: str = PREFIX) -> str:
    """The Prometheus series name of one state store counter."""
    return metric(scope, outcome).prometheus_name(prefix)


def names(
    scopes: Iterable[Store] = tuple(Store), outcomes: Iterable[Outcome] = ALL_OUTCOMES, prefix: str = PREFIX
) -> list[str]:
    outcomes = tuple(outcomes)
    return [name(s, o, prefix) for s in scopes for o in outcomes]


def all_names(prefix: str = PREFIX) -> list[str]:
    """Every state store counter's series name, in catalogue order."""
    return [m.prometheus_name(prefix) for m in catalogue.STATE_STORE_METRICS]


def name_regex(series: Sequence[str]) -> str:
    """An exact alternation of series names for a ``__name__=~`` matcher (no wildcards)."""
    return "|".join(re.escape(s) for s in series)


def by(labels: Sequence[str]) -> str:
    return f"by ({', '.join(labels)}) " if labels else ""


def tagged(expr: str, value: str) -> str:
    """``expr`` with ``store_metrics_counter="<value>"`` added, so ``or`` keeps every counter."""
    return f'label_replace({expr}, "{COUNTER_LABEL}", "{value}", "", "")'


def union(exprs: Sequence[str]) -> str:
    """Join per-counter vectors without losing any: tag each with its position, then ``or``."""
    if len(exprs) == 1:
        return exprs[0]
    return " or ".join(tagged(expr, str(i)) for i, expr in enumerate(exprs))


def rate_sum(series: Sequence[str], sel: str, window: str, labels: Sequence[str]) -> str:
    """Calls per second of ``series`` (summed), grouped by ``labels``."""
    return f"sum {by(labels)}({union([f'rate({s}{sel}[{window}])' for s in series])})"


def range_count(series_name: str, sel: str, rng: str) -> str:
    """Calls of one counter within ``rng``, per series, counting series first seen in the range in full."""
    s = f"{series_name}{sel}"
    return f"(({s} unless {s} offset {rng}) or increase({s}[{rng}]))"


def count_sum(series: Sequence[str], sel: str, rng: str, labels: Sequence[str]) -> str:
    """Calls of ``series`` within ``rng`` (summed), grouped by ``labels``."""
    return f"sum {by(labels)}({union([range_count(s, sel, rng) for s in series])})"


def groups(series: Sequence[str], sel: str, labels: Sequence[str]) -> str:
    """The label groups ``series`` have now, each with value 1 (cheap: no range, no rate)."""
    matchers = sel[1:-1] if sel else ""
    inner = f'__name__=~"{name_regex(series)}"' + (f",{matchers}" if matchers else "")
    return f"group {by(labels)}({{{inner}}})"


def ratio(numerator: str, denominator: str, zero_fill: str | None = None) -> str:
    """``numerator / denominator`` where the denominator is positive.

    ``zero_fill`` (an expression with every group of the denominator, value 1) makes a group the
    numerator lacks count as 0 instead of disappearing; by default the denominator itself.
    """
    fill = zero_fill if zero_fill is not None else denominator
    return f"({numerator} or 0 * {fill}) / ({denominator} > 0)"


def selector(matchers: dict[str, str]) -> str:
    if not matchers:
        return ""
    return "{" + ",".join(f'{k}=~"{v}"' for k, v in matchers.items()) + "}"


#: The dashboard's label filters, one Grafana variable per label.
DASHBOARD_SELECTOR = selector({label: f"${label}" for label in FILTER_LABELS})


def dashboard_selector(only: Sequence[tuple[str, str]] = (), exclude: Sequence[tuple[str, str]] = ()) -> str:
    """The dashboard's filters, plus exact matchers that a panel always applies.

    ``only`` adds ``label="value"``, ``exclude`` adds ``label!="value"``. A label may appear twice
    (``run_type=~"$run_type",run_type="asset_watcher"``): a series must match both, so the panel
    follows the dashboard's filter and keeps to (or away from) its own value.
    """
    exact = [f'{label}="{value}"' for label, value in only]
    exact += [f'{label}!="{value}"' for label, value in exclude]
    if not exact:
        return DASHBOARD_SELECTOR
    return f"{DASHBOARD_SELECTOR[:-1]},{','.join(exact)}}}"


#: Labels that tell replicas of one exporter apart (``store-metrics inventory --serve`` during a
#: rollout, or two of them by mistake): the footprint rules and panels take the ``max`` across them.
REPLICA_LABELS: tuple[str, ...] = ("instance", "pod", "job")


def one_replica(expr: str) -> str:
    """``max without (instance, pod, job) (expr)``: the same gauge from several replicas counts once."""
    return f"max without ({', '.join(REPLICA_LABELS)}) ({expr})"
