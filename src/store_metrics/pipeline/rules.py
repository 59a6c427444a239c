"""``rules.yml`` and ``rules.test.yml``: the task side's Prometheus recording and alerting rules.

Recording rules: per-DAG state store call rates (one series family, labels ``store`` and
``outcome``), reads per write, found ratio, error ratio and errors by method. Alerting rules: a
task writing task state it never reads back, a DAG's error ratio above a threshold, errors in
many DAGs at once. The rules are built from the catalogue; their promtool unit tests are
hand-written (``templates/rules.test.yml``, worked out by hand) with the catalogue's series names
filled in for the prefix.

**Asset watchers** (``run_type="asset_watcher"``, :mod:`store_metrics.triggers`) belong to no DAG:
their calls carry ``dag_id="none"``. The per-DAG rules leave them out (otherwise every watcher
would merge into one DAG called ``none``, and ``StateStoreFailingAcrossDags`` would count it as a
DAG); :mod:`.watcher_rules` has them by trigger class (``operator``) and watched asset
(``task_id``), with the helpers of this module.
"""

from __future__ import annotations

from typing import Any

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store

from . import rule_file, templating
from .promql import ALL_OUTCOMES, COMPLETED, DAG_LEVEL, READS, by, name, name_regex, ratio

__all__ = [
    "CALLS",
    "ERRORS_BY_OPERATION",
    "ERRORS_RATIO",
    "FILENAME",
    "FOUND",
    "NOT_WATCHERS",
    "READS_PER_WRITE",
    "RECORDED",
    "TESTS_FILENAME",
    "WATCHERS",
    "alerting_rules",
    "calls_rules",
    "ratio_rules",
    "recording_rules",
    "render",
    "render_tests",
    "rules_document",
]

FILENAME = "rules.yml"
TESTS_FILENAME = "rules.test.yml"

#: Recorded series (``level:metric:operations``).
CALLS = "dag_id:store_metrics_calls:rate5m"
READS_PER_WRITE = "dag_id:store_metrics_reads_per_write:ratio_rate5m"
FOUND = "dag_id:store_metrics_found:ratio_rate5m"
ERRORS_RATIO = "dag_id:store_metrics_errors:ratio_rate5m"
ERRORS_BY_OPERATION = "dag_id_operation:store_metrics_errors:rate5m"
RECORDED = (CALLS, READS_PER_WRITE, FOUND, ERRORS_RATIO, ERRORS_BY_OPERATION)

#: The selector of the asset watchers' calls, and of everything else (the tasks' calls).
WATCHERS = f'{{{catalogue.RUN_TYPE}="{catalogue.RUN_TYPE_ASSET_WATCHER}"}}'
NOT_WATCHERS = f'{{{catalogue.RUN_TYPE}!="{catalogue.RUN_TYPE_ASSET_WATCHER}"}}'

#: Alert thresholds (edit here, then re-export).
ERROR_RATIO_THRESHOLD = 0.05
DAGS_WITH_ERRORS_THRESHOLD = 3

_HEADER = """\
# Recording rules: per-DAG state store call rates (one series family, labels store + outcome),
# reads per write, found ratio, error ratio and errors by method. Alerting rules: a task writing
# task state it never reads back, a DAG's error ratio above a threshold, errors in many DAGs.
# Asset watchers (run_type="asset_watcher", dag_id="none") are left out: a watcher belongs to an
# asset, not to a DAG (watcher-rules.yml has them by trigger class and watched asset).
# Unit tests: promtool test rules collector/rules.test.yml
"""


def store_label(store: Store) -> str:
    """The ``store`` label value of a recorded series: ``task`` or ``asset``."""
    return "task" if store is Store.TASK else "asset"


def _outcomes(values: tuple[Outcome, ...]) -> str:
    if len(values) == 1:
        return f'outcome="{values[0].value}"'
    return f'outcome=~"{"|".join(o.value for o in values)}"'


def calls_rules(prefix: str, record: str, level: tuple[str, ...], sel: str) -> list[dict[str, Any]]:
    """Calls per second at ``level`` of the series ``sel`` selects, one per store and outcome."""
    return [
        {
            "record": record,
            "expr": f"sum {by(level)}(rate({name(store, outcome, prefix)}{sel}[5m]))",
            "labels": {"store": store_label(store), "outcome": outcome.value},
        }
        for store in Store
        for outcome in ALL_OUTCOMES
    ]


def ratio_rules(calls_record: str, level: tuple[str, ...], records: dict[str, str]) -> list[dict[str, Any]]:
    """Reads per write, found ratio and error ratio, from the recorded call rates ``calls_record``.

    ``records`` maps ``reads_per_write``, ``found`` and ``errors`` to the names to record (a name
    left out is not recorded).
    """
    grouping = (*level, "store")

    def calls(outcomes: tuple[Outcome, ...]) -> str:
        return f"sum {by(grouping)}({calls_record}{{{_outcomes(outcomes)}}})"

    exprs = {
        # Reads (found + absent) per write, where the group wrote in the window.
        "reads_per_write": ratio(calls(READS), calls((Outcome.WRITE,))),
        # read_found / (read_found + read_absent), where the group read in the window.
        "found": ratio(calls((Outcome.READ_FOUND,)), calls(READS)),
        # Calls that raised / all calls (completed + raised).
        "errors": ratio(calls((Outcome.ERROR,)), calls((*COMPLETED, Outcome.ERROR))),
    }
    return [{"record": records[key], "expr": expr} for key, expr in exprs.items() if key in records]


def _errors_by_operation_rules(prefix: str) -> list[dict[str, Any]]:
    """Errors per second by the method that raised (the tasks' calls)."""
    operation_level = (*DAG_LEVEL, catalogue.OPERATION)
    return [
        {
            "record": ERRORS_BY_OPERATION,
            "expr": f"sum {by(operation_level)}(rate({name(store, Outcome.ERROR, prefix)}{NOT_WATCHERS}"
            "[5m]))",
            "labels": {"store": store_label(store)},
        }
        for store in Store
    ]


def recording_rules(prefix: str) -> list[dict[str, Any]]:
    per_dag = {"reads_per_write": READS_PER_WRITE, "found": FOUND, "errors": ERRORS_RATIO}
    return [
        # The tasks' calls per DAG: every run type but the asset watchers'.
        *calls_rules(prefix, CALLS, DAG_LEVEL, NOT_WATCHERS),
        *ratio_rules(CALLS, DAG_LEVEL, per_dag),
        *_errors_by_operation_rules(prefix),
    ]


def _never_read_alert(prefix: str) -> dict[str, Any]:
    task_level = (catalogue.DAG_ID, catalogue.TASK_ID, catalogue.TEAM_NAME)
    write = name(Store.TASK, Outcome.WRITE, prefix)
    reads = name_regex([name(Store.TASK, o, prefix) for o in READS])
    return {
        "alert": "StateStoreTaskStateNeverRead",
        "expr": (
            f"sum {by(task_level)}({write}) > 0\n"
            f"unless on ({', '.join(task_level)})\n"
            f'sum {by(task_level)}({{__name__=~"{reads}"}}) > 0'
        ),
        "for": "1h",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "{{ $labels.dag_id }}.{{ $labels.task_id }} writes task state it never reads back",
            "description": (
                "Task {{ $labels.task_id }} of DAG {{ $labels.dag_id }} has called "
                "task_state_store.set() but no attempt of it has called get(). Task-store state is "
                "only readable by the same task instance's retries, so these writes cannot help a "
                "retry resume: check the operator's resume logic, or drop the writes."
            ),
        },
    }


def _error_rate_alert() -> dict[str, Any]:
    return {
        "alert": "StateStoreErrorRateHigh",
        "expr": f"{ERRORS_RATIO} > {ERROR_RATIO_THRESHOLD}",
        "for": "10m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": (
                "{{ $labels.dag_id }}: {{ $value | humanizePercentage }} of {{ $labels.store }} "
                "store calls fail"
            ),
            "description": (
                "More than "
                f"{ERROR_RATIO_THRESHOLD:.0%}"
                " of DAG {{ $labels.dag_id }}'s {{ $labels.store }} state store calls raised for 10 "
                "minutes. The operation label of "
                f"{ERRORS_BY_OPERATION}"
                " says which method fails."
            ),
        },
    }


def _failing_across_dags_alert() -> dict[str, Any]:
    return {
        "alert": "StateStoreFailingAcrossDags",
        "expr": (
            f'count(sum by ({catalogue.DAG_ID}) ({CALLS}{{outcome="{Outcome.ERROR.value}"}}) > 0)'
            f" >= {DAGS_WITH_ERRORS_THRESHOLD}"
        ),
        "for": "5m",
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": "State store calls fail in {{ $value }} DAGs at once",
            "description": (
                "State store calls raise in several DAGs at the same time: the store itself (the "
                "Execution API or its database) is likely failing, not one DAG."
            ),
        },
    }


def alerting_rules(prefix: str) -> list[dict[str, Any]]:
    return [_never_read_alert(prefix), _error_rate_alert(), _failing_across_dags_alert()]


def rules_document(prefix: str) -> dict[str, Any]:
    return rule_file.document("store-metrics", recording_rules(prefix), alerting_rules(prefix))


def render(prefix: str) -> str:
    """``rules.yml``."""
    return rule_file.render(rules_document(prefix), prefix, _HEADER)


def render_tests(prefix: str) -> str:
    """``rules.test.yml``: promtool unit tests of :func:`render`'s rules (load it from the same folder)."""
    return templating.render(TESTS_FILENAME, prefix)
