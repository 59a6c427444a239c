"""PromQL over the recorded calls (``task:<prefix>_store_metrics_calls:increase``, rules.yml).

Every task-side panel reads that one recorded tier: the calls of each rule interval per deployment,
job, DAG, task, operator, run type, team and failing method, labels ``store`` and ``outcome``.
Summed over a range it is the calls made in it (exactly: a series first seen counts in full);
averaged over a window and divided by the interval, the calls per second.
"""

from __future__ import annotations

from collections.abc import Sequence

from store_metrics.catalogue import Outcome, Store

from .. import records
from ..dashboard_facts import ALL_OUTCOMES, BOTH, store_word
from ..render_context import RenderContext

__all__ = [
    "by",
    "calls",
    "calls_matchers",
    "cluster",
    "count",
    "per_second",
    "ratio",
    "retries",
    "scope",
    "server_scope",
    "watcher_scope",
]


def calls(ctx: RenderContext) -> str:
    """The recorded calls."""
    return ctx.record(records.CALLS)


def retries(ctx: RenderContext) -> str:
    """The recorded retried attempts (the resume rate's panel reads it)."""
    return ctx.record(records.RETRIES)


def cluster(ctx: RenderContext) -> str:
    """The deployment label (export setting cluster_label)."""
    return ctx.setting("cluster_label")


# The dashboard's deployment and job: one of each, so two never add up. One job per component, as
# the monitoring mixins keep a selector per component (kubernetes-mixin's kubeletSelector,
# kubeApiserverSelector, ...): the tasks' calls ($job), the asset watchers' ($watcher_job, the
# Triggers row) and the API server's own series ($server_job, its row). Where one job carries all
# three (every shipped topology), the three variables pick that job; where a topology splits them
# (another PodMonitor for the triggerer, the API server's own endpoint beside a Collector), each row
# still finds its component, and two jobs carrying the same calls are still never added up.
def scope(ctx: RenderContext) -> str:
    """The tasks' calls: the dashboard's deployment and ``$job``."""
    return f'{cluster(ctx)}="$cluster",job="$job"'


def watcher_scope(ctx: RenderContext) -> str:
    """The asset watchers' calls: the dashboard's deployment and ``$watcher_job``."""
    return f'{cluster(ctx)}="$cluster",job="$watcher_job"'


def server_scope(ctx: RenderContext) -> str:
    """The API server's own series: the dashboard's deployment and ``$server_job``."""
    return f'{cluster(ctx)}="$cluster",job="$server_job"'


def by(labels: Sequence[str]) -> str:
    return f"by ({', '.join(labels)}) " if labels else ""


def calls_matchers(stores: Sequence[Store], outcomes: Sequence[Outcome]) -> list[str]:
    """The ``store`` and ``outcome`` matchers that pick ``stores`` x ``outcomes`` (none for all)."""
    found = []
    if tuple(stores) != BOTH:
        found.append(f'store="{store_word(stores[0])}"' if len(stores) == 1 else "")
    if tuple(outcomes) != ALL_OUTCOMES:
        values = [o.value for o in outcomes]
        found.append(f'outcome="{values[0]}"' if len(values) == 1 else f'outcome=~"{"|".join(values)}"')
    return [m for m in found if m]


def count(ctx: RenderContext, selector: str, labels: Sequence[str]) -> str:
    """The calls within the dashboard's range, grouped by ``labels``."""
    return f"sum {by(labels)}(sum_over_time({calls(ctx)}{{{selector}}}[$__range]))"


def per_second(ctx: RenderContext, selector: str, labels: Sequence[str]) -> str:
    """Calls per second over each point's interval (one recorded sample per rule interval at least)."""
    interval = ctx.setting("rule_interval_seconds")
    return f"sum {by(labels)}(avg_over_time({calls(ctx)}{{{selector}}}[$__interval])) / {interval}"


def ratio(numerator: str, denominator: str, grouped: bool = True) -> str:
    """``numerator / denominator`` where the denominator is positive; a group the numerator lacks is 0
    (ungrouped, ``vector(0)`` stands in for it: the denominator is then read once, not twice)."""
    fill = f"0 * {denominator}" if grouped else "vector(0)"
    return f"({numerator} or {fill}) / ({denominator} > 0)"
