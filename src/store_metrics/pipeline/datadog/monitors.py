"""``datadog/monitors/*.json``: metric monitors over the DogStatsD series, for one prefix.

Each file is the body of ``POST /api/v1/monitor``. They carry the task-side alerts of
``collector/rules.yml`` that a Datadog metric query can state:

* ``state-store-error-ratio.json``: a DAG's error ratio above 5 % over 10 minutes (a multi alert,
  one group per ``dag_id``), as ``StateStoreErrorRateHigh``;
* ``state-store-failing.json``: the calls of all DAGs together failing, warning at 5 % and critical
  at 20 % over 5 minutes: the store itself (the Execution API or its database) is likely failing,
  the intent of ``StateStoreFailingAcrossDags``.

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

from ..rules import ERROR_RATIO_THRESHOLD
from .queries import ALL_CALLS, ERRORS, Term, metric_query, scope

__all__ = ["FAILING", "FOLDER", "MONITORS", "RATIO", "monitors", "render"]

FOLDER = "monitors"
RATIO = "state-store-error-ratio.json"
FAILING = "state-store-failing.json"
#: Share of all calls (every DAG) that raised: warning, critical.
FAILING_THRESHOLDS = (0.05, 0.2)
TAGS = ["airflow", "store-metrics"]


def _sum(terms_: Sequence[Term], prefix: str, by: Sequence[str]) -> str:
    return " + ".join(metric_query(t, prefix, scope(variables=False), by) for t in terms_)


def _ratio(prefix: str, by: Sequence[str]) -> str:
    return f"({_sum(ERRORS, prefix, by)}) / ({_sum(ALL_CALLS, prefix, by)})"


def _number(value: float) -> str:
    return f"{value:g}"


def error_ratio_monitor(prefix: str) -> dict[str, Any]:
    threshold = ERROR_RATIO_THRESHOLD
    return {
        "name": "[store-metrics] State store calls fail in DAG {{dag_id.name}}",
        "type": "query alert",
        "query": f"sum(last_10m):{_ratio(prefix, (catalogue.DAG_ID,))} > {_number(threshold)}",
        "message": (
            "{{#is_alert}}More than "
            f"{threshold:.0%}"
            " of DAG {{dag_id.name}}'s state store calls (task and asset store) raised over the last "
            "10 minutes: {{value}}. The store-metrics dashboard's Errors group shows which method "
            "fails (the operation tag).{{/is_alert}}\n"
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


#: File name -> monitor, in the order they are written.
MONITORS = {RATIO: error_ratio_monitor, FAILING: failing_monitor}


def monitors(prefix: str = catalogue.DEFAULT_PREFIX) -> dict[str, dict[str, Any]]:
    """Every monitor's definition, by file name."""
    return {name: build(prefix) for name, build in MONITORS.items()}


def render(name: str, prefix: str = catalogue.DEFAULT_PREFIX) -> str:
    """``datadog/monitors/<name>``."""
    return json.dumps(MONITORS[name](prefix), indent=2) + "\n"
