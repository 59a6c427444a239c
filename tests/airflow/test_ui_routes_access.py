"""Every route of the State store app that names a DAG carries Airflow's DAG-read check.

Read from the FastAPI app itself (``store_metrics.ui.app.create_app``, as the API server mounts
it), without starting a deployment: each route's dependencies, all the way down. A route with a
``dag_id`` path or query parameter must depend on Airflow's ``requires_access_dag("GET")`` (which
reads that very parameter), except the tab's page shell, which is checked to answer the same
bytes whatever the DAG (its data comes from the checked routes). Every route needs a signed-in user. The check
itself is shown to catch a route switched to "any signed-in user".

The same rules against a running API server, a real auth manager and a browser:
``test_ui_deployment.py``; this one answers in a second.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from store_metrics.ui import access, app

SECURITY = "airflow.api_fastapi.core_api.security"


def dependencies(dependant: Dependant) -> Iterator[Any]:
    for sub in dependant.dependencies:
        yield sub.call
        yield from dependencies(sub)


def reads_the_dag(call: Any) -> bool:
    """Airflow's ``requires_access_dag("GET")`` on the request's own ``dag_id`` (no fixed DAG)."""
    if getattr(call, "__module__", "") != SECURITY:
        return False
    if getattr(call, "__qualname__", "") != "requires_access_dag.<locals>.inner":
        return False
    bound = inspect.getclosurevars(call).nonlocals
    return (
        bound.get("method") == "GET"
        and bound.get("param_dag_id") is None
        and bound.get("access_entity") is None
    )


def names_a_dag(route: APIRoute) -> bool:
    params = route.dependant.path_params + route.dependant.query_params
    return any(param.name == "dag_id" for param in params)


#: Routes that name a DAG but answer the same bytes for every DAG: the tab's page shell, whose data
#: comes from the checked routes (a user who may not read the DAG sees the 403 of those).
PAGE_SHELLS = ("/dags/{dag_id}",)


def unchecked(fastapi_app: FastAPI) -> list[str]:
    """The routes that name a DAG and would answer a user who may not read it."""
    return [
        route.path
        for route in fastapi_app.routes
        if isinstance(route, APIRoute)
        and names_a_dag(route)
        and route.path not in PAGE_SHELLS
        and not any(reads_the_dag(call) for call in dependencies(route.dependant))
    ]


def test_every_route_naming_a_dag_carries_the_dag_read_check() -> None:
    built = app.create_app()
    routes = [r for r in built.routes if isinstance(r, APIRoute)]
    checked = sorted(
        r.path for r in routes if names_a_dag(r) and any(reads_the_dag(c) for c in dependencies(r.dependant))
    )
    assert checked == ["/api/dags/{dag_id}/calls", "/api/dags/{dag_id}/footprint"]
    assert unchecked(built) == []
    (shell,) = [r for r in routes if r.path in PAGE_SHELLS]
    pages = {
        bytes(_answered(shell.endpoint(dag_id=dag_id)).body) for dag_id in ("orders", "secret", "données")
    }
    assert pages == {app.static_file("dag.html")}  # nothing of any DAG in it
    get_user = access.user_dependency()
    anonymous = [r.path for r in routes if get_user not in list(dependencies(r.dependant))]
    assert anonymous == []  # every route needs a signed-in user (the DAG-read check includes it)


def _answered(result: Any) -> Any:
    """A handler's response, whether the handler is a plain function or a coroutine function."""
    return asyncio.run(result) if inspect.iscoroutine(result) else result


def test_a_route_switched_to_any_signed_in_user_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app, "dag_reader_dependency", access.user_dependency)
    assert unchecked(app.create_app()) == ["/api/dags/{dag_id}/footprint", "/api/dags/{dag_id}/calls"]
