"""``count_at``: the option, the task side standing down, and the API server's attribution, in process.

Attribution is driven here at its own level: ``StoreCalls`` with a real
emitter (backend ``none``, read back from its totals) and a lookup function standing in for the
metadata query, whose thread, timing and failures the tests control. The real query against Airflow's
real tables is in ``test_count_at_query.py`` (quick); through the real Airflow app and under
``airflow standalone``, in ``test_count_at_cost.py`` and ``test_count_at_standalone.py``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import threading
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from store_metrics.api_server import (
    UNKNOWN_TAGS,
    WATCHER_TAGS,
    ServerMetrics,
    StateStoreRouteMetrics,
    StoreCalls,
    requester,
)
from store_metrics.api_server.attribution import NULL_TI
from store_metrics.api_server.store_calls import MAX_PENDING_LOOKUPS, MAX_WAITING
from store_metrics.commands import check
from store_metrics.config import options
from store_metrics.config.reader import OptionValues, environment_reader, read_options
from store_metrics.counting import runtime
from store_metrics.emitter import AggregatingEmitter
from store_metrics.errors import ConfigError
from store_metrics.integration import plugin, startup, task_listener
from testbed.endpoints import SilentTcpServer

PYOP = "_PythonDecoratedOperator"


def settings(**env: str) -> OptionValues:
    environ = {f"AIRFLOW__{k.upper()}": v for k, v in env.items()}
    return read_options(environment_reader(environ), environ=environ)


# -- the option ---------------------------------------------------------------------------------


def test_count_at_defaults_to_tasks_and_accepts_api_server() -> None:
    assert settings().count_at == "tasks" and not settings().counts_at_api_server
    s = settings(store_metrics__count_at="API_Server")
    assert s.count_at == "api_server" and s.counts_at_api_server
    assert s.sources["count_at"] == "[store_metrics] count_at"


def test_a_bad_count_at_names_the_accepted_values() -> None:
    with pytest.raises(ConfigError) as err:
        settings(store_metrics__count_at="workers")
    assert str(err.value) == (
        "[store_metrics] count_at = 'workers' is not valid: accepted values are tasks, api_server"
    )


def test_count_at_is_in_the_option_table_and_not_a_configure_argument() -> None:
    option = options.BY_NAME["count_at"]
    assert option.in_config and not option.emitter and not option.backends
    assert "| `count_at` | `tasks`, `api_server` | `tasks` |" in options.markdown_table()
    assert "count_at" not in settings(store_metrics__count_at="api_server").configure_kwargs()


def test_check_says_where_counting_happens() -> None:
    (line,) = check.where_counted(settings())
    assert line.startswith("counting: in each task process (count_at = tasks)")
    lines = check.where_counted(
        settings(
            store_metrics__count_at="api_server",
            store_metrics__backend="otel",
            store_metrics__otel_exporter="prometheus",
            store_metrics__server_prometheus_port="9500",
        )
    )
    assert lines[0].startswith("counting: by the API server workers")
    assert "task processes count nothing" in lines[0] and "dag.test()" in lines[0]
    assert "9500-9515" in lines[1] and "store-metrics-api-server" in lines[1]


def test_store_metrics_check_prints_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    out = io.StringIO()
    code = check.run_check(out, settings(store_metrics__count_at="api_server", store_metrics__backend="none"))
    assert code == check.EXIT_NOWHERE
    text = out.getvalue()
    assert "count_at" in text and "counting: by the API server workers" in text


# -- the task side stands down ----------------------------------------------------------------------


class _Task:
    pass


def _task_instance(context: dict[str, Any]) -> Any:
    return SimpleNamespace(
        stats_tags={"dag_id": "d", "task_id": "t"},
        dag_id="d",
        task_id="t",
        task=_Task(),
        get_template_context=lambda: context,
    )


@pytest.mark.usefixtures("fresh_plugin_state")
def test_count_at_api_server_task_configures_and_wraps_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__STORE_METRICS__COUNT_AT", "api_server")
    monkeypatch.setenv("AIRFLOW__STORE_METRICS__BACKEND", "none")
    store = object()
    context: dict[str, Any] = {"task_state_store": store, "asset_state_store": store}
    plugin.listener.on_task_instance_running(None, _task_instance(context))
    assert context["task_state_store"] is store and context["asset_state_store"] is store
    assert not runtime.is_configured()  # no emitter, no backend, no thread in the task process
    assert task_listener._state.counts_tasks is False and startup._setup.ready is None


@pytest.mark.usefixtures("fresh_plugin_state")
def test_with_count_at_tasks_a_task_wraps_its_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__STORE_METRICS__COUNT_AT", "tasks")
    monkeypatch.setenv("AIRFLOW__STORE_METRICS__BACKEND", "none")
    store = SimpleNamespace(get=lambda key, default=None: default)
    context: dict[str, Any] = {"task_state_store": store, "dag_run": SimpleNamespace(run_type="manual")}
    plugin.listener.on_task_instance_running(None, _task_instance(context))
    assert context["task_state_store"] is not store
    assert runtime.is_configured() and task_listener._state.counts_tasks is True


# -- who made the request -------------------------------------------------------------------------

TI = uuid.UUID("01a227c4-7477-73da-8ac2-9f0094c7c3ef")
ASSET_PATH = "/execution/store/asset/by-name/value"
OTHER = uuid.UUID("01a227c4-7477-73da-8ac2-9f0094c7c3f0")


def bearer(sub: str) -> bytes:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"Bearer {part({'alg': 'HS512'})}.{part({'sub': sub, 'aud': 'x'})}.c2ln".encode()


def scope(path: str, token: Any = None, headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "http", "path": path, "root_path": "", "headers": headers or []}
    if token is not None:
        out["ti_token"] = token
    return out


def test_the_requester_is_the_task_instance_the_execution_api_verified() -> None:
    token = SimpleNamespace(id=TI)  # what JWTBearer leaves on the scope: TIToken(id=..., claims=...)
    assert requester(scope(f"/execution/store/ti/{TI}/k", token), ("task", "get"), 200) == TI
    assert requester(scope("/execution/store/asset/by-name/value", token), ("asset", "set"), 204) == TI
    # A valid token that is not the path's task instance (the API answers 403): its own task instance.
    assert requester(scope(f"/execution/store/ti/{OTHER}/k", token), ("task", "get"), 403) == TI


def test_a_refused_request_has_no_requester() -> None:
    for status in (401, 403):
        assert requester(scope(f"/execution/store/ti/{TI}/k"), ("task", "get"), status) is None
        headers = [(b"authorization", bearer(str(TI)))]
        asset = scope("/execution/store/asset/by-uri/value", None, headers)
        assert requester(asset, ("asset", "get"), status) is None


def test_without_the_scope_token_an_accepted_request_falls_back_to_path_or_subject() -> None:
    assert requester(scope(f"/execution/store/ti/{TI}/dir/k"), ("task", "get"), 404) == TI
    assert requester(scope(f"/execution/store/ti/{TI}"), ("task", "clear"), 204) == TI
    assert requester(scope("/execution/store/ti/not-a-uuid/k"), ("task", "get"), 422) is None
    headers = [(b"Authorization", bearer(str(TI)))]
    assert requester(scope(ASSET_PATH, None, headers), ("asset", "get"), 200) == TI
    garbage = [(b"authorization", b"Bearer not.a-jwt.!")]
    assert requester(scope(ASSET_PATH, None, garbage), ("asset", "get"), 200) is None
    assert requester(scope("/execution/store/asset/by-name/value"), ("asset", "get"), 200) is None


# -- attribution and counting ---------------------------------------------------------------------

TAGS = {"dag_id": "etl", "task_id": "load", "run_type": "scheduled", "operator": PYOP}


class Lookup:
    """Stands in for the metadata query: known task instances, a delay or a gate to wait for, failures;
    records each call."""

    def __init__(
        self,
        known: dict[uuid.UUID, dict[str, str]],
        delay: float = 0.0,
        gate: threading.Event | None = None,
    ) -> None:
        self.known = known
        self.delay = delay
        self.gate = gate
        self.calls: list[tuple[uuid.UUID, str]] = []
        #: For each call with a gate: whether the gate opened (within 10 s).
        self.opened: list[bool] = []
        self.fail = False

    def __call__(self, ti_id: uuid.UUID) -> dict[str, str] | None:
        self.calls.append((ti_id, threading.current_thread().name))
        if self.gate is not None:
            self.opened.append(self.gate.wait(10))
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("database is down")
        return self.known.get(ti_id)


def counts(em: AggregatingEmitter) -> dict[tuple[str, tuple[tuple[str, str], ...]], int]:
    return {(name, tuple(sorted(tags))): n for (name, tags), n in em.snapshot().items()}


def key(name: str, **tags: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, tuple(sorted(tags.items())))


def token_scope(ti: uuid.UUID, store: str = "task") -> dict[str, Any]:
    path = f"/execution/store/ti/{ti}/k" if store == "task" else "/execution/store/asset/by-name/value"
    return scope(path, SimpleNamespace(id=ti))


def test_each_answered_request_counts_as_the_task_side_would(emitter: AggregatingEmitter) -> None:
    calls = StoreCalls(emitter, Lookup({TI: TAGS}))

    async def run() -> None:
        for route, status, outcome in [
            (("task", "get"), 404, "read_absent"),
            (("task", "set"), 204, "write"),
            (("task", "get"), 200, "read_found"),
            (("task", "delete"), 204, "delete"),
            (("task", "clear"), 204, "clear"),
            (("task", "set"), 422, "error"),
            (("asset", "get"), 200, "read_found"),
            (("asset", "clear"), 500, "error"),
        ]:
            calls.count(token_scope(TI, route[0]), route, status, outcome)
        assert await calls.drain(5)

    asyncio.run(run())
    assert counts(emitter) == {
        key("task_state_store.read_absent", **TAGS): 1,
        key("task_state_store.write", **TAGS): 1,
        key("task_state_store.read_found", **TAGS): 1,
        key("task_state_store.delete", **TAGS): 1,
        key("task_state_store.clear", **TAGS): 1,
        key("task_state_store.error", **TAGS, operation="set"): 1,
        key("asset_state_store.read_found", **TAGS): 1,
        key("asset_state_store.error", **TAGS, operation="clear"): 1,
    }
    # All eight arrived before the one query answered: eight misses, one query.
    assert (calls.stats.queries, calls.stats.misses, calls.stats.hits) == (1, 8, 0)


def test_one_query_per_task_instance_however_many_requests_wait_for_it(emitter: AggregatingEmitter) -> None:
    lookup = Lookup({TI: TAGS, OTHER: {**TAGS, "task_id": "other"}}, delay=0.2)
    calls = StoreCalls(emitter, lookup)

    async def run() -> None:
        for _ in range(50):
            calls.count(token_scope(TI), ("task", "set"), 204, "write")
            calls.count(token_scope(OTHER), ("task", "get"), 404, "read_absent")
        assert await calls.drain(5)
        for _ in range(10):  # now cached: counted at once, no task, no query
            calls.count(token_scope(TI), ("task", "set"), 204, "write")
        assert not calls._later

    asyncio.run(run())
    assert sorted(ti for ti, _ in lookup.calls) == sorted([TI, OTHER])
    assert {thread for _, thread in lookup.calls} <= {
        f"store-metrics-attribution_{n}" for n in range(calls.threads)
    }
    assert counts(emitter) == {
        key("task_state_store.write", **TAGS): 60,
        key("task_state_store.read_absent", **{**TAGS, "task_id": "other"}): 50,
    }
    assert (calls.stats.queries, calls.stats.misses, calls.stats.hits) == (2, 100, 10)


def test_the_query_never_holds_the_event_loop(emitter: AggregatingEmitter) -> None:
    """The query runs on a thread of its own: the request path does not wait for it, the loop runs on.

    The query here cannot answer until the event loop has run three more times after the request
    was counted (it waits for a gate only the loop opens). Had the request path or the loop waited
    for the query, the gate would never open: the query would give up after 10 s and say so.
    """
    gate = threading.Event()
    lookup = Lookup({TI: TAGS}, gate=gate)
    calls = StoreCalls(emitter, lookup)

    async def run() -> None:
        calls.count(token_scope(TI), ("task", "get"), 200, "read_found")
        assert lookup.opened == []  # the request path returned with the query still waiting
        for _ in range(3):
            await asyncio.sleep(0)  # the loop runs on meanwhile
        gate.set()
        assert await calls.drain(15)

    asyncio.run(run())
    assert lookup.opened == [True]  # the query saw the gate open: nothing waited for it
    assert lookup.calls[0][1].startswith("store-metrics-attribution")
    assert counts(emitter) == {key("task_state_store.read_found", **TAGS): 1}


def test_the_cache_is_a_bounded_lru(emitter: AggregatingEmitter) -> None:
    ids = [uuid.UUID(int=n + 1) for n in range(5)]
    lookup = Lookup({ti: {**TAGS, "task_id": f"t{n}"} for n, ti in enumerate(ids)})
    calls = StoreCalls(emitter, lookup, cache_size=3)

    async def run() -> None:
        for ti in ids[:3]:
            calls.count(token_scope(ti), ("task", "set"), 204, "write")
            assert await calls.drain(5)
        calls.count(token_scope(ids[0]), ("task", "set"), 204, "write")  # ids[0] is now the newest
        calls.count(token_scope(ids[3]), ("task", "set"), 204, "write")  # evicts ids[1]
        assert await calls.drain(5)
        calls.count(token_scope(ids[1]), ("task", "set"), 204, "write")  # asked again
        assert await calls.drain(5)

    asyncio.run(run())
    assert [ti for ti, _ in lookup.calls] == [ids[0], ids[1], ids[2], ids[3], ids[1]]
    assert calls.stats.evictions == 2 and len(calls.lookups) == 3
    assert calls.cached(ids[0]) is not None and calls.cached(ids[2]) is None


def test_task_instances_of_one_task_share_one_tag_set_and_its_counters(emitter: AggregatingEmitter) -> None:
    mapped = [uuid.UUID(int=n + 1) for n in range(3)]  # three mapped instances of one task
    calls = StoreCalls(emitter, Lookup(dict.fromkeys(mapped, TAGS)))

    async def run() -> None:
        for ti in mapped:
            calls.count(token_scope(ti), ("task", "get"), 404, "read_absent")
        assert await calls.drain(5)

    asyncio.run(run())
    assert len({id(calls.cached(ti)) for ti in mapped}) == 1
    assert counts(emitter) == {key("task_state_store.read_absent", **TAGS): 3}


def test_requests_without_a_task_instance_get_honest_tags(emitter: AggregatingEmitter) -> None:
    lookup = Lookup({})
    calls = StoreCalls(emitter, lookup)

    async def run() -> None:
        calls.count(scope(f"/execution/store/ti/{TI}/k"), ("task", "get"), 403, "error")  # refused
        calls.count(token_scope(NULL_TI, "asset"), ("asset", "set"), 204, "write")  # the null id
        calls.count(token_scope(OTHER, "asset"), ("asset", "get"), 404, "read_absent")  # no such TI
        assert await calls.drain(5)

    asyncio.run(run())
    assert counts(emitter) == {
        key("task_state_store.error", **UNKNOWN_TAGS, operation="get"): 1,
        key("asset_state_store.write", **WATCHER_TAGS): 1,
        key("asset_state_store.read_absent", **UNKNOWN_TAGS): 1,
    }
    assert WATCHER_TAGS["run_type"] == "asset_watcher" and WATCHER_TAGS["dag_id"] == "<none>"
    assert [ti for ti, _ in lookup.calls] == [OTHER]  # only a verified, non-null id is looked up
    assert calls.stats.anonymous == 2


def test_a_failing_database_counts_unknown_and_is_not_asked_per_request(emitter: AggregatingEmitter) -> None:
    lookup = Lookup({TI: TAGS})
    lookup.fail = True
    calls = StoreCalls(emitter, lookup, retry_after=0.5)

    async def run() -> None:
        calls.count(token_scope(TI), ("task", "set"), 204, "write")
        assert await calls.drain(5)
        calls.count(token_scope(TI), ("task", "set"), 204, "write")  # within retry_after: no query
        assert await calls.drain(5)
        lookup.fail = False
        await asyncio.sleep(0.6)
        calls.count(token_scope(TI), ("task", "set"), 204, "write")
        assert await calls.drain(5)

    asyncio.run(run())
    assert len(lookup.calls) == 2 and calls.stats.failures == 1
    assert counts(emitter) == {
        key("task_state_store.write", **UNKNOWN_TAGS): 2,
        key("task_state_store.write", **TAGS): 1,
    }


class HungDatabase:
    """The metadata query against a database that accepts connections and never answers: each call
    connects a real socket to a listener that never sends a byte, and waits on it until the listener
    closes (then fails, as a lost connection does)."""

    def __init__(self, listener: SilentTcpServer) -> None:
        self.listener = listener
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, ti_id: uuid.UUID) -> dict[str, str] | None:
        with self._lock:
            self.calls += 1
        with socket.create_connection(("127.0.0.1", self.listener.port), timeout=60) as conn:
            conn.recv(1)
        raise ConnectionError("the database closed the connection")


def test_a_hung_database_holds_at_most_the_caps_and_counts_the_rest_as_unknown(
    emitter: AggregatingEmitter, caplog: pytest.LogCaptureFixture
) -> None:
    # The run: 500 task instances each making 40 requests, the database hung (not failing).
    listener = SilentTcpServer()
    database = HungDatabase(listener)
    calls = StoreCalls(emitter, database)
    instances = [uuid.UUID(int=i + 1) for i in range(500)]

    async def run() -> None:
        with caplog.at_level(logging.WARNING, logger="store_metrics"):
            for _ in range(40):
                for ti in instances:
                    calls.count(token_scope(ti), ("task", "set"), 204, "write")
        # What waits on the hung database: the caps, not 20,000 tasks and 500 lookups.
        assert len(calls._later) == MAX_WAITING
        assert calls.lookups.pending == MAX_PENDING_LOOKUPS
        assert calls.stats.over_cap == 20_000 - MAX_WAITING
        # Each lookup thread holds one query on the hung database (waited for on the loop, bounded).
        for _ in range(1000):
            if database.calls == calls.threads:
                break
            await asyncio.sleep(0.01)
        assert database.calls == calls.threads
        listener.close()  # the database gives up the connections: every lookup fails now
        assert await calls.drain(30)

    try:
        asyncio.run(run())
    finally:
        listener.close()
    # Every request counted exactly once, all as unknown (the database never named a task).
    assert counts(emitter) == {key("task_state_store.write", **UNKNOWN_TAGS): 20_000}
    behind = [r.getMessage() for r in caplog.records if "lookups are behind" in r.getMessage()]
    assert len(behind) == 1
    assert "requests past them are counted as dag_id=<unknown>" in behind[0]
    assert (
        "over_cap" not in calls.summary() and f"{20_000 - MAX_WAITING} counted as unknown" in calls.summary()
    )


# -- through the middleware ----------------------------------------------------------------------


async def _answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An Execution API stand-in: verifies nothing, leaves the token where Airflow 3.3 leaves it."""
    scope["ti_token"] = SimpleNamespace(id=TI)
    status = 404 if scope["path"].endswith("/missing") else 200 if scope["method"] == "GET" else 204
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b'{"value":1}' if status == 200 else b""})


async def _request(app: Any, method: str, path: str) -> int:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "http", "method": method, "path": path, "root_path": "", "headers": []}, receive, send)
    return int(sent[0]["status"])


@pytest.mark.parametrize("route_metrics", [True, False])
def test_the_middleware_counts_task_series_next_to_the_route_metrics(
    emitter: AggregatingEmitter, route_metrics: bool
) -> None:
    calls = StoreCalls(emitter, Lookup({TI: TAGS}))
    metrics = ServerMetrics(
        emitter, "w-1", tick_ms=10, threshold_ms=100, calls=calls, route_metrics=route_metrics
    )
    app = StateStoreRouteMetrics(_answer, metrics=metrics)

    async def run() -> None:
        assert await _request(app, "GET", f"/execution/store/ti/{TI}/missing") == 404
        assert await _request(app, "PUT", f"/execution/store/ti/{TI}/k") == 204
        assert await _request(app, "GET", f"/execution/store/ti/{TI}/k") == 200
        assert await _request(app, "GET", "/execution/task-instances/x") == 200  # not a store route
        assert await calls.drain(5)

    asyncio.run(run())
    got = counts(emitter)
    task = {k: v for k, v in got.items() if k[0].startswith("task_state_store.")}
    assert task == {
        key("task_state_store.read_absent", **TAGS): 1,
        key("task_state_store.write", **TAGS): 1,
        key("task_state_store.read_found", **TAGS): 1,
    }
    server = sum(v for k, v in got.items() if k[0] == "api_server.state_store.requests")
    assert server == (3 if route_metrics else 0)
    assert (metrics.monitor is not None) is route_metrics


def test_count_at_tasks_the_middleware_counts_no_task_series(emitter: AggregatingEmitter) -> None:
    metrics = ServerMetrics(emitter, "w-1", tick_ms=10, threshold_ms=100)
    app = StateStoreRouteMetrics(_answer, metrics=metrics)
    asyncio.run(_request(app, "PUT", f"/execution/store/ti/{TI}/k"))
    names = {k[0] for k in counts(emitter)}
    assert "api_server.state_store.requests" in names
    assert not {n for n in names if n.startswith(("task_state_store.", "asset_state_store."))}
