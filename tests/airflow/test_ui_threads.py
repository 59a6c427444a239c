"""The State store views never hold the API server's shared threads, and nobody waits on them long.

Airflow's API server runs its synchronous routes (the Execution API's among them) on one shared
thread pool. The views' handlers once ran there too, as plain ``def`` routes, and waited on their
cache's single-flight lock without a bound: 45 tab requests against a Prometheus that accepts and
never answers held every thread of that pool, and Airflow's own routes waited. Here the views' app,
as the plugin builds it, is mounted beside a synchronous route on a real uvicorn server, and the
tab's Prometheus is a TCP listener that accepts and never answers.

Airflow's authentication is replaced by stand-ins that let the test's user in (the same shape: an
async user dependency, a synchronous per-DAG one): who may see what is
tests/airflow/test_ui_deployment.py's subject, against a real Airflow.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from store_metrics.config.reader import OptionValues, environment_reader, read_options
from store_metrics.ui import access, cache, sources
from store_metrics.ui.cache import Busy, Pool, TtlCache, Unanswered
from testbed.endpoints import SilentTcpServer
from testbed.ports import free_port
from testbed.waiting import wait_until

TAB_REQUESTS = 45


def settings(**env: str) -> OptionValues:
    environ = {f"AIRFLOW__STORE_METRICS__{k.upper()}": v for k, v in env.items()}
    return read_options(environment_reader(environ), environ=environ)


class Server:
    """The views' app mounted at /store-metrics beside a synchronous route, on a real uvicorn."""

    def __init__(self, app: FastAPI) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, timeout=30)

    def get(self, path: str, timeout: float = 60.0) -> tuple[int, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as response:
            return response.status, json.loads(response.read())

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


@pytest.fixture
def hung_prometheus() -> Iterator[SilentTcpServer]:
    silent = SilentTcpServer()
    yield silent
    silent.close()


def test_45_tab_requests_on_a_hung_prometheus_leave_airflows_sync_routes_free(
    monkeypatch: pytest.MonkeyPatch, hung_prometheus: SilentTcpServer
) -> None:
    checked = []

    async def user() -> dict[str, str]:
        return {"name": "viewer"}

    def may_read_the_dag() -> None:  # synchronous, as Airflow's requires_access_dag is
        checked.append(1)

    monkeypatch.setattr(access, "user_dependency", lambda: user)
    monkeypatch.setattr(access, "dag_reader_dependency", lambda: may_read_the_dag)
    from store_metrics.ui import app as ui_app

    monkeypatch.setattr(ui_app, "user_dependency", lambda: user)
    monkeypatch.setattr(ui_app, "dag_reader_dependency", lambda: may_read_the_dag)
    options = settings(ui_prometheus_url=f"http://127.0.0.1:{hung_prometheus.port}", ui_timeout="10")
    views = sources.Sources(options)
    monkeypatch.setattr(sources, "_sources", views)

    airflow = FastAPI()
    airflow.mount("/store-metrics", ui_app.create_app())

    @airflow.get("/sync")
    def sync_route() -> dict[str, bool]:  # a plain def route: the shared thread pool runs it
        return {"ok": True}

    server = Server(airflow)
    answers: list[tuple[int, Any]] = []
    try:
        tabs = [
            threading.Thread(
                target=lambda: answers.append(server.get("/store-metrics/api/dags/orders/calls?window=1h"))
            )
            for _ in range(TAB_REQUESTS)
        ]
        for tab in tabs:
            tab.start()
        wait_until(lambda: len(checked) == TAB_REQUESTS and hung_prometheus.accepted, timeout=30)

        # Airflow's own sync route answers while the tab's Prometheus query still hangs.
        assert server.get("/sync", timeout=30) == (200, {"ok": True})
        assert views._calls.loads == 0  # the query has not ended: it still hangs
        assert len(hung_prometheus.accepted) == 1  # one query for the 45 requests

        for tab in tabs:
            tab.join(30)
        assert len(answers) == TAB_REQUESTS
    finally:
        server.close()
    problems = sorted(body["problem"] for _, body in answers)
    assert all(status == 200 for status, _ in answers)
    assert all(body["tasks"] == [] for _, body in answers)
    # The request that asked Prometheus waited for it up to ui_timeout; the others gave up after a
    # second and said why (no earlier answer to show).
    waited = [p for p in problems if "another request's read of it goes on" in p]
    assert len(waited) == TAB_REQUESTS - 1
    assert all(
        p.startswith(f"querying Prometheus at http://127.0.0.1:{hung_prometheus.port}: ") for p in waited
    )


def test_a_request_that_finds_a_read_under_way_waits_a_bound_and_the_last_answer_stays() -> None:
    now = [0.0]
    kept: TtlCache[str] = TtlCache(ttl=30, clock=lambda: now[0])
    pool = Pool(threads=2, cap=8)
    release = threading.Event()

    def hung_read() -> str:
        assert release.wait(30)
        return "fresh"

    async def scenario() -> None:
        first = await kept.get_async("dag", lambda: "first", pool, wait=0.1, own_wait=5)
        assert first.value == "first"
        now[0] = 31.0  # expired: the next request reads again, and that read hangs
        reading = asyncio.ensure_future(kept.get_async("dag", hung_read, pool, wait=0.1, own_wait=30))
        await asyncio.sleep(0)
        with pytest.raises(Unanswered, match="another request's read of it goes on"):
            await kept.get_async("dag", hung_read, pool, wait=0.1, own_wait=30)
        last = kept.peek("dag")
        assert last is not None and last.value == "first"  # what the page shows meanwhile
        release.set()
        assert (await reading).value == "fresh"

    asyncio.run(scenario())
    assert kept.loads == 2  # the waiter started no read of its own


def test_reads_past_the_cap_are_refused_not_queued() -> None:
    pool = Pool(threads=1, cap=2)
    release = threading.Event()
    held = [pool.submit(release.wait, 30) for _ in range(2)]
    with pytest.raises(Busy):
        pool.submit(release.wait, 30)
    release.set()
    for future in held:
        assert future.result(30)
    wait_until(lambda: pool.pending == 0, timeout=10)
    pool.submit(time.sleep, 0).result(10)  # room again


def test_the_views_pool_is_small_and_its_own() -> None:
    assert (sources.THREADS, sources.PENDING_CAP) == (4, 32)
    assert cache.Pool(1, 1)._executor._thread_name_prefix == "store-metrics-ui"  # type: ignore[attr-defined]
