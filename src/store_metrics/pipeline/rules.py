"""``rules.yml`` and ``rules.test.yml``: the task side's Prometheus recording and alerting rules.

Recording rules: per-DAG state store call rates (one series family, labels ``store`` and
``outcome``), reads per write, found ratio, error ratio and errors by method. Alerting rules: a
task writing task state it never reads back, a DAG's error ratio above a threshold, errors in
many DAGs at once. The rules are built from the catalogue; their promtool unit tests are
hand-written (``templates/rules.test.yml``, worked out by hand) with the catalogue's series names
filled in for the prefix.
"""

from __future__ import annotations

from typing import Any

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store

from . import templating, yaml_text
from .promql import ALL_OUTCOMES, COMPLETED, DAG_LEVEL, READS, by, name, name_regex, ratio

__all__ = [
    "CALLS",
    "ERRORS_BY_OPERATION",
    "ERRORS_RATIO",
    "FILENAME",
    "FOUND",
    "READS_PER_WRITE",
    "RECORDED",
    "TESTS_FILENAME",
    "alerting_rules",
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

#: Alert thresholds (edit here, then re-export).
ERROR_RATIO_THRESHOLD = 0.05
DAGS_WITH_ERRORS_THRESHOLD = 3

_HEADER = """\
# Recording rules: per-DAG state store call rates (one series family, labels store + outcome),
# reads per write, found ratio, error ratio and errors by method. Alerting rules: a task writing
# task state it never reads back, a DAG's error ratio above a threshold, errors in many DAGs.
# Unit tests: promtool test rules collector/rules.test.yml
"""


def store_label(store: Store) -> str:
    """The ``store`` label value of a recorded series: ``task`` or ``asset``."""
    return "task" if store is Store.TASK else "asset"


def _outcomes(values: tuple[Outcome, ...]) -> str:
    if len(values) == 1:
        return f'outcome="{values[0].value}"'
    return f'outcome=~"{"|".join(o.value for o in values)}"'


def _calls_rules(prefix: str) -> list[dict[str, Any]]:
    """Per-DAG calls per second, one series per store and outcome (errors included)."""
    return [
        {
            "record": CALLS,
            "expr": f"sum {by(DAG_LEVEL)}(rate({name(store, outcome, prefix)}[5m]))",
            "labels": {"store": store_label(store), "outcome": outcome.value},
        }
        for store in Store
        for outcome in ALL_OUTCOMES
    ]


def _ratio_rules() -> list[dict[str, Any]]:
    """Reads per write, found ratio and error ratio, from the recorded call rates."""
    level = (*DAG_LEVEL, "store")

    def calls(outcomes: tuple[Outcome, ...]) -> str:
        return f"sum {by(level)}({CALLS}{{{_outcomes(outcomes)}}})"

    return [
        # Reads (found + absent) per write, where the DAG wrote in the window.
        {"record": READS_PER_WRITE, "expr": ratio(calls(READS), calls((Outcome.WRITE,)))},
        # read_found / (read_found + read_absent), where the DAG read in the window.
        {"record": FOUND, "expr": ratio(calls((Outcome.READ_FOUND,)), calls(READS))},
        # Calls that raised / all calls (completed + raised).
        {"record": ERRORS_RATIO, "expr": ratio(calls((Outcome.ERROR,)), calls((*COMPLETED, Outcome.ERROR)))},
    ]


def _errors_by_operation_rules(prefix: str) -> list[dict[str, Any]]:
    """Errors per second by the method that raised."""
    operation_level = (*DAG_LEVEL, catalogue.OPERATION)
    return [
        {
            "record": ERRORS_BY_OPERATION,
            "expr": f"sum {by(operation_level)}(rate({name(store, Outcome.ERROR, prefix)}[5m]))",
            "labels": {"store": store_label(store)},
        }
        for store in Store
    ]


def recording_rules(prefix: str) -> list[dict[str, Any]]:
    return [*_calls_rules(prefix), *_ratio_rules(), *_errors_by_operation_rules(prefix)]


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
    return {
        "groups": [
            {"name": "store-metrics.rules", "rules": recording_rules(prefix)},
            {"name": "store-metrics.alerts", "rules": alerting_rules(prefix)},
        ]
    }


def render(prefix: str) -> str:
    """``rules.yml``."""
    return yaml_text.dump(rules_document(prefix), templating.generated_header(prefix) + _HEADER)


def render_tests(prefix: str) -> str:
    """``rules.test.yml``: promtool unit tests of :func:`render`'s rules (load it from the same folder)."""
    return templating.render(TESTS_FILENAME, prefix)
