"""``watcher-rules.yml`` and ``watcher-rules.test.yml``: rules over the asset watchers' calls.

An asset watcher's trigger, in the triggerer, counts its state store calls on the tasks' counters
with ``run_type="asset_watcher"``, ``dag_id="none"``, ``task_id`` = the watched asset's name(s) and
``operator`` = the trigger class (:mod:`store_metrics.triggers`). A watcher belongs to an asset,
not to a DAG: ``rules.yml``'s per-DAG rules leave these calls out, and this file has them by
trigger class and watched asset.

Recording rules: calls per second (labels ``store`` and ``outcome``), the watermark found ratio
and the error ratio, by ``operator`` and ``task_id``. Alerting rule: a watcher's error ratio above
``rules.ERROR_RATIO_THRESHOLD`` for 10 minutes (``StateStoreWatcherErrorRateHigh``). Built with
:mod:`.rules`' helpers; the promtool unit tests are hand-written
(``templates/watcher-rules.test.yml``) with the series names filled in for the prefix.
"""

from __future__ import annotations

from typing import Any

from store_metrics import catalogue

from . import rule_file, templating
from .rules import ERROR_RATIO_THRESHOLD, WATCHERS, calls_rules, ratio_rules

__all__ = [
    "FILENAME",
    "RECORDED",
    "TESTS_FILENAME",
    "WATCHER_CALLS",
    "WATCHER_ERRORS_RATIO",
    "WATCHER_FOUND",
    "WATCHER_LEVEL",
    "alerting_rules",
    "recording_rules",
    "render",
    "render_tests",
    "rules_document",
]

FILENAME = "watcher-rules.yml"
TESTS_FILENAME = "watcher-rules.test.yml"

#: Recorded series (``level:metric:operations``): by trigger class and watched asset.
WATCHER_CALLS = "operator_task_id:store_metrics_watcher_calls:rate5m"
WATCHER_FOUND = "operator_task_id:store_metrics_watcher_found:ratio_rate5m"
WATCHER_ERRORS_RATIO = "operator_task_id:store_metrics_watcher_errors:ratio_rate5m"
RECORDED = (WATCHER_CALLS, WATCHER_FOUND, WATCHER_ERRORS_RATIO)

#: Aggregation level of the watcher rules: the trigger class and the watched asset(s).
WATCHER_LEVEL: tuple[str, ...] = (catalogue.OPERATOR, catalogue.TASK_ID)
WATCHER_ERRORS_FOR = "10m"

_HEADER = """\
# Asset watchers in the triggerer (run_type="asset_watcher", dag_id="none", task_id = the watched
# asset, operator = the trigger class): a watcher belongs to an asset, not to a DAG, so rules.yml's
# per-DAG rules leave its calls out and these rules have them. Recording rules: calls per second
# (labels store + outcome), the watermark found ratio and the error ratio, by trigger class and
# watched asset. Alerting rule: a watcher's error ratio above a threshold.
# Unit tests: promtool test rules collector/watcher-rules.test.yml
"""


def recording_rules(prefix: str) -> list[dict[str, Any]]:
    return [
        *calls_rules(prefix, WATCHER_CALLS, WATCHER_LEVEL, WATCHERS),
        *ratio_rules(WATCHER_CALLS, WATCHER_LEVEL, {"found": WATCHER_FOUND, "errors": WATCHER_ERRORS_RATIO}),
    ]


def _watcher_error_rate_alert() -> dict[str, Any]:
    return {
        "alert": "StateStoreWatcherErrorRateHigh",
        "expr": f"{WATCHER_ERRORS_RATIO} > {ERROR_RATIO_THRESHOLD}",
        "for": WATCHER_ERRORS_FOR,
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": (
                "Asset watcher {{ $labels.operator }} on {{ $labels.task_id }}: "
                "{{ $value | humanizePercentage }} of {{ $labels.store }} store calls fail"
            ),
            "description": (
                "More than "
                f"{ERROR_RATIO_THRESHOLD:.0%}"
                " of the {{ $labels.store }} state store calls of the asset-watcher trigger "
                "{{ $labels.operator }} watching {{ $labels.task_id }} raised for 10 minutes, in the "
                "triggerer: the watcher cannot keep its watermark and may miss or repeat events. The "
                "dashboard's Triggers row shows which method fails (errors by trigger and method)."
            ),
        },
    }


def alerting_rules(prefix: str) -> list[dict[str, Any]]:
    return [_watcher_error_rate_alert()]


def rules_document(prefix: str) -> dict[str, Any]:
    return rule_file.document("store-metrics-watchers", recording_rules(prefix), alerting_rules(prefix))


def render(prefix: str) -> str:
    """``watcher-rules.yml``."""
    return rule_file.render(rules_document(prefix), prefix, _HEADER)


def render_tests(prefix: str) -> str:
    """``watcher-rules.test.yml``: promtool unit tests of :func:`render`'s rules."""
    return templating.render(TESTS_FILENAME, prefix)
