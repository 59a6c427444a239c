"""What ``count_at = api_server`` costs the API server, measured on the real Airflow app and database.

A throwaway Airflow home (SQLite) gets real task instances from ``dag.test()`` runs of the
proposal's scenarios and a mapped task. A fresh process then builds Airflow's real API server app
(``airflow.api_fastapi.app.create_app``, with the plugin's root middleware, ``count_at =
api_server``, backend ``none``), mints real task tokens with Airflow's own JWT generator, and drives
Execution API state store requests through it in process (httpx's ASGI transport):

* **per request, cache hit**: the time attribution adds, measured two ways: the whole request
  through the real app with attribution on and off (blocks interleaved, medians, with an A/A
  control), and the attribution call alone (``StoreCalls.count`` on a cached task instance);
* **per new task instance**: the metadata query (``lookup_task_instance``) on its lookup thread,
  and whether the first request of a task instance waits for it (response time of first requests
  against cached ones);
* **cache behaviour**: every task instance's calls replayed (concurrently per task instance), then
  hits, misses and queries per task instance;
* **memory**: bytes per cache entry at the fixed size (10,000 entries).

The full pass is section 8 of the benchmark page: ``python -m benchmarks --only count_at`` runs
``python tests/test_count_at_cost.py --run OUT full`` (:mod:`benchmarks.count_at`) and renders its
figures with the others'; the test runs a shorter pass and checks the bounds.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
SECRET = "store-metrics-count-at-cost-secret-0123456789abcdef0123456789abcdef"
DAGS = ("state_store_metrics_01", "state_store_metrics_02", "state_store_metrics_03", "example_resumable_job")


# -- setting up: real task instances ------------------------------------------------------------------


def prepare(root: Path) -> dict[str, str]:
    """An Airflow home with real task instances (dag.test() runs); the environment to measure in."""
    sys.path.insert(0, str(TESTS))
    from support.airflow import make_home

    home = make_home(root / "home")
    env = home.env(AIRFLOW__STORE_METRICS__BACKEND="none")
    home.run(root, [*DAGS, "store_metrics_mapped", "store_metrics_two_assets"], env)
    return home.env(
        AIRFLOW__STORE_METRICS__COUNT_AT="api_server",
        AIRFLOW__STORE_METRICS__BACKEND="none",
        AIRFLOW__API_AUTH__JWT_SECRET=SECRET,
    )


def measure(root: Path, quick: bool) -> dict[str, Any]:
    env = prepare(root)
    out = root / "cost.json"
    proc = subprocess.run(
        [sys.executable, __file__, "--measure", str(out), "quick" if quick else "full"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


# -- the measurement (in its own process, with the home's environment) ----------------------------------


def _measure_main(out: Path, quick: bool) -> None:
    import asyncio
    import tracemalloc
    import uuid

    import httpx
    from airflow.api_fastapi.app import create_app
    from airflow.api_fastapi.execution_api.app import _jwt_generator
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from store_metrics.server import StoreCalls, lookup_task_instance, server_metrics
    from store_metrics.server.store_calls import CACHE_SIZE

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.id, TaskInstance.dag_id, TaskInstance.task_id, TaskInstance.operator)
        ).all()
    instances = [(uuid.UUID(str(r[0])), r[1], r[2]) for r in rows]
    # Each task instance's own columns, read here without the query under test.
    operators = {f"{r[1]}.{r[2]}": r[3] for r in rows}
    assert len(instances) >= 8, instances
    found_ti = next(ti for ti, dag, _ in instances if dag == "state_store_metrics_01")  # has "counter"

    app = create_app("all")
    metrics = server_metrics()
    assert metrics is not None and metrics.calls is not None
    calls: StoreCalls = metrics.calls
    generator = _jwt_generator()
    tokens = {ti: generator.generate(extras={"sub": str(ti)}) for ti, _, _ in instances}
    result: dict[str, Any] = {"instances": len(instances), "quick": quick, "operators": operators}

    async def run() -> None:
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

                # 1. Whole requests through the real app, attribution on / off, in pairs (the order
                # alternating), and an A/A control (off / off): medians of the pair differences.
                pairs = 300 if quick else 3000

                async def one(on: bool) -> float:
                    metrics.calls = calls if on else None
                    try:
                        status, seconds = await get(found_ti, "counter")
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
                result["pairs"] = pairs
                result["request_ms"] = statistics.median(off) * 1000
                result["request_added_us"] = statistics.median(added) * 1e6
                result["request_aa_us"] = statistics.median(aa) * 1e6
                result["request_added_us_iqr"] = [q * 1e6 for q in statistics.quantiles(added, n=4)[::2]]

                # 2. The attribution call alone, on a cached task instance, with Airflow's own token object.
                from airflow.api_fastapi.execution_api.datamodels.token import TIClaims, TIToken

                scope = {
                    "type": "http",
                    "path": f"/execution/store/ti/{found_ti}/counter",
                    "root_path": "",
                    "headers": [],
                    "ti_token": TIToken(id=found_ti, claims=TIClaims(scope="execution")),
                }
                n = 20_000 if quick else 200_000
                samples = []
                for _ in range(5 if quick else 15):
                    start = time.perf_counter_ns()
                    for _ in range(n):
                        calls.count(scope, ("task", "get"), 200, "read_found")
                    samples.append((time.perf_counter_ns() - start) / n)
                result["count_hit_ns"] = statistics.median(samples)

                # 3. The metadata query, on its thread, for each task instance (cold cache each time).
                query_ms = []
                loop = asyncio.get_running_loop()
                for _ in range(3 if quick else 20):
                    for ti, _, _ in instances:
                        start = time.perf_counter()
                        tags = await loop.run_in_executor(calls.lookups._pool(), lookup_task_instance, ti)
                        query_ms.append((time.perf_counter() - start) * 1000)
                        assert tags is not None
                result["query_ms"] = statistics.median(query_ms)
                result["query_ms_p90"] = statistics.quantiles(query_ms, n=10)[-1]
                result["tags"] = {
                    f"{dag}.{task}": dict(lookup_task_instance(ti) or {}) for ti, dag, task in instances
                }

                # 4. A task instance's first request (its query follows the response) vs the next one
                # (cached), in pairs; the query is let finish between pairs, so that no query of an
                # earlier pair runs on its thread during a measured request.
                first, cached, first_added = [], [], []
                for _ in range(5 if quick else 40):
                    for ti, _, _ in instances:
                        calls.lookups._cache.pop(ti, None)
                        first.append((await get(ti, "missing"))[1])
                        await calls.drain(10)
                        cached.append((await get(ti, "missing"))[1])
                        first_added.append(first[-1] - cached[-1])
                result["first_request_ms"] = statistics.median(first) * 1000
                result["cached_request_ms"] = statistics.median(cached) * 1000
                result["first_added_us"] = statistics.median(first_added) * 1e6

                # 5. Cache behaviour: every task instance's calls, all instances at once.
                calls.lookups._cache.clear()
                calls.stats.__init__()  # type: ignore[misc]
                per_instance = 10 if quick else 40

                async def task_calls(ti: uuid.UUID) -> None:
                    for i in range(per_instance):
                        await get(ti, f"k{i}")

                await asyncio.gather(*(task_calls(ti) for ti, _, _ in instances))
                await calls.drain(10)
                s = calls.stats
                result["replay"] = {
                    "instances": len(instances),
                    "requests": s.requests,
                    "hits": s.hits,
                    "misses": s.misses,
                    "queries": s.queries,
                    "failures": s.failures,
                    "hit_rate": s.hit_rate,
                    "queries_per_instance": s.queries / len(instances),
                }

    asyncio.run(run())

    # 6. Memory of a full cache: 10,000 task instances of 100 tasks.
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
        store.lookups._cache[uuid.uuid4()] = callers[n % 100]
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    result["cache_size"] = CACHE_SIZE
    result["bytes_per_entry"] = grown / CACHE_SIZE
    emitter.close(1)
    result["load_average"] = list(__import__("os").getloadavg())
    out.write_text(json.dumps(result, indent=2))


# -- the test -----------------------------------------------------------------------------------------


@pytest.mark.airflow
@pytest.mark.slow
def test_attribution_costs_microseconds_per_request_and_one_query_per_task_instance(tmp_path: Path) -> None:
    r = measure(tmp_path, quick=True)
    print(json.dumps(r, indent=2))
    # Exactly one metadata query per task instance, none failed, however many requests.
    replay = r["replay"]
    assert replay["queries"] == replay["instances"] == r["instances"] and replay["failures"] == 0
    assert replay["hits"] + replay["misses"] == replay["requests"] == replay["instances"] * 10
    # The hit path: microseconds on the loop; a real query: milliseconds, on a thread.
    assert r["count_hit_ns"] < 20_000
    assert r["query_ms"] < 100
    # The real query gives every task instance its own dag_id, task_id, run_type (dag.test() runs
    # are manual) and operator, each from its own column, and no team_name (no multi_team).
    assert set(r["tags"]) == set(r["operators"]) and len(r["tags"]) >= 6  # tasks (mapped ones once)
    for name, tags in r["tags"].items():
        dag_id, task_id = name.split(".", 1)  # no DAG id here has a dot
        assert tags == {
            "dag_id": dag_id,
            "task_id": task_id,
            "run_type": "manual",
            "operator": r["operators"][name],
        }, name
    # Operators are the task side's: the class name, not @task's display name.
    assert r["tags"]["state_store_metrics_01.touch_store"]["operator"] == "_PythonDecoratedOperator"
    assert r["tags"]["example_resumable_job.run_batch_job"]["operator"] == "MockBatchOperator"
    assert r["tags"]["store_metrics_mapped.resume_or_start"]["operator"] == "_PythonDecoratedOperator"
    assert r["bytes_per_entry"] < 1000


def test_the_benchmark_page_carries_the_full_pass() -> None:
    from benchmarks.results import load

    saved = load()["sections"]["count_at"]
    assert saved["run"]["mode"] == "full" and saved["data"]["quick"] is False
    page = (TESTS.parent / "docs" / "performance.md").read_text(encoding="utf-8")
    assert "## 8. `count_at = api_server`: what attribution costs the API server" in page


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":  # in the prepared home's environment
        _measure_main(Path(sys.argv[2]), sys.argv[3] == "quick")
    elif len(sys.argv) == 4 and sys.argv[1] == "--run":  # benchmarks.count_at: prepare, measure, save
        import tempfile

        with tempfile.TemporaryDirectory(prefix="count-at-cost-") as tmp:
            measured = measure(Path(tmp), quick=sys.argv[3] == "quick")
        Path(sys.argv[2]).write_text(json.dumps(measured, indent=1), encoding="utf-8")
    else:
        raise SystemExit(__doc__)
