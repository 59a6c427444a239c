"""The FastAPI app behind the State store views, mounted by the API server at ``/store-metrics``.

Routes (every one needs an authenticated user, ``access``):

* ``GET /dags/{dag_id}``: the tab's page (``dag.html``), loaded by the UI's iframe;
* ``GET /``: the deployment page (``deployment.html``);
* ``GET /static/{name}``: their CSS, JavaScript and icons (package data, no build step);
* ``GET /api/dags/{dag_id}/footprint``: the DAG's footprint (403 unless the user may read the DAG);
* ``GET /api/dags/{dag_id}/calls?window=1d``: the DAG's calls per task from Prometheus (same access);
* ``GET /api/deployment``: the deployment page's data, for what the user may read.

No OpenAPI document or docs page is served (they would be routes without authentication). Handlers
are ``async``: they never run on the API server's shared thread pool, where Airflow's own sync routes
run (a Prometheus that never answers once held all of it); the reads run on the views' own few
threads and are waited for on the event loop, each for a bounded time (``sources``). The JSON
is never cached by the browser (it depends on who asks).

Imported only when the API server asks for the plugin's apps (``views``), so FastAPI and
Airflow's API modules are imported here at the top, where FastAPI resolves the handlers' annotations.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any, Final

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import JSONResponse, Response

from .access import dag_reader_dependency, may_read_assets, readable_dag_ids, user_dependency
from .cache import Busy
from .calls import DEFAULT_WINDOW, WINDOWS
from .payload import calls_payload, dag_payload, deployment_payload
from .sources import sources

#: The files the pages load, and their content types. Nothing else under static/ is served.
STATIC: Final[dict[str, str]] = {
    "dag.html": "text/html; charset=utf-8",
    "deployment.html": "text/html; charset=utf-8",
    "store-metrics.css": "text/css; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "dag.js": "text/javascript; charset=utf-8",
    "deployment.js": "text/javascript; charset=utf-8",
    "icon.svg": "image/svg+xml",
    "icon-dark.svg": "image/svg+xml",
}
_HEADERS: Final = {
    "X-Content-Type-Options": "nosniff",
    # Scripts and styles from this app only; framed only by Airflow's own pages (same origin).
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'self'",
}
_NO_STORE: Final = {"Cache-Control": "no-store"}


@functools.cache
def static_file(name: str) -> bytes:
    return (resources.files(__package__) / "static" / name).read_bytes()


def create_app() -> FastAPI:
    app = FastAPI(title="store-metrics: State store", docs_url=None, redoc_url=None, openapi_url=None)
    get_user = user_dependency()
    authenticated = [Depends(get_user)]
    reads_dag = [Depends(dag_reader_dependency())]

    def file(name: str) -> Response:
        if name not in STATIC:
            raise HTTPException(404, "Not found")
        return Response(static_file(name), media_type=STATIC[name], headers=_HEADERS)

    @app.get("/", dependencies=authenticated, include_in_schema=False)
    async def deployment_page() -> Response:
        return file("deployment.html")

    @app.get("/dags/{dag_id}", dependencies=authenticated, include_in_schema=False)
    async def dag_page(dag_id: str) -> Response:
        return file("dag.html")

    @app.get("/static/{name}", dependencies=authenticated, include_in_schema=False)
    async def static(name: str) -> Response:
        return file(name)

    @app.get("/api/dags/{dag_id}/footprint", dependencies=reads_dag)
    async def footprint(dag_id: str) -> JSONResponse:
        s = sources()
        body = dag_payload(dag_id, await s.dag_now(dag_id), s.options, s.config_problem)
        return JSONResponse(body, headers=_NO_STORE)

    @app.get("/api/dags/{dag_id}/calls", dependencies=reads_dag)
    async def calls(dag_id: str, window: str = DEFAULT_WINDOW) -> JSONResponse:
        if window not in WINDOWS:
            raise HTTPException(400, f"window must be one of {', '.join(WINDOWS)}")
        answer = await sources().calls_now(dag_id, window)
        if answer is None:
            raise HTTPException(404, "no Prometheus configured ([store_metrics] ui_prometheus_url)")
        return JSONResponse(calls_payload(window, answer), headers=_NO_STORE)

    @app.get("/api/deployment")
    async def deployment(user: Any = Depends(get_user)) -> JSONResponse:  # noqa: B008 - FastAPI's idiom
        s = sources()
        try:
            # The auth manager may ask a database too: on the views' threads, not Airflow's.
            readable = await s.pool.run(readable_dag_ids, user)
            assets = await s.pool.run(may_read_assets, user)
        except Busy as exc:
            raise HTTPException(503, f"store-metrics UI: {exc}; try again") from None
        body = deployment_payload(
            await s.deployment_now(), readable, assets, await s.inventory_health_now(), s.options
        )
        return JSONResponse(body, headers=_NO_STORE)

    return app
