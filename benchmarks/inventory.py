"""5. The state store footprint: what ``store-metrics inventory`` costs the metadata database.

    python -m benchmarks.inventory            # 1,000,000 task-store rows over 2,000 DAGs on PostgreSQL;
                                              # writes its section at the end of docs/performance.md
    python -m benchmarks.inventory --quick    # 20,000 rows over 40 DAGs, prints only

A throwaway PostgreSQL (Debian's ``postgresql``: ``initdb`` + ``pg_ctl`` on a free port, its own
data directory, as user ``postgres`` when run as root) gets Airflow 3.3's real schema from
``airflow db migrate``; the rows are made in SQL with ``generate_series`` (dag runs first, for the
foreign key), then ``VACUUM ANALYZE``. Then, through the product's own code path
(:class:`store_metrics.inventory.Collector` on Airflow's engine):

* **time per collection**: both aggregate queries and the top-N bounding, repeated, median/min/max,
  and each query's own time as the inventory measures it;
* **the database's own cost**: ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` of the exact statement
  the inventory sends: plan nodes, the index used (if any), execution time, buffers;
* for contrast, one read of every ``value`` into Python (what the inventory never does).

The section is written between ``<!-- inventory:start -->`` and ``<!-- inventory:end -->`` at the
end of ``docs/performance.md`` (replaced in place when it is there); ``python -m benchmarks`` keeps
that block, and every other marked block, when it rewrites the page (:func:`keep_section`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import glob
import json
import os
import platform
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .common import REPO_ROOT, free_port, log, md_table

START = "<!-- inventory:start (python -m benchmarks.inventory writes this block; keep it last) -->"
END = "<!-- inventory:end -->"
PAGE = REPO_ROOT / "docs" / "performance.md"

FULL = {"dags": 2000, "runs": 5, "tasks": 10, "keys": 10, "assets": 2000, "asset_keys": 5, "repeat": 7}
QUICK = {"dags": 40, "runs": 5, "tasks": 10, "keys": 10, "assets": 40, "asset_keys": 5, "repeat": 2}


# -- a PostgreSQL of its own ---------------------------------------------------------------------------


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]), reverse=True
    )
    return candidates[0] if candidates else None


class ThrowawayServer:
    """A database server of its own: a temporary directory (data and log), a free port.

    Subclasses start and :meth:`stop` it; :meth:`close` stops it and removes everything.
    """

    def __init__(self, name: str) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix=f"store-metrics-{name}-"))
        self.data = self.root / "data"
        self.logfile = self.root / f"{name}.log"

    def stop(self) -> None:
        raise NotImplementedError

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class ThrowawayPostgres(ThrowawayServer):
    """A PostgreSQL server in a temporary directory on a free port; user ``airflow``, database ``airflow``.

    ``initdb`` and ``postgres`` refuse to run as root: as root they run as the ``postgres`` user
    (``runuser``). :meth:`stop` and :meth:`start` keep the data, :meth:`close` removes it.
    """

    def __init__(self) -> None:
        super().__init__("postgres")
        self.initdb = _pg_bin("initdb")
        self.pg_ctl = _pg_bin("pg_ctl")
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    @staticmethod
    def unavailable() -> str | None:
        """Why no server can be started here, or ``None``."""
        missing = [n for n in ("initdb", "pg_ctl", "postgres") if _pg_bin(n) is None]
        if missing:
            return f"PostgreSQL binaries not found ({', '.join(missing)}): apt-get install -y postgresql"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no 'postgres' user to run the server as"
            if not shutil.which("runuser"):
                return "running as root and runuser is not installed"
        try:
            import psycopg2  # noqa: F401
        except ImportError:
            return "psycopg2 is not installed: pip install psycopg2-binary"
        return None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow@127.0.0.1:{self.port}/airflow"

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {proc.stdout}{proc.stderr}{self.log_tail()}")

    def init(self) -> ThrowawayPostgres:
        assert self.initdb and self.pg_ctl
        self._run(
            self.initdb, "-D", str(self.data), "-A", "trust", "-U", "airflow", "-E", "UTF8", "--no-sync"
        )
        self.start()
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="airflow", dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE airflow")
        conn.close()
        return self

    def start(self) -> None:
        assert self.pg_ctl
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(self.pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.logfile), "-w", "start")

    def stop(self) -> None:
        assert self.pg_ctl
        self._run(self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")

    def connect(self) -> Any:
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user="airflow", dbname="airflow")


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


def fill(pg: ThrowawayPostgres, sizes: dict[str, int]) -> dict[str, Any]:
    """Make the rows, ``VACUUM ANALYZE``; return counts and sizes."""
    conn = pg.connect()
    t0 = time.monotonic()
    with conn, conn.cursor() as cur:
        cur.execute(_FILL, sizes)
    fill_s = time.monotonic() - t0
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
    return {
        "rows": rows,
        "dags": dags,
        "value_bytes": int(value_bytes),
        "total_size": total_size,
        "heap_size": heap_size,
        "toast_size": toast_size,
        "expired": expired,
        "asset_rows": asset_rows,
        "asset_size": asset_size,
        "fill_s": fill_s,
        "server_version": version,
        "shared_buffers": shared_buffers,
    }


# -- measuring -----------------------------------------------------------------------------------------


def _plan_nodes(node: dict[str, Any], depth: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    yield depth, node
    for child in node.get("Plans", ()):
        yield from _plan_nodes(child, depth + 1)


def explain(database: Any, store: Any, *, no_seqscan: bool = False) -> dict[str, Any]:
    """``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` of the exact statement the inventory sends.

    ``no_seqscan``: with ``SET LOCAL enable_seqscan = off``, to see what an index would cost.
    """
    from store_metrics.inventory.queries import statement

    params = {"now": dt.datetime.now(dt.timezone.utc)} if store.value == "task_state_store" else {}
    return explain_statement(database.engine, statement(store), params, no_seqscan=no_seqscan)


def explain_statement(
    engine: Any, stmt: Any, values: dict[str, Any], *, no_seqscan: bool = False
) -> dict[str, Any]:
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
            {
                "depth": depth,
                "label": label,
                "rows": node.get("Actual Rows"),
                "ms": node.get("Actual Total Time"),
                "loops": node.get("Actual Loops"),
                "workers": node.get("Workers Launched"),
            }
        )
    top = plan["Plan"]
    return {
        "sql": str(compiled),
        "nodes": nodes,
        "indexes": sorted(indexes),
        "execution_ms": plan.get("Execution Time"),
        "planning_ms": plan.get("Planning Time"),
        "shared_hit": top.get("Shared Hit Blocks", 0),
        "shared_read": top.get("Shared Read Blocks", 0),
    }


def measure(url: str, repeat: int) -> dict[str, Any]:
    """Collections through the product's path, EXPLAIN ANALYZE, and the full-read contrast."""
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = url
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
    forced = explain(database, Store.TASK, no_seqscan=True)
    # The contrast: every value into Python, sizes computed there (what the inventory never does).
    t0 = time.perf_counter()
    with database.engine.connect() as conn:
        total = 0
        for _, value in conn.exec_driver_sql("SELECT dag_id, value FROM task_state_store"):
            total += len(value.encode())
        conn.rollback()
    full_read_ms = (time.perf_counter() - t0) * 1000.0
    return {
        "collection_ms": walls,
        "query_ms": per_store,
        "series": len(series),
        "groups": groups,
        "distinct": distinct,
        "plans": plans,
        "forced": forced,
        "full_read_ms": full_read_ms,
        "full_read_bytes": total,
    }


def run(quick: bool) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    reason = ThrowawayPostgres.unavailable()
    if reason:
        return {"skipped": reason}
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    pg = ThrowawayPostgres()
    home = Path(tempfile.mkdtemp(prefix="store-metrics-bench-inventory-"))
    try:
        log(f"[inventory] PostgreSQL on port {pg.port}")
        pg.init()
        migrate_s = migrate(airflow_env(pg.url, home))
        log(f"[inventory] airflow db migrate: {migrate_s:.1f} s; filling")
        data = fill(pg, {k: v for k, v in sizes.items() if k != "repeat"})
        log(f"[inventory] {data['rows']:,} task-store rows in {data['fill_s']:.1f} s; measuring")
        os.environ["AIRFLOW_HOME"] = str(home)
        results = measure(pg.url, sizes["repeat"])
    finally:
        pg.close()
        shutil.rmtree(home, ignore_errors=True)
    load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "sizes": sizes,
        "data": data,
        "migrate_s": migrate_s,
        "load_start": load_start,
        "load_end": load_end,
        **results,
    }


# -- the page section ----------------------------------------------------------------------------------


def _mib(n: float) -> str:
    return f"{n / 1024 / 1024:,.1f} MiB"


def _stats(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} (min {min(values):,.0f}, max {max(values):,.0f})"


def render(r: dict[str, Any]) -> str:
    if "skipped" in r:
        return f"## 5. State store footprint: the inventory's queries\n\nNot measured: {r['skipped']}.\n"
    d, s = r["data"], r["sizes"]
    task_plan, asset_plan = r["plans"]["task_state_store"], r["plans"]["asset_state_store"]
    forced = r["forced"]
    lines = [
        "## 5. State store footprint: the inventory's queries on PostgreSQL",
        "",
        f"What `store-metrics inventory` costs the metadata database. Method and module: "
        f"`benchmarks/inventory.py` (`python -m benchmarks.inventory`), run "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} CPUs, shared with other work: load average {r['load_start']} at the start, "
        f"{r['load_end']} at the end). A throwaway PostgreSQL {d['server_version']}, default settings "
        f"but `fsync=off` (shared_buffers {d['shared_buffers']}), with Airflow "
        f"3.3's schema from `airflow db migrate` ({r['migrate_s']:.1f} s); rows made with "
        "`generate_series`, then `VACUUM ANALYZE`.",
        "",
        md_table(
            ["table", "rows", "groups", "value bytes (SQL)", "on disk (with TOAST, indexes)"],
            [
                [
                    "`task_state_store`",
                    f"{d['rows']:,}",
                    f"{d['dags']:,} DAGs x {s['tasks']} tasks = {r['distinct']['task_state_store']:,}",
                    _mib(d["value_bytes"]),
                    _mib(d["total_size"]),
                ],
                [
                    "`asset_state_store`",
                    f"{d['asset_rows']:,}",
                    f"{r['distinct']['asset_state_store']:,} assets",
                    "-",
                    _mib(d["asset_size"]),
                ],
            ],
            "lrrrr",
        ),
        "",
        f"Task-store rows: {s['runs']} runs x {s['tasks']} tasks x {s['keys']} keys per DAG; values of "
        "12 to 211 bytes, one in 1,000 of 20 KB (random hex, stored out of line in TOAST); `updated_at` "
        f"spread over 30 days; 10 % with `expires_at` past ({d['expired']:,} expired), 10 % never expiring.",
        "",
        "### Time per collection",
        "",
        f"`Collector.collect()` on Airflow's engine, as `--serve` runs it every `inventory_interval`: both "
        f"queries (each in a read-only transaction under `SET LOCAL statement_timeout`), fetching the "
        f"groups, top-20 bounding. {len(r['collection_ms'])} collections after one warm-up; ms.",
        "",
        md_table(
            ["", "median (min, max) ms"],
            [
                ["whole collection (both tables, bounding)", _stats(r["collection_ms"])],
                ["`task_state_store` query", _stats(r["query_ms"]["task_state_store"])],
                ["`asset_state_store` query", _stats(r["query_ms"]["asset_state_store"])],
            ],
            "lr",
        ),
        "",
        f"The snapshot holds {r['groups']['task_state_store']:,} task groups (top 20 DAGs x their 10 tasks, "
        f"plus `other`) and {r['groups']['asset_state_store']:,} asset groups: {r['series']:,} series on the "
        f"scrape endpoint, whatever the table holds. For contrast, reading every `value` into Python "
        f"(`SELECT dag_id, value`) to measure it there took {r['full_read_ms']:,.0f} ms and moved "
        f"{_mib(r['full_read_bytes'])} to the client; the inventory moves "
        f"{r['distinct']['task_state_store']:,} grouped rows.",
        "",
        "### The database's own cost (EXPLAIN ANALYZE)",
        "",
        "`EXPLAIN (ANALYZE, BUFFERS)` of the exact statement the inventory sends:",
        "",
        "```sql",
        task_plan["sql"],
        "```",
        "",
    ]
    for name, plan in (("task_state_store", task_plan), ("asset_state_store", asset_plan)):
        rows = [
            [
                ("&nbsp;&nbsp;" * n["depth"]) + n["label"],
                f"{n['rows']:,}",
                f"{n['loops']:,}",
                f"{n['ms']:,.1f}",
                n["workers"] or "",
            ]
            for n in plan["nodes"]
        ]
        lines += [
            f"`{name}`: execution {plan['execution_ms']:,.1f} ms, planning {plan['planning_ms']:,.2f} ms, "
            f"buffers {plan['shared_hit']:,} hit / {plan['shared_read']:,} read (8 KiB pages); index used: "
            f"{', '.join(f'`{i}`' for i in plan['indexes']) or '**none**'}.",
            "",
            md_table(["plan node", "rows per loop", "loops", "ms", "workers launched"], rows, "lrrrr"),
            "",
        ]
    workers = max((n["workers"] or 0) for n in task_plan["nodes"])
    lines += [
        f"The heap of `task_state_store` has {d['heap_size'] // 8192:,} pages of 8 KiB, its TOAST table "
        f"(with its index) {d['toast_size'] // 8192:,}; the task query touched "
        f"{task_plan['shared_hit'] + task_plan['shared_read']:,}.",
        "",
        "**Which index:** none, and rightly so. Every row contributes to a group (entries, bytes, ages, "
        "expiry), so the planner reads the whole heap once with a sequential scan and aggregates in a "
        "hash table (in parallel workers when it sees fit); `idx_task_state_store_lookup` "
        "(`dag_id, run_id, task_id, map_index`) cannot help, because `value`, `updated_at` and "
        "`expires_at` are not in it, so an index scan visits the same heap pages in a worse order. "
        f"Forced off the sequential scan (`SET LOCAL enable_seqscan = off`), PostgreSQL takes "
        f"{' > '.join(n['label'] for n in forced['nodes'])} and {forced['execution_ms']:,.0f} ms "
        f"({forced['shared_hit'] + forced['shared_read']:,} buffers) instead of "
        f"{task_plan['execution_ms']:,.0f} ms. "
        "`octet_length(value)` takes the size from the value's TOAST pointer: the 20 KB out-of-line values "
        "are neither fetched nor decompressed, and the reference check (`substr(value, 1, 25)`) only runs "
        "on values of at most 2 KiB, so the scan reads the heap pages and no TOAST page. The cost grows "
        "linearly with the rows; at the default `inventory_interval` of 300 s this is one such scan per "
        "table every 5 minutes, from one process per deployment, with the default `inventory_timeout` "
        f"(30 s) far above it. PostgreSQL chose {workers} parallel worker(s) for the scan (its own "
        f"`max_parallel_workers_per_gather`): {workers + 1} backend(s) for "
        f"{task_plan['execution_ms']:,.0f} ms; a database that must not do that can lower the setting for "
        "the inventory's role (`ALTER ROLE ... SET max_parallel_workers_per_gather = 0`).",
    ]
    return "\n".join(lines).rstrip() + "\n"


_BLOCK = re.compile(r"<!-- (\w+):start\b.*?-->.*?<!-- \1:end -->", re.DOTALL)


def keep_section(page_path: Path, page: str) -> str:
    """``page`` with the marked blocks of the file at ``page_path`` that it lacks, appended in order.

    ``python -m benchmarks`` renders sections 1-4 and rewrites the page: the blocks other commands
    write there (``<!-- NAME:start ... -->`` to ``<!-- NAME:end -->``: this module's, the
    triggerer's, ...) are kept as they were instead of being dropped.
    """
    try:
        old = page_path.read_text(encoding="utf-8")
    except OSError:
        return page
    kept = [m.group(0) for m in _BLOCK.finditer(old) if f"<!-- {m.group(1)}:start" not in page]
    if not kept:
        return page
    return page.rstrip("\n") + "\n\n" + "\n\n".join(kept) + "\n"


def write_section(page_path: Path, section: str) -> None:
    """Replace the inventory block at the end of the page (or append it), leaving the rest as it is."""
    old = page_path.read_text(encoding="utf-8") if page_path.exists() else ""
    if START in old:
        before = old[: old.index(START)]
        rest = old[old.index(START) :]
        after = rest[rest.index(END) + len(END) :] if END in rest else ""
    else:
        before, after = old, ""
    block = f"{START}\n\n{section.rstrip()}\n\n{END}\n"
    page_path.write_text(before.rstrip("\n") + "\n\n" + block + after.lstrip("\n"), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inventory", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="20,000 rows, print only")
    parser.add_argument("--output", type=Path, help=f"page to write the section into (default {PAGE})")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    os.chdir(REPO_ROOT)
    results = run(args.quick)
    section = render(results)
    print(section)
    output = args.output or (None if args.quick else PAGE)
    if output is not None and not args.no_write:
        write_section(output, section)
        log(f"wrote the inventory section of {output}")
    raw = Path(tempfile.gettempdir()) / "store-metrics-bench-inventory.json"
    raw.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    log(f"raw results: {raw}")


if __name__ == "__main__":
    main()
