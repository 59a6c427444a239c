"""The root middleware at ASGI level, on a small Starlette app shaped like Airflow's.

The app mounts an "Execution API" sub-app at ``/execution`` (as Airflow's core app does) with
the state store routes, an error route, a streaming route and a route that holds the event loop.
Every request is run twice, through the bare app and through the app with the middleware, and
the ASGI messages the server receives must be identical, byte for byte, including errors.
Nothing is mocked: the metrics go to a real emitter (backend ``none``) and are read back from it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route

from store_metrics import api_server, catalogue
from store_metrics.api_server import ServerMetrics, StateStoreRouteMetrics
from store_metrics.config import reader
from store_metrics.counting.runtime import create_emitter
from store_metrics.emitter import AggregatingEmitter

TI = "01a227c4-7477-73da-8ac2-9f0094c7c3ef"
BOOM = RuntimeError("boom")
VALUES: dict[str, Any] = {"k": {"n": 1}, "dir/x": [1, 2, 3]}
WORKER = "w-1"


async def get_value(request: Request) -> Response:
    key = request.path_params["key"]
    if key == "slow":
        time.sleep(0.15)  # holds the event loop while this state store request is in flight
    if key not in VALUES and key != "slow":
        raise HTTPException(404, detail="not found")
    return JSONResponse({"value": VALUES.get(key)}, headers={"x-test": "1"})


async def put_value(request: Request) -> Response:
    await request.body()
    return Response(status_code=204)


async def clear(request: Request) -> Response:
    raise BOOM


async def stream_asset(request: Request) -> Response:
    async def chunks() -> Any:
        for chunk in (b"[1,", b"2,", b"3]"):
            yield chunk

    return StreamingResponse(chunks(), media_type="application/json")


async def other(request: Request) -> Response:
    return PlainTextResponse("other")


def build(metrics: ServerMetrics | None) -> Starlette:
    execution = Starlette(
        routes=[
            Route("/store/ti/{ti}/{key:path}", get_value, methods=["GET"]),
            Route("/store/ti/{ti}/{key:path}", put_value, methods=["PUT"]),
            Route("/store/ti/{ti}", clear, methods=["DELETE"]),
            Route("/store/asset/by-name/value", stream_asset, methods=["GET"]),
        ]
    )
    middleware = [Middleware(StateStoreRouteMetrics, metrics=metrics)] if metrics else []
    return Starlette(
        routes=[Mount("/execution", app=execution), Route("/other", other)], middleware=middleware
    )


async def call(
    app: Any, method: str, path: str, body: tuple[bytes, ...] = (b"",)
) -> tuple[list[dict[str, Any]], BaseException | None]:
    """Run one request; return every message the app sent and the exception it raised, if any."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"test"), (b"content-length", str(sum(map(len, body))).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("test", 80),
    }
    chunks = list(body)

    async def receive() -> dict[str, Any]:
        if chunks:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        await asyncio.get_running_loop().create_future()  # the client never goes away
        raise AssertionError("unreachable")

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))

    try:
        await app(scope, receive, send)
    except Exception as exc:
        return sent, exc
    return sent, None


REQUESTS = [
    ("GET", f"/execution/store/ti/{TI}/k", (b"",)),
    ("GET", f"/execution/store/ti/{TI}/dir/x", (b"",)),
    ("GET", f"/execution/store/ti/{TI}/missing", (b"",)),
    ("PUT", f"/execution/store/ti/{TI}/k", (b'{"value":', b"[1,2,", b"3]}")),
    ("DELETE", f"/execution/store/ti/{TI}", (b"",)),
    ("GET", "/execution/store/asset/by-name/value", (b"",)),
    ("POST", f"/execution/store/ti/{TI}/k", (b"",)),  # 405 from the app, not a state store route
    ("GET", "/other", (b"",)),
]


@pytest.fixture
def metrics() -> Iterator[ServerMetrics]:
    emitter = create_emitter("none", flush_interval=60)
    yield ServerMetrics(emitter, WORKER, tick_ms=5, threshold_ms=100)
    emitter.close(1)


def route_tags(store: str, operation: str, klass: str) -> dict[str, str]:
    return {"store": store, "operation": operation, "status_class": klass, "worker": WORKER}


def requests_by_tags(emitter: AggregatingEmitter) -> dict[tuple[tuple[str, str], ...], int]:
    return {
        tags: n for (name, tags), n in emitter.snapshot().items() if name == catalogue.SERVER_REQUESTS.name
    }


def test_every_message_and_error_passes_through_unchanged(metrics: ServerMetrics) -> None:
    async def both() -> None:
        bare, wrapped = build(None), build(metrics)
        for method, path, body in REQUESTS:
            expected, expected_error = await call(bare, method, path, body)
            got, error = await call(wrapped, method, path, body)
            assert got == expected, (method, path)
            assert repr(error) == repr(expected_error), (method, path)
            if expected_error is not None:
                assert error is BOOM  # the very same exception object reaches the server

    asyncio.run(both())


def test_counts_outcomes_and_body_sizes_to_the_byte(metrics: ServerMetrics) -> None:
    async def run() -> list[list[dict[str, Any]]]:
        app = build(metrics)
        return [(await call(app, method, path, body))[0] for method, path, body in REQUESTS]

    responses = asyncio.run(run())
    emitter = metrics.emitter

    def key(store: str, operation: str, klass: str, outcome: str) -> tuple[tuple[str, str], ...]:
        return (
            ("store", store),
            ("operation", operation),
            ("status_class", klass),
            ("outcome", outcome),
            ("worker", WORKER),
        )

    assert requests_by_tags(emitter) == {
        key("task", "get", "2xx", "read_found"): 2,
        key("task", "get", "4xx", "read_absent"): 1,
        key("task", "set", "2xx", "write"): 1,
        key("task", "clear", "5xx", "error"): 1,
        key("asset", "get", "2xx", "read_found"): 1,
    }
    body_bytes = [
        sum(len(m.get("body", b"")) for m in r if m["type"] == "http.response.body") for r in responses
    ]
    # Request bodies, as the app read them (three chunks of a PUT).
    put = emitter.histogram(catalogue.SERVER_REQUEST_SIZE, route_tags("task", "set", "2xx")).cumulative()
    assert (put.observations, put.total) == (1, float(len(b'{"value":[1,2,3]}')))
    # Response bodies, as sent: two found gets, and the streamed asset get chunk by chunk.
    found = emitter.histogram(catalogue.SERVER_RESPONSE_SIZE, route_tags("task", "get", "2xx")).cumulative()
    assert (found.observations, found.total) == (2, float(body_bytes[0] + body_bytes[1]))
    streamed = emitter.histogram(
        catalogue.SERVER_RESPONSE_SIZE, route_tags("asset", "get", "2xx")
    ).cumulative()
    assert (streamed.observations, streamed.total) == (1, 7.0)
    absent = emitter.histogram(catalogue.SERVER_RESPONSE_SIZE, route_tags("task", "get", "4xx")).cumulative()
    assert absent.total == float(body_bytes[2]) == float(len(b"not found"))
    # One duration per request, tagged by the size class of the value it moved.
    durations: dict[str, int] = {}
    for (name, tags), n in emitter.snapshot().items():
        if name == catalogue.SERVER_DURATION.name and dict(tags)["operation"] == "get":
            durations[dict(tags)["value_size"]] = durations.get(dict(tags)["value_size"], 0) + n
    assert durations == {"le_1KiB": 4}
    clear = emitter.histogram(
        catalogue.SERVER_DURATION, {**route_tags("task", "clear", "5xx"), "value_size": "none"}
    ).cumulative()
    assert clear.observations == 1
    # No id, no key, no path in any tag.
    for _name, tags in emitter.snapshot():
        assert not {v for _, v in tags} & {TI, "k", "dir", "missing", "x"}


def test_an_execution_api_app_of_its_own_is_counted_at_its_root(metrics: ServerMetrics) -> None:
    """The in-process Execution API of dag.test() and the triggerer serves the routes at "/"."""
    execution = build(None).routes[0].app  # the sub-app the core app mounts at /execution
    app = StateStoreRouteMetrics(execution, metrics=metrics, mounted_at="")

    async def run() -> None:
        for method, path, body in REQUESTS:
            if path.startswith("/execution/"):
                await call(app, method, path[len("/execution") :], body)
        # The core app's path means nothing to this app: a 404, and no state store call.
        await call(app, "GET", f"/execution/store/ti/{TI}/k")

    asyncio.run(run())
    assert sum(requests_by_tags(metrics.emitter).values()) == 6
    assert {dict(t)["outcome"] for t in requests_by_tags(metrics.emitter)} == {
        "read_found",
        "read_absent",
        "write",
        "error",
    }


def test_other_requests_reach_the_app_with_the_very_same_callables(metrics: ServerMetrics) -> None:
    seen: list[tuple[Any, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((receive, send))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def run() -> tuple[Any, Any, Any, Any]:
        wrapped = StateStoreRouteMetrics(app, metrics=metrics)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(message: Any) -> None:
            return None

        for path in ("/other", "/api/v2/dags", f"/execution/task-instances/{TI}/run", "/execution/store/x"):
            await wrapped({"type": "http", "method": "GET", "path": path}, receive, send)
        await wrapped({"type": "http", "method": "GET", "path": f"/execution/store/ti/{TI}/k"}, receive, send)
        return receive, send, seen[:4], seen[4]

    receive, send, passed, instrumented = asyncio.run(run())
    assert all(r is receive and s is send for r, s in passed)
    assert instrumented[0] is not receive and instrumented[1] is not send
    assert sum(requests_by_tags(metrics.emitter).values()) == 1


def test_a_stall_during_a_state_store_request_is_counted_for_that_route(metrics: ServerMetrics) -> None:
    async def run() -> None:
        metrics.watch(asyncio.get_running_loop())
        await asyncio.sleep(0.02)
        sent, error = await call(build(metrics), "GET", f"/execution/store/ti/{TI}/slow")
        assert error is None and sent[0]["status"] == 200
        await asyncio.sleep(0.02)  # a few more ticks
        metrics.unwatch()

    asyncio.run(run())
    emitter = metrics.emitter
    long = {tags: n for (name, tags), n in emitter.snapshot().items() if name == catalogue.LONG_STALLS.name}
    route = (("store", "task"), ("operation", "get"), ("worker", WORKER))
    assert long[route] == 1
    # A loaded machine may stall this loop on its own while no request is in flight: such stalls
    # are nobody's (store and operation "none"), never this route's.
    assert set(long) <= {route, (("store", "none"), ("operation", "none"), ("worker", WORKER))}, long
    # The 150 ms the route held the loop, less at most one 5 ms tick: at least 140 ms, recorded
    # above 100 ms. The upper bounds only catch nonsense: the machine decides how late it runs.
    stalls = emitter.histogram(catalogue.LOOP_STALL, {"worker": WORKER}).cumulative()
    big = [i for i, n in enumerate(stalls.counts) if n and i > 0 and stalls.bounds[i - 1] >= 100]
    assert big and max(stalls.sums[i] for i in big) >= 140, (stalls.counts, stalls.sums)
    peak = emitter.gauge(catalogue.LOOP_STALL_MAX, {"worker": WORKER}).take()
    assert peak is not None and 140 <= peak.value <= 10_000


def test_the_stall_monitor_measures_a_blocked_loop_and_ticks_on(metrics: ServerMetrics) -> None:
    ticks: list[tuple[float, float]] = []  # (how late, when due)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        monitor = api_server.LoopMonitor(loop, 5, lambda ms, due: ticks.append((ms, due)))
        monitor.start()
        await asyncio.sleep(0.05)
        blocked = len(ticks)
        time.sleep(0.2)  # the loop can do nothing for 200 ms
        while len(ticks) < blocked + 3:  # the stalled tick and two after it
            await asyncio.sleep(0.005)
        monitor.stop()

    asyncio.run(run())
    late = [ms for ms, _ in ticks]
    stalled = late.index(max(late))
    # A tick was due at most 5 ms into the 200 ms: it ran at least 195 ms late (the upper bound
    # only catches nonsense: the machine decides how late it runs).
    assert 195 <= late[stalled] <= 10_000, late
    # Rescheduled from when it ran, not from when it was due: the next tick is due one tick after
    # the stalled one ran (a catch-up ticker would have it due 5 ms after the stalled one's due
    # time, and run a burst of ticks ~195, 190, ... ms late).
    (late_ms, due), (_, next_due) = ticks[stalled], ticks[stalled + 1]
    assert next_due == pytest.approx(due + late_ms / 1000 + 0.005, abs=1e-6)
    assert len(ticks) > stalled + 1  # and it ticks on


def test_lifespan_starts_the_monitor_on_the_server_loop_and_shutdown_stops_it(metrics: ServerMetrics) -> None:
    async def run() -> None:
        app = build(metrics)
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        outbox: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            outbox.append(message)

        task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send))
        await inbox.put({"type": "lifespan.startup"})
        while not outbox:
            await asyncio.sleep(0.001)
        assert outbox == [{"type": "lifespan.startup.complete"}]
        assert metrics.monitor is not None and metrics.monitor.running
        assert metrics.monitor.loop is asyncio.get_running_loop()
        await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(task, 5)
        assert outbox[-1] == {"type": "lifespan.shutdown.complete"}
        assert not metrics.monitor.running

    asyncio.run(run())


def test_without_lifespan_the_first_request_starts_the_monitor(metrics: ServerMetrics) -> None:
    async def run() -> None:
        assert metrics.monitor is None
        await call(build(metrics), "GET", "/other")
        assert metrics.monitor is not None and metrics.monitor.loop is asyncio.get_running_loop()
        metrics.unwatch()

    asyncio.run(run())


def test_switched_off_the_middleware_only_passes_requests_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "read_options", lambda: reader.OptionValues(server_metrics=False))
    monkeypatch.setattr(api_server.worker_metrics, "_decided_pid", 0)
    monkeypatch.setattr(api_server.worker_metrics, "_active", None)

    async def run() -> list[dict[str, Any]]:
        app = Starlette(routes=build(None).routes, middleware=[Middleware(StateStoreRouteMetrics)])
        sent, error = await call(app, "GET", f"/execution/store/ti/{TI}/k")
        assert error is None
        return sent

    assert asyncio.run(run())[0]["status"] == 200
    assert api_server.server_metrics() is None
