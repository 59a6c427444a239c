"""What each store-metrics component serves, as counters that grow at a fixed rate: the DAG tasks'
calls, the asset watchers' calls (the triggerer) and the API server's own routes and event loop.

A test serves them as the shipped topologies' jobs would scrape them (``test_scoping.py``), or
writes a week of them as OpenMetrics for ``promtool tsdb create-blocks-from openmetrics``
(``test_dashboard_over_days.py``). Every counter grows by its per-minute amount each minute, so the
calls in any whole number of minutes are known without Prometheus.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["COMPONENTS", "Family", "calls", "exposition", "openmetrics"]

TASK = 'dag_id="etl",task_id="extract",run_type="scheduled",operator="PythonOperator"'
WATCHER = 'dag_id="<none>",task_id="orders",run_type="asset_watcher",operator="SqsTrigger"'
WORKER = 'worker="api-0"'
FOOTPRINT_TASK = 'dag_id="etl",task_id="extract"'


@dataclass(frozen=True)
class Family:
    """One metric family: its name, type and series as (labels, growth per minute)."""

    name: str
    kind: str  # counter | gauge | rising (a gauge that grows like a counter) | histogram
    series: tuple[tuple[str, float], ...]


def _counter(name: str, *series: tuple[str, float]) -> Family:
    return Family(name, "counter", tuple(series))


def _histogram(name: str, labels: str, per_bucket: tuple[tuple[str, float], ...]) -> Family:
    """Cumulative buckets (``le``, growth per minute), then ``_sum`` and ``_count``."""
    total = per_bucket[-1][1]
    series = [(f'{labels},le="{le}"', n) for le, n in per_bucket]
    return Family(name, "histogram", (*series, (f"{labels}|sum", total * 5.0), (f"{labels}|count", total)))


def _calls(tags: str, store: str, per_minute: dict[str, float]) -> list[Family]:
    families = []
    for outcome, n in per_minute.items():
        labels = f'{tags},operation="get"' if outcome == "error" else tags
        families.append(_counter(f"airflow_{store}_state_store_{outcome}_total", (labels, n)))
    return families


#: Per component, its families. Tasks: both stores, every outcome, and retried attempts.
COMPONENTS: dict[str, tuple[Family, ...]] = {
    "tasks": (
        *_calls(
            TASK,
            "task",
            {"read_found": 6, "read_absent": 2, "write": 4, "delete": 1, "clear": 1, "error": 1},
        ),
        *_calls(TASK, "asset", {"read_found": 3, "read_absent": 1, "write": 2}),
        _counter("airflow_task_state_store_retry_resumed_total", (TASK, 1)),
        _counter("airflow_task_state_store_retry_not_resumed_total", (TASK, 1)),
    ),
    "watchers": tuple(_calls(WATCHER, "asset", {"read_found": 5, "read_absent": 1, "write": 5, "error": 1})),
    "server": (
        _counter(
            "airflow_api_server_state_store_requests_total",
            (f'store="task",operation="get",outcome="read_found",{WORKER}', 6),
            (f'store="task",operation="set",outcome="write",{WORKER}', 4),
        ),
        _histogram(
            "airflow_api_server_state_store_request_duration_milliseconds",
            f'store="task",operation="get",value_size="le_1KiB",{WORKER}',
            (("5", 4), ("10", 5), ("+Inf", 6)),
        ),
        _histogram(
            "airflow_api_server_state_store_request_size_bytes",
            f'store="task",operation="set",{WORKER}',
            (("1024", 3), ("65536", 4), ("+Inf", 4)),
        ),
        _histogram(
            "airflow_api_server_state_store_response_size_bytes",
            f'store="task",operation="get",{WORKER}',
            (("1024", 5), ("65536", 6), ("+Inf", 6)),
        ),
        _histogram(
            "airflow_api_server_event_loop_stall_milliseconds",
            WORKER,
            (("10", 20), ("100", 21), ("+Inf", 22)),
        ),
        Family("airflow_api_server_event_loop_stall_max_milliseconds", "gauge", ((WORKER, 212.0),)),
        _counter(
            "airflow_api_server_event_loop_long_stalls_total",
            (f'store="task",operation="get",{WORKER}', 1),
        ),
    ),
    # store-metrics inventory: what the state store holds (its values grow), and its own health.
    "inventory": (
        Family("airflow_task_state_store_footprint_entries", "gauge", ((FOOTPRINT_TASK, 10),)),
        Family("airflow_task_state_store_footprint_bytes", "rising", ((FOOTPRINT_TASK, 100),)),
        Family("airflow_task_state_store_footprint_expired_entries", "gauge", ((FOOTPRINT_TASK, 1),)),
        Family("airflow_task_state_store_footprint_external_entries", "gauge", ((FOOTPRINT_TASK, 0),)),
        Family("airflow_task_state_store_footprint_oldest_age_seconds", "gauge", ((FOOTPRINT_TASK, 3600),)),
        Family("airflow_task_state_store_footprint_newest_age_seconds", "gauge", ((FOOTPRINT_TASK, 60),)),
        Family("airflow_asset_state_store_footprint_entries", "gauge", (('asset="orders"', 2),)),
        Family("airflow_asset_state_store_footprint_bytes", "rising", (('asset="orders"', 10),)),
        Family("airflow_state_store_inventory_up", "gauge", (('store="task"', 1), ('store="asset"', 1))),
        Family("airflow_state_store_inventory_footprint_age_seconds", "gauge", (('store="task"', 30),)),
        Family("airflow_state_store_inventory_query_duration_milliseconds", "gauge", (('store="task"', 5),)),
    ),
}


_CALL = re.compile(
    r"airflow_(task|asset)_state_store_(read_found|read_absent|write|delete|clear|error)_total"
)


def calls(components: Sequence[str], minutes: float) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The state store calls ``components`` make in ``minutes``, by series name and labels (the
    model ``support.e2e.expected`` reads); retried attempts are not calls."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for component in components:
        for family in COMPONENTS[component]:
            if _CALL.fullmatch(family.name):
                for labels, n in family.series:
                    pairs = frozenset(re.findall(r'(\w+)="([^"]*)"', labels))
                    out[(family.name, pairs)] = out.get((family.name, pairs), 0.0) + n * minutes
    return out


def _samples(family: Family, minutes: float) -> Iterator[tuple[str, float]]:
    """(series name and labels, value) after ``minutes``: counters grown, gauges as they are."""
    for labels, n in family.series:
        name, selector = family.name, labels
        if "|" in labels:
            selector, suffix = labels.split("|")
            name = f"{family.name}_{suffix}"
        elif family.kind == "histogram":
            name = f"{family.name}_bucket"
        yield f"{name}{{{selector}}}", n if family.kind == "gauge" else n * minutes


def exposition(component: str, minutes: float) -> str:
    """``component``'s endpoint after ``minutes`` of calls, in Prometheus' text format."""
    lines = []
    for family in COMPONENTS[component]:
        lines.append(f"# TYPE {family.name} {'gauge' if family.kind == 'rising' else family.kind}")
        lines += [f"{series} {value:g}" for series, value in _samples(family, minutes)]
    return "\n".join(lines) + "\n"


def openmetrics(scrapes: list[tuple[str, str, str]], start: int, end: int, every: int) -> Iterator[str]:
    """OpenMetrics lines (for ``promtool tsdb create-blocks-from openmetrics``) of ``scrapes``
    ((component, job, cluster) each) sampled every ``every`` seconds from ``start`` to ``end``, with
    their ``up`` series; the counters are 0 at ``start``. The samples of one metric name are
    contiguous, each series' in time order; no TYPE lines (the rules and panels read no metadata).
    Ends with ``# EOF``."""
    by_name: dict[str, list[tuple[str, Family, str]]] = {}
    for component, job, cluster in scrapes:
        target = f'cluster="{cluster}",instance="{component}:9090",job="{job}"'
        by_name.setdefault("up", []).append((target, Family("up", "gauge", (("", 1.0),)), ""))
        for family in COMPONENTS[component]:
            for labels, n in family.series:
                one = Family(family.name, family.kind, ((labels, n),))
                name = next(_samples(one, 0))[0].split("{")[0]
                by_name.setdefault(name, []).append((target, one, labels))
    for members in by_name.values():
        for t in range(start, end + 1, every):
            for target, family, _ in members:
                for series, value in _samples(family, (t - start) / 60):
                    name, selector = series[:-1].split("{", 1)
                    labels = f"{selector},{target}" if selector else target
                    yield f"{name}{{{labels}}} {value:g} {t}"
    yield "# EOF"
