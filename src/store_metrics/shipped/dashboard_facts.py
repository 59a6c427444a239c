"""What the Grafana and Datadog builders share: titles, labels, the watchers' tag, the links.

Both dashboards answer the same questions over the same labels; each fact is here once.
"""

from __future__ import annotations

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store
from store_metrics.shipped import DASHBOARD_UID

__all__ = [
    "ALL_OUTCOMES",
    "BOTH",
    "COMPLETED",
    "DAG_ID",
    "DOCS",
    "FILTERS",
    "OPERATION",
    "OPERATOR",
    "READS",
    "RUN_TYPE",
    "TABLE_BY",
    "TASK_ID",
    "TEAM_NAME",
    "TITLE",
    "UID",
    "WATCHER",
    "WATCHER_NOTE",
    "store_word",
]

TITLE = "Airflow state store usage (store-metrics)"
#: The Grafana dashboard's uid: the alerts' dashboard_url opens /d/<UID>/.
UID = DASHBOARD_UID
#: The user documentation: dashboards and alerts, and a runbook per alert under runbooks/.
DOCS = "https://store-metrics.github.io/airflow-store-metrics/alerts/"

DAG_ID, TASK_ID, RUN_TYPE, OPERATOR, TEAM_NAME, OPERATION = (
    catalogue.DAG_ID,
    catalogue.TASK_ID,
    catalogue.RUN_TYPE,
    catalogue.OPERATOR,
    catalogue.TEAM_NAME,
    catalogue.OPERATION,
)
#: The filters both dashboards offer, in order (team first: it narrows the others).
FILTERS: tuple[str, ...] = (TEAM_NAME, DAG_ID, TASK_ID, OPERATOR, RUN_TYPE)
#: Grouping of the "by DAG and task" tables.
TABLE_BY: tuple[str, ...] = (DAG_ID, TASK_ID, OPERATOR, RUN_TYPE)
BOTH = (Store.TASK, Store.ASSET)
READS = (Outcome.READ_FOUND, Outcome.READ_ABSENT)
COMPLETED = (Outcome.READ_FOUND, Outcome.READ_ABSENT, Outcome.WRITE, Outcome.DELETE, Outcome.CLEAR)
ALL_OUTCOMES = (*COMPLETED, Outcome.ERROR)

#: The asset watchers' calls in the triggerer: the Triggers row keeps to this tag, the per-DAG
#: panels and widgets leave it out (a watcher belongs to no DAG: it would show as DAG "none").
WATCHER = (RUN_TYPE, catalogue.RUN_TYPE_ASSET_WATCHER)
WATCHER_NOTE = (
    " An asset watcher's trigger belongs to no DAG: its calls carry run_type asset_watcher, "
    f"dag_id `{catalogue.DAG_ID_NONE}`, task_id = the watched asset's name and operator = the "
    "trigger's class."
)


def store_word(store: Store) -> str:
    """``task`` or ``asset``: the ``store`` label of the recorded calls, and the word in titles."""
    return store.value.split("_")[0]
