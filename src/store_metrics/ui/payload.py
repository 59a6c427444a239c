"""The JSON the pages read: aggregates and names only, never a key or a value.

Each function takes what ``sources`` answered and what the user may see (decided by
``access``), and returns plain data for FastAPI to serialise. Who may see what is applied here
for the deployment page: DAGs the user may not read are left out *before* the top N are taken and
before anything is summed, so neither a row, a total nor a count says anything about them.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Collection, Mapping
from typing import Any

from ..catalogue import Store
from ..config.reader import OptionValues
from ..inventory.footprint import Group
from ..naming import tag_value
from ..shipped import DASHBOARD_UID
from .calls import DEFAULT_WINDOW, RESUMED, WINDOWS, Calls, InventoryHealth, found_ratio, resume_rate
from .reading import DagFootprint, Deployment, Named, total
from .routes import PAGE_ROUTE, TAB_ROUTE
from .sources import Answer

#: How to get the calls, said by the tab when no Prometheus is configured.
NO_PROMETHEUS = (
    "Calls per task and operation, and found ratios, come from the Prometheus that scrapes "
    "store-metrics' counters: set [store_metrics] ui_prometheus_url to its URL (and ui_grafana_url "
    "for a link to the dashboard)."
)


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def group_json(group: Group | None) -> dict[str, Any] | None:
    if group is None:
        return None
    return {
        "entries": group.entries,
        "bytes": group.stored_bytes,
        "value_bytes": group.value_bytes,
        "external": group.external,
        "oldest": _iso(group.oldest),
        "newest": _iso(group.newest),
        "expired": group.expired,
    }


def _rows(groups: tuple[Named, ...], key: str) -> list[dict[str, Any]]:
    return [{key: name, **(group_json(group) or {})} for name, group in groups]


def _freshness(
    answer: Answer[Any], options: OptionValues, read_at: dt.datetime | None, ms: float
) -> dict[str, Any]:
    return {
        "read_at": _iso(read_at),
        "query_ms": round(ms, 1),
        "age_seconds": round(answer.age, 1),
        "cache_ttl": options.ui_cache_ttl,
        "problem": answer.problem or None,
    }


def grafana_link(options: OptionValues, dag_id: str) -> str | None:
    """The dashboard (uid of dashboards/store-metrics.json) filtered on the DAG, as its counters label it."""
    if not options.ui_grafana_url:
        return None
    query = urllib.parse.urlencode({"var-dag_id": tag_value(dag_id)})
    return f"{options.ui_grafana_url}/d/{DASHBOARD_UID}?{query}"


def dag_payload(
    dag_id: str, answer: Answer[DagFootprint], options: OptionValues, config_problem: str
) -> dict[str, Any]:
    fp = answer.value
    return {
        "dag_id": dag_id,
        **_freshness(answer, options, fp.read_at if fp else None, fp.duration_ms if fp else 0.0),
        "config_problem": config_problem or None,
        "tasks": _rows(fp.tasks, "task_id") if fp else [],
        "assets": _rows(fp.assets, "asset") if fp else [],
        "totals": {
            "task": group_json(total(fp.tasks)) if fp else None,
            "asset": group_json(total(fp.assets)) if fp else None,
        },
        "calls": {
            "configured": bool(options.ui_prometheus_url),
            "windows": list(WINDOWS),
            "default_window": DEFAULT_WINDOW,
            "how": None if options.ui_prometheus_url else NO_PROMETHEUS,
        },
        "grafana_url": grafana_link(options, dag_id),
        "page_route": PAGE_ROUTE,
    }


def _retries_json(retries: Mapping[str, float]) -> dict[str, Any]:
    resumed = retries.get(RESUMED, 0.0)
    return {
        "resumed": resumed,
        "started_over": sum(retries.values()) - resumed,
        "resume_rate": resume_rate(retries),
    }


def calls_payload(window: str, answer: Answer[Calls]) -> dict[str, Any]:
    calls = answer.value
    per_task = calls.tasks if calls else {}
    retried = calls.retries if calls else {}
    tasks = []
    for task_id in sorted(set(per_task) | set(retried)):
        counts = per_task.get(task_id, {})
        tasks.append(
            {
                "task_id": task_id,
                "calls": dict(counts),
                "total": sum(counts.values()),
                "found_ratio": {store.value: found_ratio(counts, store) for store in Store},
                "retries": _retries_json(retried.get(task_id, {})),
            }
        )
    return {
        "window": window,
        "query": calls.expr if calls else None,
        "age_seconds": round(answer.age, 1),
        "problem": answer.problem or None,
        "tasks": tasks,
    }


def deployment_payload(
    answer: Answer[Deployment],
    readable: Collection[str],
    may_read_assets: bool,
    health: Answer[InventoryHealth] | None,
    options: OptionValues,
) -> dict[str, Any]:
    """The deployment page for one user: only the DAGs in ``readable``; assets if ``may_read_assets``."""
    dep = answer.value
    top = options.inventory_top
    dags = tuple((d, g) for d, g in (dep.dags if dep else ()) if d in readable)
    expired = sorted(
        ((d, g) for d, g in dags if g.expired), key=lambda item: (-(item[1].expired or 0), item[0])
    )
    every = total(dags)
    payload: dict[str, Any] = {
        **_freshness(answer, options, dep.read_at if dep else None, dep.duration_ms if dep else 0.0),
        "top": top,
        "dags": _rows(dags[:top], "dag_id"),
        "dag_count": len(dags),
        "expired": [{"dag_id": d, "expired": g.expired, "entries": g.entries} for d, g in expired[:top]],
        "totals": {"task": group_json(every)},
        "assets": None,
        "asset_count": None,
        "tab_route": TAB_ROUTE,
        "inventory": _inventory(health),
    }
    if may_read_assets and dep is not None:
        payload["assets"] = [
            {**row, "used_by": [d for d in dep.asset_users.get(row["asset"], ()) if d in readable]}
            for row in _rows(dep.assets, "asset")
        ]
        payload["asset_count"] = dep.asset_count
    return payload


def _inventory(health: Answer[InventoryHealth] | None) -> dict[str, Any]:
    """``store-metrics inventory``'s freshness as Prometheus has it (its gauges), or how to see it."""
    if health is None:
        return {"configured": False, "problem": None, "stores": {}}
    stores: dict[str, dict[str, Any]] = {}
    if health.value is not None:
        ages, up = health.value.age_seconds, health.value.up
        for store in sorted(set(ages) | set(up)):
            stores[store] = {"age_seconds": ages.get(store), "up": up.get(store)}
    return {"configured": True, "problem": health.problem or None, "stores": stores}
