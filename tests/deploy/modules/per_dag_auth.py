"""A test auth manager with per-DAG read permissions: Airflow's SimpleAuthManager, plus a deny list.

Airflow's shipped auth managers that have per-DAG permissions (FAB's, Keycloak's) need a provider
and, for Keycloak, a server; the Simple auth manager that runs here has roles (and teams) but no
per-DAG rule. This subclass keeps everything of the Simple one (its users, passwords, login page
and JWTs) and refuses the DAGs listed for a user in ``STORE_METRICS_TEST_DENIED_DAGS``
(``user:dag_a,dag_b;other:dag_c``), for every method, through ``is_authorized_dag``: the one
method Airflow's ``requires_access_dag`` and ``get_authorized_dag_ids`` ask. It is loaded by the
API server as ``[core] auth_manager = per_dag_auth.PerDagAuthManager`` (this folder on PYTHONPATH).
"""

from __future__ import annotations

import os
from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

ENV = "STORE_METRICS_TEST_DENIED_DAGS"


def denied() -> dict[str, set[str]]:
    rules: dict[str, set[str]] = {}
    for part in filter(None, os.environ.get(ENV, "").split(";")):
        user, _, dags = part.partition(":")
        rules[user.strip()] = {d.strip() for d in dags.split(",") if d.strip()}
    return rules


class PerDagAuthManager(SimpleAuthManager):
    def is_authorized_dag(
        self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None
    ) -> bool:
        dag_id = getattr(details, "id", None)
        if dag_id and dag_id in denied().get(user.username, set()):
            return False
        return bool(
            super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
        )
