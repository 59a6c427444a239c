"""``datadog/monitors/*.json``: metric monitors over the DogStatsD series, for one prefix.

Each file is the body of ``POST /api/v1/monitor``. They carry the task-side alerts of
``collector/rules.yml`` that a Datadog metric query can state:

* ``state-store-error-ratio.json``: a DAG's error ratio above 5 % over 10 minutes (a multi alert,
  one group per ``dag_id``), as ``StateStoreErrorRateHigh``;
* ``state-store-failing.json``: the calls of all DAGs together failing, warning at 5 % and critical
  at 20 % over 5 minutes: the store itself (the Execution API or its database) is likely failing,
  the intent of ``StateStoreFailingAcrossDags``;
* ``state-store-watcher-error-ratio.json``: an asset watcher's error ratio above 5 % over 10
  minutes, one alert per trigger class and watched asset, as ``StateStoreWatcherErrorRateHigh``.

Asset watchers' calls (``run_type:asset_watcher``, ``dag_id:none``) belong to no DAG: the per-DAG
monitor leaves them out (``!run_type:asset_watcher``), the watcher monitor has them alone.

``StateStoreTaskStateNeverRead`` has no monitor: it asks for series that do *not* exist (a task
that writes and never reads), which Prometheus' ``unless`` states and a Datadog metric monitor
cannot. The messages name no notification handle: add yours (``@slack-...``, ``@pagerduty-...``)
before creating them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from store_metrics import catalogue

from ..rule_facts import ERROR_RATIO_THRESHOLD
from .queries import ALL_CALLS, ERRORS, Term, metric_query, scope

__all__ = ["FAILING", "FOLDER", "MONITORS", "RATIO", "WATCHER_RATIO", "monitors", "render"]

FOLDER = "monitors"
RATIO = "state-store-error-ratio.json"
FAILING = "state-store-failing.json"
WATCHER_RATIO = "state-store-watcher-error-ratio.json"
#: The asset watchers' calls in the triggerer.
WATCHERS = ((catalogue.RUN_TYPE, catalogue.RUN_TYPE_ASSET_WATCHER),)
#: Share of all calls (every DAG) that raised: warning, critical.
FAILING_THRESHOLDS = (0.05, 0.2)
TAGS = ["airflow", "store-metrics"]


def _sum(terms_: Sequence[Term], prefix: str, by: Sequence[str], scope_text: str) -> str:
    return " + ".join(metric_query(t, prefix, scope_text, by) for t in terms_)


def _ratio(prefix: str, by: Sequence[str], scope_text: str | None = None) -> str:
    """Errors / all calls, both stores, over ``scope_text`` (default: everything)."""
    text = scope(variables=False) if scope_text is None else scope_text
    return f"({_sum(ERRORS, prefix, by, text)}) / ({_sum(ALL_CALLS, prefix, by, text)})"


def _number(value: float) -> str:
    return f"{value:g}"


def error_ratio_monitor(prefix: str) -> dict[str, Any]:
    threshold = ERROR_RATIO_THRESHOLD
    return {
        "name": "[store-metrics] State store calls fail in DAG {{dag_id.name}}",
        "type": "query alert",
        "query": (
            f"sum(last_10m):{_ratio(prefix, (catalogue.DAG_ID,), scope(variables=False, exclude=WATCHERS))}"
            f" > {_number(threshold)}"
        ),
        "message": (
            "{{#is_alert}}More than "
            f"{threshold:.0%}"
            " of DAG {{dag_id.name}}'s state store calls (task and asset store) raised over the last "
            "10 minutes: {{value}}. The store-metrics dashboard's Errors group shows which method "
            "fails (the operation tag). Asset watchers' calls are not counted here (their own "
            "monitor has them).{{/is_alert}}\n"
            "{{#is_recovery}}DAG {{dag_id.name}}'s state store calls succeed again.{{/is_recovery}}"
        ),
        "tags": TAGS,
        "options": {
            "thresholds": {"critical": threshold},
            "notify_no_data": False,
            "require_full_window": False,
            "include_tags": True,
            "new_group_delay": 60,
        },
    }


def failing_monitor(prefix: str) -> dict[str, Any]:
    warning, critical = FAILING_THRESHOLDS
    return {
        "name": "[store-metrics] The Airflow state store is failing",
        "type": "query alert",
        "query": f"sum(last_5m):{_ratio(prefix, ())} > {_number(critical)}",
        "message": (
            "{{#is_alert}}{{value}} of all state store calls (every DAG, task and asset store) raised "
            "over the last 5 minutes: the store itself (the Execution API or its database) is likely "
            "failing, not one DAG.{{/is_alert}}\n"
            "{{#is_warning}}{{value}} of all state store calls raised over the last 5 minutes."
            "{{/is_warning}}\n"
            "{{#is_recovery}}State store calls succeed again.{{/is_recovery}}"
        ),
        "tags": TAGS,
        "options": {
            "thresholds": {"critical": critical, "warning": warning},
            "notify_no_data": False,
            "require_full_window": False,
            "include_tags": True,
        },
    }


def watcher_error_ratio_monitor(prefix: str) -> dict[str, Any]:
    threshold = ERROR_RATIO_THRESHOLD
    by = (catalogue.OPERATOR, catalogue.TASK_ID)
    return {
        "name": (
            "[store-metrics] State store calls fail in asset watcher {{operator.name}} on {{task_id.name}}"
        ),
        "type": "query alert",
        "query": (
            f"sum(last_10m):{_ratio(prefix, by, scope(WATCHERS, variables=False))} > {_number(threshold)}"
        ),
        "message": (
            "{{#is_alert}}More than "
            f"{threshold:.0%}"
            " of the state store calls of the asset-watcher trigger {{operator.name}} watching "
            "{{task_id.name}} raised over the last 10 minutes, in the triggerer: {{value}}. The "
            "watcher cannot keep its watermark and may miss or repeat events. The store-metrics "
            "dashboard's Triggers group shows which method fails.{{/is_alert}}\n"
            "{{#is_recovery}}Asset watcher {{operator.name}} on {{task_id.name}}: state store calls "
            "succeed again.{{/is_recovery}}"
        ),
        "tags": TAGS,
        "options": {
            "thresholds": {"critical": threshold},
            "notify_no_data": False,
            "require_full_window": False,
            "include_tags": True,
            "new_group_delay": 60,
        },
    }


#: File name -> monitor, in the order they are written.
MONITORS = {RATIO: error_ratio_monitor, FAILING: failing_monitor, WATCHER_RATIO: watcher_error_ratio_monitor}


def monitors(prefix: str = catalogue.DEFAULT_PREFIX) -> dict[str, dict[str, Any]]:
    """Every monitor's definition, by file name."""
    return {name: build(prefix) for name, build in MONITORS.items()}


def render(name: str, prefix: str = catalogue.DEFAULT_PREFIX) -> str:
    """``datadog/monitors/<name>``."""
    return json.dumps(MONITORS[name](prefix), indent=2) + "\n"
