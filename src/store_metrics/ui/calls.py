"""The tab's calls: each task's state store calls per operation over a window, from Prometheus, and
whether its retries resumed.

The PromQL reads what the dashboards' panels read: the recorded calls of ``collector/rules.yml``
(``store_metrics.shipped.records.CALLS`` for the configured prefix, each rule interval's calls
once, so their sum over a window is exact), with the same exclusion of asset watchers
(``run_type="asset_watcher"`` belongs to
no DAG) and the DAG's id as the counters carry it: the tag value rule
(``store_metrics.naming.tag_value``) keeps every id Airflow accepts as it is and two ids apart,
so the query names the very DAG the permission check was made for, and the values the plugin makes
up (``<unknown>``, ``<none>``, ``<overflow>``) are no DAG's id. So the Prometheus
it asks must load the shipped rules. One instant query per DAG and window, summed by ``task_id``,
store and outcome; found ratios are computed from the same numbers (``read_found / (read_found +
read_absent)``, as the dashboards' ratio panels). The same query also reads the recorded retried
attempts (``store_metrics.shipped.records.RETRIES``, kept apart from the calls): each task's
resume rate, ``retry_resumed / (retry_resumed + retry_not_resumed)``.

The inventory's own health (``store-metrics inventory``'s footprint age and up gauges) comes from
the same Prometheus, for the deployment page.

Only the standard library talks to Prometheus (``POST /api/v1/query``), with ``ui_timeout`` and the
authentication and TLS of ``prometheus``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from ..catalogue import (
    DAG_ID,
    INVENTORY_FOOTPRINT_AGE,
    INVENTORY_UP,
    RETRY_METRICS,
    RETRY_RESUMED,
    RUN_TYPE,
    RUN_TYPE_ASSET_WATCHER,
    STORE,
    TASK_ID,
    Outcome,
    Store,
)
from ..naming import tag_value
from ..shipped import records
from .prometheus import Prometheus, PrometheusError

__all__ = ["Prometheus", "PrometheusError"]  # where the pages' calls come from, and what fails

#: The windows the tab offers, and how long each is.
WINDOWS: Final[dict[str, int]] = {"1h": 3600, "6h": 6 * 3600, "1d": 86400, "7d": 7 * 86400}
DEFAULT_WINDOW: Final = "1d"
#: Every counter the tab shows, in the order of the union (its ``store_metrics_counter`` label).
COUNTERS: Final[tuple[tuple[Store, Outcome], ...]] = tuple(
    (store, outcome) for store in Store for outcome in Outcome
)
#: The ``outcome`` label of the recorded retried attempts: ``retry_resumed``, ``retry_not_resumed``.
RETRY_OUTCOMES: Final[tuple[str, ...]] = tuple(m.name.rsplit(".", 1)[1] for m in RETRY_METRICS)
RESUMED: Final = RETRY_RESUMED.name.rsplit(".", 1)[1]


def _label_value(text: str) -> str:
    """``text`` as a PromQL double-quoted string's content (Go's escapes; Unicode as it is)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def dag_selector(dag_id: str, matchers: str = "") -> str:
    """The DAG's series, as the per-DAG dashboard panels select them (asset watchers left out), of
    the deployment ``matchers`` (``ui_prometheus_selector``, validated) pick."""
    value = _label_value(tag_value(dag_id))
    deployment = f",{matchers}" if matchers else ""
    return f'{{{DAG_ID}="{value}",{RUN_TYPE}!="{RUN_TYPE_ASSET_WATCHER}"{deployment}}}'


def calls_expr(dag_id: str, window: str, prefix: str, matchers: str = "") -> str:
    """Calls of every counter in ``window``, per task, store and outcome: the recorded calls the
    dashboards' panels read (the series of ``prefix``), summed over the window (exact: each
    interval's calls once); and, their outcomes apart, the recorded retried attempts, summed the
    same way. ``matchers``: as ``dag_selector``'s."""
    per_task = f"sum by ({TASK_ID}, store, outcome)"
    selector = dag_selector(dag_id, matchers)
    calls, retries = records.name(records.CALLS, prefix), records.name(records.RETRIES, prefix)
    return (
        f"{per_task} (sum_over_time({calls}{selector}[{window}]))\n"
        f"or {per_task} (sum_over_time({retries}{selector}[{window}]))"
    )


@dataclass(frozen=True)
class Calls:
    """A DAG's calls in a window: task_id (as the counters carry it) -> "store.outcome" -> calls."""

    window: str
    expr: str
    tasks: Mapping[str, Mapping[str, float]]
    #: When Prometheus answered (unix seconds).
    at: float
    #: task_id -> ``retry_resumed`` / ``retry_not_resumed`` -> retried attempts (tasks that had any).
    retries: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


def counter_key(store: Store, outcome: Outcome) -> str:
    return f"{store.value}.{outcome.value}"


def read_calls(prometheus: Prometheus, dag_id: str, window: str, prefix: str, matchers: str = "") -> Calls:
    """One query over ``prefix``'s recorded calls; raises ``PrometheusError``."""
    expr = calls_expr(dag_id, window, prefix, matchers)
    tasks: dict[str, dict[str, float]] = defaultdict(dict)
    retries: dict[str, dict[str, float]] = defaultdict(dict)
    for sample in prometheus.query(expr):
        labels = sample["metric"]
        outcome, task_id = labels.get("outcome", ""), labels.get(TASK_ID, "")
        value = float(sample["value"][1])
        if outcome in RETRY_OUTCOMES:
            retries[task_id][outcome] = value
            continue
        # Keyed by the counter's name, not checked against ``Outcome``: a counter the catalogue
        # records with the calls under an outcome of its own counts in the task's total.
        store = Store.of_tag(labels.get("store", ""))
        tasks[task_id][f"{store.value}.{outcome}"] = value
    return Calls(window=window, expr=expr, tasks=dict(tasks), at=time.time(), retries=dict(retries))


def found_ratio(calls: Mapping[str, float], store: Store) -> float | None:
    """``read_found / (read_found + read_absent)`` of one store; ``None`` without reads."""
    found = calls.get(counter_key(store, Outcome.READ_FOUND), 0.0)
    reads = found + calls.get(counter_key(store, Outcome.READ_ABSENT), 0.0)
    return found / reads if reads > 0 else None


def resume_rate(retries: Mapping[str, float]) -> float | None:
    """``retry_resumed / (retry_resumed + retry_not_resumed)``; ``None`` without a retried attempt."""
    resumed = retries.get(RESUMED, 0.0)
    attempts = sum(retries.get(outcome, 0.0) for outcome in RETRY_OUTCOMES)
    return resumed / attempts if attempts > 0 else None


@dataclass(frozen=True)
class InventoryHealth:
    """``store-metrics inventory`` as Prometheus last saw it, per store: footprint age (s), up."""

    age_seconds: Mapping[str, float]
    up: Mapping[str, bool]


def read_inventory_health(prometheus: Prometheus, prefix: str, matchers: str = "") -> InventoryHealth:
    """Two small queries (the freshest replica's age, any replica up) over the deployment
    ``matchers`` pick (as ``dag_selector``'s); raises ``PrometheusError``."""
    deployment = f"{{{matchers}}}" if matchers else ""
    age = prometheus.query(
        f"min by ({STORE}) ({INVENTORY_FOOTPRINT_AGE.prometheus_name(prefix)}{deployment})"
    )
    up = prometheus.query(f"max by ({STORE}) ({INVENTORY_UP.prometheus_name(prefix)}{deployment})")
    return InventoryHealth(
        age_seconds={s["metric"].get(STORE, ""): float(s["value"][1]) for s in age},
        up={s["metric"].get(STORE, ""): float(s["value"][1]) == 1 for s in up},
    )
