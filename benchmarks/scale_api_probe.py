"""One API server worker's counting, in a process of its own, for deployments too large to drive
through Airflow's Execution API on this machine.

    python -m benchmarks.scale_api_probe TOKENS.json SIZES OUT.json

Runs with the Airflow home's environment and its ``[store_metrics]`` settings (``count_at =
api_server``, ``backend = otel``, ``otel_exporter = prometheus``). What runs is the product's, as an
API server worker builds it: the root middleware (``StateStoreRouteMetrics``) with the worker's own
metrics from the configuration (``server_metrics()``: the emitter, the OTel
backend and its Prometheus endpoint, the attribution with its lookup threads and the metadata query
on the real database). What stands in for Airflow is the app the middleware wraps: where Airflow's
Execution API would check the task token, run the route and answer (about 10 ms of CPU a request
here, which is what makes 150,000 real requests take most of an hour), it leaves the validated token
on the ASGI scope as Airflow's JWT dependency does (``scope["ti_token"]``, Airflow's own ``TIToken``)
and answers as the route does (PUT 204, GET 200 with the value, DELETE 204).

At each size (cumulative, DAG by DAG as in ``benchmarks.scale_setup``'s tokens file) it reads:
the process's RSS, the emitter's series, ``/metrics`` (bytes, the time a scrape takes, and how long
the event loop could not run meanwhile: a 1 ms ticker on the loop, ``testbed.ticker``), the
named and ``overflow`` series, and store-metrics' warnings (the ``max_series`` line).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from testbed.ticker import ticking

from . import scale
from .scale_api import SCRAPES, named_and_overflow

Scope = dict[str, Any]
STATUS = {"PUT": 204, "GET": 200, "DELETE": 204}
VALUE = b'{"value":{"cursor":"2026-12-04T00:00:00+00:00","done":128}}'


def _execution_api() -> Any:
    """The stand-in for Airflow's Execution API behind the middleware (see the module)."""
    from airflow.api_fastapi.execution_api.datamodels.token import TIClaims, TIToken

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        ti = uuid.UUID(scope["path"].split("/")[4])
        scope["ti_token"] = TIToken(id=ti, claims=TIClaims(scope="execution"))
        while (await receive()).get("more_body"):
            pass
        status = STATUS[scope["method"]]
        body = VALUE if status == 200 else b""
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


#: Task instances whose calls are made before waiting for their lookups: below the worker's cap on
#: lookups in flight (``store_calls.MAX_PENDING_LOOKUPS``).
BATCH = 48


async def _request(app: Any, method: str, ti: str) -> None:
    path = f"/execution/store/ti/{ti}/progress"
    scope: Scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
    }
    body = VALUE if method == "PUT" else b""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        return None

    await app(scope, receive, send)


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def _scrape(url: str) -> tuple[int, float, float]:
    """One scrape of ``url`` from another thread: bytes, seconds, and the loop's longest stall (ms)."""
    loop = asyncio.get_running_loop()
    got: list[tuple[list[bytes], float]] = []

    async def fetch() -> None:
        got.append(await loop.run_in_executor(None, scale.fetch_pieces, url))

    async with ticking() as ticker:
        stall = await ticker.stall_ms(fetch())
    pieces, seconds = got[0]
    return len(scale.http_body(b"".join(pieces))), seconds, stall


async def _measure(metrics: Any, url: str, dags: int, warnings: Warnings) -> dict[str, Any]:
    scrapes = [await _scrape(url) for _ in range(SCRAPES)]
    text = scale.fetch(url)[0].decode("utf-8")
    named, overflow, overflow_calls = named_and_overflow(text)
    return {
        "dags": dags,
        "rss": scale.rss_of(os.getpid()),
        "emitter_series": metrics.emitter.series_count,
        "named_series": named,
        "overflow_series": overflow,
        "overflow_calls": overflow_calls,
        "metrics_bytes": scrapes[-1][0],
        "scrape_seconds": [round(s, 4) for _, s, _ in scrapes],
        "stall_ms": [round(m, 1) for _, _, m in scrapes],
        "warnings": list(warnings.lines),
        "summary": metrics.calls.summary(),
    }


async def _run(tokens: list[list[str]], sizes: list[int]) -> dict[str, Any]:
    from store_metrics import logs
    from store_metrics.api_server.attribution import lookup_task_instance
    from store_metrics.api_server.middleware import StateStoreRouteMetrics
    from store_metrics.api_server.worker_metrics import server_metrics

    warnings = Warnings()
    logs.logger.addHandler(warnings)
    metrics = server_metrics()
    if metrics is None or metrics.calls is None:
        raise SystemExit("store-metrics built no API server metrics with count_at = api_server")
    app = StateStoreRouteMetrics(_execution_api())
    lookup_task_instance(uuid.uuid4())  # the database engine, as the first lookup makes it
    port = os.environ["AIRFLOW__STORE_METRICS__SERVER_PROMETHEUS_PORT"]
    url = f"http://127.0.0.1:{port}/metrics"
    measured = [await _measure(metrics, url, 0, warnings)]
    done = 0
    for dags in sizes:
        for i, (ti, _) in enumerate(tokens[done * scale.TASKS : dags * scale.TASKS]):
            for method in ("PUT", "GET", "DELETE"):
                await _request(app, method, ti)
            if i % BATCH == BATCH - 1:
                # Let the lookup threads keep up, as they do between real requests: never more task
                # instances waiting for their lookup than the worker's cap (past it, a request is
                # counted as <unknown>: the probe would measure the cap, not the deployment).
                await metrics.calls.drain(60.0)
        if not await metrics.calls.drain(120.0):
            raise SystemExit("requests were still waiting for their task instance's tags after 120 s")
        measured.append(await _measure(metrics, url, dags, warnings))
        done = dags
    return {"sizes": measured}


def main() -> None:
    tokens = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    sizes = [int(s) for s in sys.argv[2].split(",")]
    result = asyncio.run(_run(tokens, sizes))
    Path(sys.argv[3]).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
