"""5. The state store footprint: what ``store-metrics inventory`` costs the metadata database.

``python -m benchmarks --only inventory``: 1,000,000 task-store rows over 2,000 DAGs on PostgreSQL
(``--quick``: 20,000 rows over 40 DAGs). A throwaway PostgreSQL (``testbed.databases.ThrowawayPostgres``:
``initdb`` + ``pg_ctl`` on a free port, its own data directory, as user ``postgres`` when run as
root) gets Airflow 3.3's real schema from
``airflow db migrate``; the rows are made in SQL with ``generate_series`` (dag runs first, for the
foreign key), then ``VACUUM ANALYZE``. Then, through the product's own code path
(``store_metrics.inventory.Collector`` on Airflow's engine):

* **time per collection**: both aggregate queries and the top-N bounding, repeated, median/min/max,
  and each query's own time as the inventory measures it;
* **the database's own cost**: ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` of the exact statement
  the inventory sends: plan nodes, the index used (if any), execution time, buffers;
* for contrast, one read of every ``value`` into Python (what the inventory never does).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict, final

from testbed.databases import ThrowawayPostgres

from .common import REPO_ROOT, log

FULL = {"dags": 2000, "runs": 5, "tasks": 10, "keys": 10, "assets": 2000, "asset_keys": 5, "repeat": 7}
QUICK = {"dags": 40, "runs": 5, "tasks": 10, "keys": 10, "assets": 40, "asset_keys": 5, "repeat": 2}


class Fill(TypedDict):
    rows: int
    dags: int
    value_bytes: int
    total_size: int
    heap_size: int
    toast_size: int
    expired: int
    asset_rows: int
    asset_size: int
    server_version: str
    shared_buffers: str


class PlanNode(TypedDict):
    depth: int
    label: str
    rows: int | None
    ms: float | None
    loops: int | None
    workers: int | None


class Plan(TypedDict):
    sql: str
    nodes: list[PlanNode]
    indexes: list[str]
    execution_ms: float
    planning_ms: float
    shared_hit: int
    shared_read: int


class Stats(TypedDict):
    n: int
    median: float
    min: float
    max: float


class ForcedPlan(TypedDict):
    """The task table's statement with sequential scans switched off: what an index would cost."""

    labels: list[str]  # plan nodes, outermost first
    execution_ms: float
    buffers: int  # shared buffers hit and read


class Measured(TypedDict):
    collection_ms: Stats  # whole collections, after one warm-up
    query_ms: dict[str, Stats]  # each table's query, as the inventory times it
    series: int
    groups: dict[str, int]
    distinct: dict[str, int]
    plans: dict[str, Plan]  # per table
    forced: ForcedPlan
    full_read_ms: float
    full_read_bytes: int


@final
class Inventory(Measured):
    host: str
    cpus: int
    sizes: dict[str, int]
    data: Fill
    migrate_s: float


@final
class InventorySkipped(TypedDict):
    skipped: str


def airflow_env(url: str, home: Path) -> dict[str, str]:
    """An environment for Airflow commands against ``url`` with ``home`` as AIRFLOW_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_HOME"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        }
    )
    return env


def migrate(env: dict[str, str]) -> float:
    """``airflow db migrate``; returns its wall time in s."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.monotonic() - t0


# -- the rows ------------------------------------------------------------------------------------------

_FILL = """
INSERT INTO dag_run (dag_id, run_id, run_type, run_after, state)
SELECT 'bench_dag_' || lpad(d::text, 4, '0'), 'scheduled__' || r, 'scheduled',
       now() - make_interval(days => r), 'success'
FROM generate_series(1, %(dags)s) d, generate_series(1, %(runs)s) r;

INSERT INTO task_state_store
       (dag_run_id, task_id, map_index, key, dag_id, run_id, value, updated_at, expires_at)
SELECT dr.id, 'task_' || lpad(t::text, 2, '0'), -1, 'key_' || k, dr.dag_id, dr.run_id,
       CASE WHEN (dr.id * 100 + t * 10 + k) %% 1000 = 0
            THEN (SELECT '"' || string_agg(md5(random()::text || g || dr.id), '') || '"'
                  FROM generate_series(1, 625) g)
            ELSE '"' || repeat('v', 10 + (dr.id * 7 + t * 13 + k * 31) %% 200) || '"' END,
       now() - make_interval(mins => (dr.id * 17 + t * 7 + k) %% 43200),
       CASE (dr.id + t + k) %% 10 WHEN 0 THEN NULL
            WHEN 1 THEN now() - interval '1 day' ELSE now() + interval '30 days' END
FROM dag_run dr, generate_series(1, %(tasks)s) t, generate_series(1, %(keys)s) k;

INSERT INTO asset (name, uri, "group", extra, created_at, updated_at)
SELECT 'bench/asset_' || a, 's3://bench/asset_' || a, 'asset', '{}', now(), now()
FROM generate_series(1, %(assets)s) a;

INSERT INTO asset_state_store (asset_id, key, value, updated_at)
SELECT a.id, 'key_' || k, '"' || repeat('w', 10 + (a.id * 11 + k) %% 300) || '"',
       now() - make_interval(mins => (a.id * k) %% 10000)
FROM asset a, generate_series(1, %(asset_keys)s) k;
"""


def fill(pg: ThrowawayPostgres, sizes: dict[str, int]) -> Fill:
    """Make the rows, ``VACUUM ANALYZE``; return counts and sizes."""
    conn = pg.connect()
    t0 = time.monotonic()
    with conn, conn.cursor() as cur:
        cur.execute(_FILL, sizes)
    log(f"[inventory] rows made in {time.monotonic() - t0:.1f} s")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("VACUUM ANALYZE dag_run, task_state_store, asset, asset_state_store")
        cur.execute(
            "SELECT count(*), count(DISTINCT dag_id), sum(octet_length(value)), "
            "pg_total_relation_size('task_state_store'), pg_relation_size('task_state_store'), "
            "count(*) FILTER (WHERE expires_at < now()) FROM task_state_store"
        )
        rows, dags, value_bytes, total_size, heap_size, expired = cur.fetchone()
        cur.execute(
            "SELECT pg_total_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'task_state_store'"
        )
        toast_size = cur.fetchone()[0]
        cur.execute("SELECT count(*), pg_total_relation_size('asset_state_store') FROM asset_state_store")
        asset_rows, asset_size = cur.fetchone()
        cur.execute("SHOW server_version")
        version = cur.fetchone()[0]
        cur.execute("SHOW shared_buffers")
        shared_buffers = cur.fetchone()[0]
    conn.close()
    return Fill(
        rows=rows,
        dags=dags,
        value_bytes=int(value_bytes),
        total_size=total_size,
        heap_size=heap_size,
        toast_size=toast_size,
        expired=expired,
        asset_rows=asset_rows,
        asset_size=asset_size,
        server_version=version,
        shared_buffers=shared_buffers,
    )


# -- measuring -----------------------------------------------------------------------------------------


def _plan_nodes(node: dict[str, Any], depth: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    yield depth, node
    for child in node.get("Plans", ()):
        yield from _plan_nodes(child, depth + 1)


def explain(database: Any, store: Any, *, no_seqscan: bool = False) -> Plan:
    """``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` of the exact statement the inventory sends.

    ``no_seqscan``: with ``SET LOCAL enable_seqscan = off``, to see what an index would cost.
    """
    from store_metrics.inventory.queries import statement

    params = {"now": dt.datetime.now(dt.timezone.utc)} if store.value == "task_state_store" else {}
    return explain_statement(database.engine, statement(store), params, no_seqscan=no_seqscan)


def explain_statement(engine: Any, stmt: Any, values: dict[str, Any], *, no_seqscan: bool = False) -> Plan:
    """``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` of ``stmt`` with its bound ``values``: plan nodes,
    indexes used, execution and planning time, buffers."""
    compiled = stmt.compile(dialect=engine.dialect)
    params = compiled.construct_params({k: v for k, v in values.items() if k in compiled.params})
    with engine.connect() as conn:
        if no_seqscan:
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        raw = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {compiled}", params).scalar()
        conn.rollback()
    plan = (raw if isinstance(raw, list) else json.loads(raw))[0]
    nodes = []
    indexes = set()
    for depth, node in _plan_nodes(plan["Plan"]):
        label = node["Node Type"]
        if node.get("Strategy"):
            label = f"{node['Strategy']} {label}"
        if node.get("Relation Name"):
            label += f" on {node['Relation Name']}"
        if node.get("Index Name"):
            label += f" using {node['Index Name']}"
            indexes.add(node["Index Name"])
        nodes.append(
            PlanNode(
                depth=depth,
                label=label,
                rows=node.get("Actual Rows"),
                ms=node.get("Actual Total Time"),
                loops=node.get("Actual Loops"),
                workers=node.get("Workers Launched"),
            )
        )
    top = plan["Plan"]
    return Plan(
        sql=str(compiled),
        nodes=nodes,
        indexes=sorted(indexes),
        execution_ms=plan["Execution Time"],
        planning_ms=plan["Planning Time"],
        shared_hit=top.get("Shared Hit Blocks", 0),
        shared_read=top.get("Shared Read Blocks", 0),
    )


def _stats(values: list[float]) -> Stats:
    return Stats(n=len(values), median=statistics.median(values), min=min(values), max=max(values))


def measure(repeat: int) -> Measured:
    """Collections through the product's path, EXPLAIN ANALYZE, and the full-read contrast.

    Run in a fresh interpreter (``_measure_in_child``) whose environment names the database:
    Airflow reads its settings once, and the process that runs every section has imported it long
    before, pointed at another database.
    """
    from store_metrics.catalogue import Store
    from store_metrics.inventory import Collector, Database
    from store_metrics.inventory.gauges import snapshot_series

    database = Database.from_airflow(timeout=120)
    collector = Collector(database, top=20)
    walls: list[float] = []
    per_store: dict[str, list[float]] = {s.value: [] for s in Store}
    snapshot = None
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        snapshot = collector.collect()
        wall = (time.perf_counter() - t0) * 1000.0
        if not all(snapshot.up.values()):
            raise RuntimeError(f"a collection failed: {snapshot.problems}")
        if i == 0:
            continue  # the first one warms the pool, the plan cache and the page cache
        walls.append(wall)
        for store, footprint in snapshot.footprints.items():
            per_store[store.value].append(footprint.duration_ms)
    assert snapshot is not None
    series = list(snapshot_series(snapshot))
    groups = {s.value: len(f.groups) for s, f in snapshot.footprints.items()}
    distinct = {s.value: f.distinct for s, f in snapshot.footprints.items()}
    plans = {s.value: explain(database, s) for s in Store}
    no_seqscan = explain(database, Store.TASK, no_seqscan=True)
    forced = ForcedPlan(
        labels=[n["label"] for n in no_seqscan["nodes"]],
        execution_ms=no_seqscan["execution_ms"],
        buffers=no_seqscan["shared_hit"] + no_seqscan["shared_read"],
    )
    # The contrast: every value into Python, sizes computed there (what the inventory never does).
    t0 = time.perf_counter()
    with database.engine.connect() as conn:
        total = 0
        for _, value in conn.exec_driver_sql("SELECT dag_id, value FROM task_state_store"):
            total += len(value.encode())
        conn.rollback()
    full_read_ms = (time.perf_counter() - t0) * 1000.0
    return Measured(
        collection_ms=_stats(walls),
        query_ms={table: _stats(ms) for table, ms in per_store.items()},
        series=len(series),
        groups=groups,
        distinct=distinct,
        plans=plans,
        forced=forced,
        full_read_ms=full_read_ms,
        full_read_bytes=total,
    )


def _measure_in_child(env: dict[str, str], repeat: int) -> Measured:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.inventory", str(repeat)],
        cwd=REPO_ROOT,
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the inventory's measurement failed:\n{proc.stderr[-3000:]}")
    measured: Measured = json.loads(proc.stdout.strip().splitlines()[-1])
    return measured


def run(quick: bool) -> Inventory | InventorySkipped:
    sizes = QUICK if quick else FULL
    reason = ThrowawayPostgres.unavailable()
    if reason:
        return InventorySkipped(skipped=reason)
    pg = ThrowawayPostgres()
    home = Path(tempfile.mkdtemp(prefix="store-metrics-bench-inventory-"))
    try:
        log(f"[inventory] PostgreSQL on port {pg.port}")
        pg.init()
        migrate_s = migrate(airflow_env(pg.url, home))
        log(f"[inventory] airflow db migrate: {migrate_s:.1f} s; filling")
        data = fill(pg, {k: v for k, v in sizes.items() if k != "repeat"})
        log(f"[inventory] {data['rows']:,} task-store rows; measuring")
        measured = _measure_in_child(airflow_env(pg.url, home), sizes["repeat"])
    finally:
        pg.close()
        shutil.rmtree(home, ignore_errors=True)
    return Inventory(
        host=platform.node() or "this machine",
        cpus=os.cpu_count() or 0,
        sizes=sizes,
        data=data,
        migrate_s=migrate_s,
        **measured,
    )


if __name__ == "__main__":  # the measurement's own process: python -m benchmarks.inventory REPEAT
    print(json.dumps(measure(int(sys.argv[1]))))
