"""Datadog metric queries and formula requests over the state store counters, from the catalogue.

A request is a set of ``Formula`` (a sum of counters, optionally divided by another sum);
``request`` gives every counter it uses one metric query (``query1``, ``query2``, ...) and
writes the formulas over their names. Every query carries the dashboard's template variables (the
environment, then ``{$team_name,$dag_id,$task_id,$operator,$run_type}``), plus any exact tag a
widget always applies (``run_type:asset_watcher``); a query grouped by DAG leaves the asset
watchers out (``!run_type:asset_watcher``), as the Grafana dashboard does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store

from ..dashboard_facts import ALL_OUTCOMES, BOTH, DAG_ID, FILTERS, READS, WATCHER
from ..render_context import RenderContext

__all__ = [
    "ALL_CALLS",
    "ENV",
    "ERRORS",
    "OTHER_CALLS",
    "READ_CALLS",
    "RESUMED",
    "RETRIED",
    "STARTED_OVER",
    "WRITES",
    "Formula",
    "Term",
    "metric_query",
    "request",
    "scope",
    "terms",
]

#: One counter: a store and an outcome (a call counter), or a catalogue metric (the retry counters).
Term = tuple[Store, Outcome] | catalogue.Metric

#: The environment template variable: its tag is the export setting datadog_env_tag.
ENV = "env"


def terms(stores: Sequence[Store], outcomes: Sequence[Outcome]) -> tuple[tuple[Store, Outcome], ...]:
    return tuple((s, o) for s in stores for o in outcomes)


#: Every call: the catalogue's counters recorded with the calls (a new one is counted here too).
ALL_CALLS: tuple[Term, ...] = catalogue.call_counters()
#: Calls the catalogue records with the others under an outcome ``Outcome`` does not name: none today;
#: a counter added to the catalogue that way is one, and the tables give it a column.
OTHER_CALLS: tuple[Term, ...] = tuple(
    m
    for m in catalogue.call_counters()
    if m not in {catalogue.metric_for(s, o) for s in BOTH for o in ALL_OUTCOMES}
)
READ_CALLS = terms(BOTH, READS)
WRITES = terms(BOTH, (Outcome.WRITE,))
ERRORS = terms(BOTH, (Outcome.ERROR,))
#: Retried attempts: those whose first read found a value (resumed), and all that read.
RESUMED: tuple[Term, ...] = (catalogue.RETRY_RESUMED,)
STARTED_OVER: tuple[Term, ...] = (catalogue.RETRY_NOT_RESUMED,)
RETRIED: tuple[Term, ...] = (*RESUMED, *STARTED_OVER)


def scope(
    only: Sequence[tuple[str, str]] = (),
    variables: bool = True,
    exclude: Sequence[tuple[str, str]] = (),
) -> str:
    """``{$env,$team_name,...,$run_type}`` (each ``*`` when the variable is at its default), plus
    ``only`` (``tag:value``) and ``exclude`` (``!tag:value``)."""
    parts = [f"${name}" for name in (ENV, *FILTERS)] if variables else []
    parts += [f"{tag}:{value}" for tag, value in only]
    parts += [f"!{tag}:{value}" for tag, value in exclude]
    return "{" + (",".join(parts) or "*") + "}"


def counter_of(term: Term) -> catalogue.Metric:
    """The catalogue's counter of ``term``."""
    return term if isinstance(term, catalogue.Metric) else catalogue.metric_for(*term)


def metric_query(term: Term, ctx: RenderContext, scope_text: str, by: Sequence[str]) -> str:
    """``sum:<prefix>.<store>.<outcome>{scope} by {tags}.as_count()``."""
    metric = ctx.full_name(counter_of(term))
    grouping = f" by {{{','.join(by)}}}" if by else ""
    return f"sum:{metric}{scope_text}{grouping}.as_count()"


@dataclass(frozen=True)
class Formula:
    """The sum of ``terms`` (divided by the sum of ``over`` for a ratio), shown as ``alias``."""

    terms: tuple[Term, ...]
    alias: str
    over: tuple[Term, ...] = ()
    #: Top/bottom N (toplists and tables): ``(count, "desc" | "asc")``.
    limit: tuple[int, str] | None = None


def _sum(names: Sequence[str]) -> str:
    return " + ".join(names)


def request(
    formulas: Sequence[Formula],
    ctx: RenderContext,
    by: Sequence[str] = (),
    scalar: bool = False,
    only: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """A formula-and-functions request: one metric query per counter used, then the formulas.

    Grouped by DAG (and not kept to ``only``), the asset watchers' calls are left out: they would
    all show up as one DAG called ``<none>``.
    """
    exclude = (WATCHER,) if DAG_ID in by and not only else ()
    scope_text = scope(only, exclude=exclude)
    # Keyed by counter: a (store, outcome) pair and the catalogue's metric for it are one query.
    names: dict[catalogue.Metric, str] = {}
    for formula in formulas:
        for term in (*formula.terms, *formula.over):
            names.setdefault(counter_of(term), f"query{len(names) + 1}")
    queries = []
    for term, name in names.items():
        query: dict[str, Any] = {
            "data_source": "metrics",
            "name": name,
            "query": metric_query(term, ctx, scope_text, by),
        }
        if scalar:
            query["aggregator"] = "sum"
        queries.append(query)
    written = []
    for formula in formulas:
        text = _sum([names[counter_of(t)] for t in formula.terms])
        if formula.over:
            text = f"({text}) / ({_sum([names[counter_of(t)] for t in formula.over])})"
        entry: dict[str, Any] = {"formula": text, "alias": formula.alias}
        if formula.limit is not None:
            entry["limit"] = {"count": formula.limit[0], "order": formula.limit[1]}
        written.append(entry)
    return {
        "queries": queries,
        "formulas": written,
        "response_format": "scalar" if scalar else "timeseries",
    }
