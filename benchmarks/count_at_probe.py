"""Section 8's measurement, in a fresh process with the prepared Airflow home's environment.

    python -m benchmarks.count_at_probe OUT.json quick|full

Builds Airflow's real API server app (``airflow.api_fastapi.app.create_app``, with the plugin's
root middleware, ``count_at = api_server``, backend ``none``), mints real task tokens with
Airflow's own JWT generator, and drives Execution API state store requests through it in process
(httpx's ASGI transport), then writes the figures ``benchmarks.count_at`` returns.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

#: A state store GET of ``key`` by a task instance: (status, seconds).
Get = Callable[[uuid.UUID, str], Awaitable[tuple[int, float]]]


def _instances() -> list[tuple[uuid.UUID, str, str, str | None]]:
    """Every task instance of the home's database: (id, dag_id, task_id, operator)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.id, TaskInstance.dag_id, TaskInstance.task_id, TaskInstance.operator)
        ).all()
    return [(uuid.UUID(str(r[0])), r[1], r[2], r[3]) for r in rows]


async def _whole_requests(get: Get, metrics: Any, calls: Any, ti: uuid.UUID, pairs: int) -> dict[str, Any]:
    """Whole requests through the real app, attribution on / off, in pairs (the order alternating),
    and an A/A control (off / off): medians of the pair differences."""

    async def one(on: bool) -> float:
        metrics.calls = calls if on else None
        try:
            status, seconds = await get(ti, "counter")
        finally:
            metrics.calls = calls
        assert status == 200
        return seconds

    off, added, aa = [], [], []
    for i in range(pairs):
        if i % 2:
            t_on, t_off = await one(True), await one(False)
        else:
            t_off, t_on = await one(False), await one(True)
        a, b = (await one(False), await one(False))
        off.append(t_off)
        added.append(t_on - t_off)
        aa.append(a - b if i % 2 else b - a)
    return {
        "pairs": pairs,
        "request_ms": statistics.median(off) * 1000,
        "request_added_us": statistics.median(added) * 1e6,
        "request_aa_us": statistics.median(aa) * 1e6,
        "request_added_us_iqr": [q * 1e6 for q in statistics.quantiles(added, n=4)[::2]],
    }


def _count_hit_ns(calls: Any, ti: uuid.UUID, quick: bool) -> float:
    """The attribution call alone, on a cached task instance, with Airflow's own token object."""
    from airflow.api_fastapi.execution_api.datamodels.token import TIClaims, TIToken

    scope = {
        "type": "http",
        "path": f"/execution/store/ti/{ti}/counter",
        "root_path": "",
        "headers": [],
        "ti_token": TIToken(id=ti, claims=TIClaims(scope="execution")),
    }
    n = 20_000 if quick else 200_000
    samples = []
    for _ in range(5 if quick else 15):
        start = time.perf_counter_ns()
        for _ in range(n):
            calls.count(scope, ("task", "get"), 200, "read_found")
        samples.append((time.perf_counter_ns() - start) / n)
    return statistics.median(samples)


async def _queries(calls: Any, instances: list[tuple[uuid.UUID, str, str]], quick: bool) -> dict[str, Any]:
    """The metadata query, on its thread, for each task instance (cold cache each time)."""
    from store_metrics.api_server import lookup_task_instance

    query_ms = []
    loop = asyncio.get_running_loop()
    for _ in range(3 if quick else 20):
        for ti, _, _ in instances:
            start = time.perf_counter()
            tags = await loop.run_in_executor(calls.lookups._pool(), lookup_task_instance, ti)
            query_ms.append((time.perf_counter() - start) * 1000)
            assert tags is not None
    return {
        "query_ms": statistics.median(query_ms),
        "query_ms_p90": statistics.quantiles(query_ms, n=10)[-1],
        "tags": {f"{dag}.{task}": dict(lookup_task_instance(ti) or {}) for ti, dag, task in instances},
    }


async def _first_requests(
    get: Get, calls: Any, instances: list[tuple[uuid.UUID, str, str]], quick: bool
) -> dict[str, Any]:
    """A task instance's first request (its query follows the response) vs the next one (cached), in
    pairs; the query is let finish between pairs, so that no query of an earlier pair runs on its
    thread during a measured request."""
    first, cached, first_added = [], [], []
    for _ in range(5 if quick else 40):
        for ti, _, _ in instances:
            calls.lookups._cache.pop(ti, None)
            first.append((await get(ti, "missing"))[1])
            await calls.drain(10)
            cached.append((await get(ti, "missing"))[1])
            first_added.append(first[-1] - cached[-1])
    return {
        "first_request_ms": statistics.median(first) * 1000,
        "cached_request_ms": statistics.median(cached) * 1000,
        "first_added_us": statistics.median(first_added) * 1e6,
    }


async def _replay(get: Get, calls: Any, instances: list[tuple[uuid.UUID, str, str]], quick: bool) -> Any:
    """Cache behaviour: every task instance's calls, all instances at once."""
    calls.lookups._cache.clear()
    calls.stats.__init__()
    per_instance = 10 if quick else 40

    async def task_calls(ti: uuid.UUID) -> None:
        for i in range(per_instance):
            await get(ti, f"k{i}")

    await asyncio.gather(*(task_calls(ti) for ti, _, _ in instances))
    await calls.drain(10)
    s = calls.stats
    return {
        "instances": len(instances),
        "requests": s.requests,
        "hits": s.hits,
        "misses": s.misses,
        "queries": s.queries,
        "failures": s.failures,
        "hit_rate": s.hit_rate,
        "queries_per_instance": s.queries / len(instances),
    }


async def _through_the_app(app: Any, calls: Any, metrics: Any, quick: bool, result: dict[str, Any]) -> None:
    """Steps 1 to 5, every request through the real app in process."""
    import httpx
    from airflow.api_fastapi.execution_api.app import _jwt_generator

    instances = [(ti, dag, task) for ti, dag, task, _ in _instances()]
    found_ti = next(ti for ti, dag, _ in instances if dag == "state_store_metrics_01")  # has "counter"
    generator = _jwt_generator()  # type: ignore[no-untyped-call]
    tokens = {ti: generator.generate(extras={"sub": str(ti)}) for ti, _, _ in instances}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:

            async def get(ti: uuid.UUID, key: str) -> tuple[int, float]:
                start = time.perf_counter()
                response = await client.get(
                    f"/execution/store/ti/{ti}/{key}", headers={"Authorization": f"Bearer {tokens[ti]}"}
                )
                return response.status_code, time.perf_counter() - start

            # Warm up (imports, JWT validator, connection pool) and fill the cache.
            for ti, _, _ in instances:
                await get(ti, "warm")
            await calls.drain(10)
            result.update(await _whole_requests(get, metrics, calls, found_ti, 300 if quick else 3000))
            result["count_hit_ns"] = _count_hit_ns(calls, found_ti, quick)
            result.update(await _queries(calls, instances, quick))
            result.update(await _first_requests(get, calls, instances, quick))
            result["replay"] = await _replay(get, calls, instances, quick)


def _cache_memory() -> dict[str, Any]:
    """Memory of a full cache: 10,000 task instances of 100 tasks."""
    import tracemalloc

    from store_metrics.api_server import StoreCalls
    from store_metrics.api_server.caller import Attempt
    from store_metrics.api_server.store_calls import CACHE_SIZE
    from store_metrics.counting.runtime import create_emitter

    emitter = create_emitter("none", flush_interval=60)
    store = StoreCalls(emitter, lookup=lambda ti: None)
    callers = [
        store.caller({"dag_id": f"d{n}", "task_id": "t", "run_type": "manual", "operator": "X"})
        for n in range(100)
    ]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for n in range(CACHE_SIZE):
        store.lookups._cache[uuid.uuid4()] = Attempt(callers[n % 100], 1)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    emitter.close(1)
    return {"cache_size": CACHE_SIZE, "bytes_per_entry": grown / CACHE_SIZE}


def measure(out: Path, quick: bool) -> None:
    from airflow.api_fastapi.app import create_app

    from store_metrics.api_server import server_metrics

    instances = _instances()
    assert len(instances) >= 8, instances
    app = create_app("all")
    metrics = server_metrics()
    assert metrics is not None and metrics.calls is not None
    result: dict[str, Any] = {
        "instances": len(instances),
        "quick": quick,
        # Each task instance's own columns, read here without the query under test.
        "operators": {f"{dag}.{task}": operator for _, dag, task, operator in instances},
    }
    asyncio.run(_through_the_app(app, metrics.calls, metrics, quick, result))
    result.update(_cache_memory())
    result["load_average"] = list(os.getloadavg())
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    measure(Path(sys.argv[1]), sys.argv[2] == "quick")
