"""PromQL over the recorded calls (``task:<prefix>_store_metrics_calls:increase``, rules.yml).

Every task-side panel reads that one recorded tier: the calls of each rule interval per deployment,
job, DAG, task, operator, run type, team and failing method, labels ``store`` and ``outcome``.
Summed over a range it is the calls made in it (exactly: a series first seen counts in full);
averaged over a window and divided by the interval, the calls per second.
"""

from __future__ import annotations

from collections.abc import Sequence

from store_metrics.catalogue import Outcome, Store
from store_metrics.shipped import records

from .facts import ALL_OUTCOMES, BOTH, store_word
from .tokens import record, setting

__all__ = [
    "CALLS",
    "CLUSTER",
    "RETRIES",
    "SCOPE",
    "SERVER_SCOPE",
    "WATCHER_SCOPE",
    "by",
    "calls_matchers",
    "count",
    "per_second",
    "ratio",
]

#: The recorded calls.
CALLS = record(records.CALLS)
#: The recorded retried attempts, as a template token (the resume rate's panel reads it).
RETRIES = record(records.RETRIES)
#: The deployment label (export setting cluster_label).
CLUSTER = setting("cluster_label")
#: The dashboard's deployment and job: one of each, so two never add up. One job per component, as
#: the monitoring mixins keep a selector per component (kubernetes-mixin's kubeletSelector,
#: kubeApiserverSelector, ...): the tasks' calls ($job), the asset watchers' ($watcher_job, the
#: Triggers row) and the API server's own series ($server_job, its row). Where one job carries all
#: three (every shipped topology), the three variables pick that job; where a topology splits them
#: (another PodMonitor for the triggerer, the API server's own endpoint beside a Collector), each row
#: still finds its component, and two jobs carrying the same calls are still never added up.
SCOPE = f'{CLUSTER}="$cluster",job="$job"'
WATCHER_SCOPE = f'{CLUSTER}="$cluster",job="$watcher_job"'
SERVER_SCOPE = f'{CLUSTER}="$cluster",job="$server_job"'


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


def count(selector: str, labels: Sequence[str]) -> str:
    """The calls within the dashboard's range, grouped by ``labels``."""
    return f"sum {by(labels)}(sum_over_time({CALLS}{{{selector}}}[$__range]))"


def per_second(selector: str, labels: Sequence[str]) -> str:
    """Calls per second over each point's interval (one recorded sample per rule interval at least)."""
    interval = setting("rule_interval_seconds")
    return f"sum {by(labels)}(avg_over_time({CALLS}{{{selector}}}[$__interval])) / {interval}"


def ratio(numerator: str, denominator: str, grouped: bool = True) -> str:
    """``numerator / denominator`` where the denominator is positive; a group the numerator lacks is 0
    (ungrouped, ``vector(0)`` stands in for it: the denominator is then read once, not twice)."""
    fill = f"0 * {denominator}" if grouped else "vector(0)"
    return f"({numerator} or {fill}) / ({denominator} > 0)"
