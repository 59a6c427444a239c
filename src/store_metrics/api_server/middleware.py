"""The FastAPI root middleware: pure ASGI, so every message passes through untouched.

State store requests go through ``ServerMetrics.serve``; every other request costs one
substring test. The stall monitor starts at ASGI lifespan startup (or on the first request). At
lifespan shutdown, requests still waiting for their task instance's tags (``count_at =
api_server``) are counted before the last flush.
"""

from __future__ import annotations

import asyncio

from .. import logs
from .metrics import ServerMetrics
from .routes import (
    EXECUTION_API_MOUNT,
    MARK,
    ASGIApp,
    Message,
    Receive,
    Route,
    Scope,
    Send,
    route_of,
    route_path,
)
from .worker_metrics import server_metrics


class StateStoreRouteMetrics:
    """Pure ASGI root middleware: state store route metrics and the stall monitor (module docs).

    ``mounted_at``: where the wrapped app serves the Execution API (the core app: ``/execution``;
    an Execution API app of its own, such as the in-process one ``dag.test()`` uses: ``""``).
    """

    def __init__(
        self, app: ASGIApp, metrics: ServerMetrics | None = None, mounted_at: str = EXECUTION_API_MOUNT
    ) -> None:
        self.app = app
        # Given: used as is (tests, benchmarks, the demo). Else the worker's own, made on first use.
        self._given = metrics
        self._watching: asyncio.AbstractEventLoop | None = None
        self._mounted_at = mounted_at
        self._mark = mounted_at + MARK[len(EXECUTION_API_MOUNT) :]

    def _metrics(self) -> ServerMetrics | None:
        return self._given if self._given is not None else server_metrics()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if self._watching is None:
                self._watch()
            if self._mark in scope["path"]:
                route = self._route(scope)
                if route is not None:
                    metrics = self._metrics()
                    if metrics is not None:
                        await metrics.serve(self.app, route, scope, receive, send)
                        return
        elif kind == "lifespan":
            await self.app(scope, self._lifespan_receive(receive), send)
            return
        await self.app(scope, receive, send)

    def _route(self, scope: Scope) -> Route | None:
        # The route table speaks in the core app's paths: matched as if mounted there.
        path = route_path(scope)
        if not path.startswith(self._mounted_at):
            return None
        return route_of(scope["method"], EXECUTION_API_MOUNT + path[len(self._mounted_at) :])

    def _watch(self) -> None:
        # The stall monitor belongs to the server's own loop: the one running this request.
        loop = asyncio.get_running_loop()
        self._watching = loop
        metrics = self._metrics()
        if metrics is not None:
            metrics.watch(loop)

    def _lifespan_receive(self, receive: Receive) -> Receive:
        async def watched() -> Message:
            message = await receive()
            kind = message["type"]
            if kind == "lifespan.startup":
                self._watch()
            elif kind == "lifespan.shutdown":
                metrics = self._metrics()
                self._watching = None
                if metrics is not None:
                    metrics.unwatch()
                    calls = metrics.calls
                    if calls is not None:
                        # Requests still waiting for their task instance's tags are counted first.
                        await calls.drain(metrics.emitter.flush_timeout)
                        calls.close()
                        logs.logger.info(
                            "store-metrics: API server worker %s: %s", metrics.worker, calls.summary()
                        )
                    # Hand the last counts on without holding the loop.
                    emitter = metrics.emitter
                    await asyncio.get_running_loop().run_in_executor(
                        None, emitter.flush, emitter.flush_timeout
                    )
            return message

        return watched
