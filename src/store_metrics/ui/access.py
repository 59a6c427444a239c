"""Who may see what: Airflow's own auth manager decides, exactly as for Airflow's own pages.

* Every route needs an authenticated user: Airflow's ``get_user`` dependency reads the UI's JWT
  (the ``_token`` cookie the UI's login sets, sent by the browser with the iframe's requests, which
  are same-origin) or an ``Authorization: Bearer`` token, and answers 401 without one.
* A DAG's data needs what reading the DAG needs: Airflow's ``requires_access_dag("GET")``
  (``is_authorized_dag(method="GET", details=DagDetails(id=dag_id, team_name=...))``), so a user who
  may not see DAG X gets 403 for X, on any auth manager (per-DAG permissions, teams, ...).
* The deployment page lists only the DAGs ``get_authorized_dag_ids(method="GET")`` returns for the
  user, and assets only to a user who may read assets (``is_authorized_asset(method="GET")``, what
  Airflow's own Assets page needs); an asset's "used by" links only name DAGs the user may read.

Airflow is imported when the app is built (in the API server), never at import.
"""

from __future__ import annotations

from typing import Any


def user_dependency() -> Any:
    """FastAPI dependency: the authenticated user (401 without a valid token)."""
    from airflow.api_fastapi.core_api.security import get_user

    return get_user


def dag_reader_dependency() -> Any:
    """FastAPI dependency: 403 unless the user may read the DAG named by the ``dag_id`` path parameter."""
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return requires_access_dag("GET")


def readable_dag_ids(user: Any) -> set[str]:
    from airflow.api_fastapi.app import get_auth_manager

    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))


def may_read_assets(user: Any) -> bool:
    from airflow.api_fastapi.app import get_auth_manager

    return bool(get_auth_manager().is_authorized_asset(method="GET", user=user))
