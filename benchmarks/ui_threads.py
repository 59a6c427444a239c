"""14. Airflow's synchronous routes while the State store tab waits on a Prometheus that never answers.

The views' app as the plugin builds it, mounted at ``/store-metrics`` beside a plain ``def`` route (what
Airflow's synchronous routes are: FastAPI runs them on the server's one shared thread pool) on a real
uvicorn server in this process; the tab's Prometheus (``ui_prometheus_url``) is a TCP listener that
accepts and never answers (``ui_timeout`` at its default, 5 s). Airflow's authentication is replaced by
stand-ins of the same shape (an async user dependency, a synchronous per-DAG one) that let everyone in.

Three measurements of the sync route's latency, sequential requests: idle; while ``TABS`` tab
requests for the same DAG's calls are waiting (**now**: the app's own handlers); and the same while
the tab is served **as before**: a ``def`` route calling the same sources synchronously, as the views'
handlers did (on the shared pool, waiting on the cache's lock without a bound).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.request
from typing import Any, TypedDict

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from store_metrics.config.reader import environment_reader, read_options
from store_metrics.ui import access, sources
from store_metrics.ui import app as ui_app
from store_metrics.ui.payload import calls_payload
from testbed.endpoints import SilentTcpServer
from testbed.ports import free_port
from testbed.waiting import wait_until

from .common import log

TABS = 45
IDLE_REQUESTS, QUICK_IDLE = 50, 10
DURING_REQUESTS = 20
UI_TIMEOUT = "5"
TAB_PATH = "/store-metrics/api/dags/orders/calls?window=1h"
#: Where the app finds Airflow's authentication (replaced by stand-ins for the run, then put back).
_AUTH: tuple[tuple[Any, str], ...] = (
    (access, "user_dependency"),
    (ui_app, "user_dependency"),
    (ui_app, "dag_reader_dependency"),
)


class Arm(TypedDict):
    latencies_ms: list[float]  # the sync route's, sequential
    tab_answers: int  # tab requests answered by the end
    prometheus_connections: int  # queries the tab requests made


class UiThreads(TypedDict):
    quick: bool
    tabs: int
    ui_timeout_s: float
    idle_ms: list[float]
    now: Arm
    before: Arm


def _get(port: int, path: str, timeout: float = 60.0) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
        return json.loads(response.read())


def _timed(port: int, path: str) -> float:
    started = time.perf_counter()
    _get(port, path)
    return (time.perf_counter() - started) * 1000.0


def _app(before: bool, checked: list[int]) -> FastAPI:
    async def user() -> dict[str, str]:
        return {"name": "viewer"}

    def may_read_the_dag() -> None:  # synchronous, as Airflow's requires_access_dag is
        checked.append(1)

    for module, name in _AUTH:
        setattr(
            module, name, (lambda: may_read_the_dag) if name == "dag_reader_dependency" else (lambda: user)
        )
    airflow = FastAPI()
    if before:
        views = FastAPI()

        @views.get("/api/dags/{dag_id}/calls")
        def calls(dag_id: str, window: str = "1h") -> JSONResponse:  # the handler as it was: plain def
            may_read_the_dag()
            answer = sources.sources().calls(dag_id, window)
            assert answer is not None
            return JSONResponse(calls_payload(window, answer))

        airflow.mount("/store-metrics", views)
    else:
        airflow.mount("/store-metrics", ui_app.create_app())

    @airflow.get("/sync")
    def sync_route() -> dict[str, bool]:
        return {"ok": True}

    return airflow


def _arm(before: bool, idle: int) -> tuple[list[float], Arm]:
    silent = SilentTcpServer()
    environ = {
        "AIRFLOW__STORE_METRICS__UI_PROMETHEUS_URL": f"http://127.0.0.1:{silent.port}",
        "AIRFLOW__STORE_METRICS__UI_TIMEOUT": UI_TIMEOUT,
    }
    sources._sources = sources.Sources(read_options(environment_reader(environ), environ=environ))
    checked: list[int] = []
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(_app(before, checked), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    answers: list[Any] = []
    try:
        wait_until(lambda: server.started, timeout=30)
        idle_ms = [_timed(port, "/sync") for _ in range(idle)]
        tabs = [threading.Thread(target=lambda: answers.append(_get(port, TAB_PATH))) for _ in range(TABS)]
        for tab in tabs:
            tab.start()
        wait_until(lambda: len(checked) >= min(TABS, 40) and silent.accepted, timeout=30)
        during = [_timed(port, "/sync") for _ in range(DURING_REQUESTS)]
        for tab in tabs:
            tab.join(60)
        connections = len(silent.accepted)
    finally:
        server.should_exit = True
        thread.join(15)
        silent.close()
        sources._sources = None
    return idle_ms, Arm(latencies_ms=during, tab_answers=len(answers), prometheus_connections=connections)


def run(quick: bool) -> UiThreads:
    idle = QUICK_IDLE if quick else IDLE_REQUESTS
    saved = [getattr(module, name) for module, name in _AUTH]
    try:
        idle_ms, now = _arm(False, idle)
        log(f"  ui_threads: now: sync route median {statistics.median(now['latencies_ms']):.1f} ms")
        _, before = _arm(True, 0)
        log(f"  ui_threads: before: sync route median {statistics.median(before['latencies_ms']):.1f} ms")
    finally:
        for (module, name), value in zip(_AUTH, saved, strict=True):
            setattr(module, name, value)
    return UiThreads(
        quick=quick, tabs=TABS, ui_timeout_s=float(UI_TIMEOUT), idle_ms=idle_ms, now=now, before=before
    )
