"""Section 5 of the page: the state store footprint, what the inventory's queries cost PostgreSQL."""

from __future__ import annotations

from ..inventory import Inventory, InventorySkipped, Plan, Stats
from ..results import Results, RunInfo, data_of
from .markdown import Rendered, join, table

WHY_NO_INDEX = (
    "**Which index:** none, and rightly so. Every row contributes to a group (entries, bytes, ages, "
    "expiry), so the planner reads the whole heap once with a sequential scan and aggregates in a hash "
    "table (in parallel workers when it sees fit); `idx_task_state_store_lookup` (`dag_id, run_id, "
    "task_id, map_index`) cannot help, because `value`, `updated_at` and `expires_at` are not in it, so "
    "an index scan visits the same heap pages in a worse order. Forced off the sequential scan (`SET "
    "LOCAL enable_seqscan = off`), PostgreSQL takes {forced_plan} and {forced_ms:,.0f} ms "
    "({forced_buffers:,} buffers) instead of {ms:,.0f} ms. `octet_length(value)` takes the size from the "
    "value's TOAST pointer: the 20 KB out-of-line values are neither fetched nor decompressed, and the "
    "reference check (`substr(value, 1, 25)`) only runs on values of at most 2 KiB, so the scan reads "
    "the heap pages and no TOAST page. The cost grows linearly with the rows; at the default "
    "`inventory_interval` of 300 s this is one such scan per table every 5 minutes, from one process per "
    "deployment, with the default `inventory_timeout` (30 s) far above it. PostgreSQL chose {workers} "
    "parallel worker(s) for the scan (its own `max_parallel_workers_per_gather`): {backends} backend(s) "
    "for {ms:,.0f} ms; a database that must not do that can lower the setting for the inventory's role "
    "(`ALTER ROLE ... SET max_parallel_workers_per_gather = 0`)."
)


def _mib(n: float) -> str:
    return f"{n / 1024 / 1024:,.1f} MiB"


def _stats(s: Stats) -> str:
    return f"{s['median']:,.0f} (min {s['min']:,.0f}, max {s['max']:,.0f})"


def _tables(r: Inventory, run: RunInfo) -> str:
    d, s = r["data"], r["sizes"]
    rows = [
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
    ]
    return join(
        "## 5. State store footprint: the inventory's queries on PostgreSQL",
        "What `store-metrics inventory` costs the metadata database. Method and module: "
        f"`benchmarks/inventory.py` (`python -m benchmarks --only inventory`), run {run['date']} on "
        f"{r['host']} "
        f"({r['cpus']} CPUs, shared with other work: load average {run['load_start']} at the start, "
        f"{run['load_end']} at the end). A throwaway PostgreSQL {d['server_version']}, default settings but "
        f"`fsync=off` (shared_buffers {d['shared_buffers']}), with Airflow 3.3's schema from `airflow db "
        f"migrate` ({r['migrate_s']:.1f} s); rows made with `generate_series`, then `VACUUM ANALYZE`.",
        table(
            ["table", "rows", "groups", "value bytes (SQL)", "on disk (with TOAST, indexes)"], rows, "lrrrr"
        ),
        f"Task-store rows: {s['runs']} runs x {s['tasks']} tasks x {s['keys']} keys per DAG; values of 12 to "
        "211 bytes, one in 1,000 of 20 KB (random hex, stored out of line in TOAST); `updated_at` spread "
        "over "
        f"30 days; 10 % with `expires_at` past ({d['expired']:,} expired), 10 % never expiring.",
    )


def _collections(r: Inventory) -> str:
    rows = [
        ["whole collection (both tables, bounding)", _stats(r["collection_ms"])],
        ["`task_state_store` query", _stats(r["query_ms"]["task_state_store"])],
        ["`asset_state_store` query", _stats(r["query_ms"]["asset_state_store"])],
    ]
    return join(
        "### Time per collection",
        "`Collector.collect()` on Airflow's engine, as `--serve` runs it every `inventory_interval`: both "
        "queries (each in a read-only transaction under `SET LOCAL statement_timeout`), fetching the groups, "
        f"top-20 bounding. {r['collection_ms']['n']} collections after one warm-up; ms.",
        table(["", "median (min, max) ms"], rows, "lr"),
        f"The snapshot holds {r['groups']['task_state_store']:,} task groups (top 20 DAGs x their 10 tasks, "
        f"plus `other`) and {r['groups']['asset_state_store']:,} asset groups: {r['series']:,} series on the "
        "scrape endpoint, whatever the table holds. For contrast, reading every `value` into Python "
        f"(`SELECT dag_id, value`) to measure it there took {r['full_read_ms']:,.0f} ms and moved "
        f"{_mib(r['full_read_bytes'])} to the client; the inventory moves "
        f"{r['distinct']['task_state_store']:,} grouped rows.",
    )


def _plan(name: str, plan: Plan) -> str:
    rows = [
        [
            ("&nbsp;&nbsp;" * n["depth"]) + n["label"],
            f"{n['rows'] or 0:,}",
            f"{n['loops'] or 0:,}",
            f"{n['ms'] or 0:,.1f}",
            n["workers"] or "",
        ]
        for n in plan["nodes"]
    ]
    indexes = ", ".join(f"`{i}`" for i in plan["indexes"]) or "**none**"
    return join(
        f"`{name}`: execution {plan['execution_ms']:,.1f} ms, planning {plan['planning_ms']:,.2f} ms, "
        "buffers "
        f"{plan['shared_hit']:,} hit / {plan['shared_read']:,} read (8 KiB pages); index used: {indexes}.",
        table(["plan node", "rows per loop", "loops", "ms", "workers launched"], rows, "lrrrr"),
    )


def _database(r: Inventory) -> str:
    d, task, forced = r["data"], r["plans"]["task_state_store"], r["forced"]
    workers = max((n["workers"] or 0) for n in task["nodes"])
    return join(
        "### The database's own cost (EXPLAIN ANALYZE)",
        "`EXPLAIN (ANALYZE, BUFFERS)` of the exact statement the inventory sends:",
        f"```sql\n{task['sql']}\n```",
        _plan("task_state_store", task),
        _plan("asset_state_store", r["plans"]["asset_state_store"]),
        f"The heap of `task_state_store` has {d['heap_size'] // 8192:,} pages of 8 KiB, its TOAST table "
        "(with "
        f"its index) {d['toast_size'] // 8192:,}; the task query touched "
        f"{task['shared_hit'] + task['shared_read']:,}.",
        WHY_NO_INDEX.format(
            forced_plan=" > ".join(forced["labels"]),
            forced_ms=forced["execution_ms"],
            forced_buffers=forced["buffers"],
            ms=task["execution_ms"],
            workers=workers,
            backends=workers + 1,
        ),
    )


def render(results: Results) -> Rendered:
    r: Inventory | InventorySkipped = data_of(results, "inventory")
    if "skipped" in r:
        return Rendered(
            f"## 5. State store footprint: the inventory's queries\n\nNot measured: {r['skipped']}."
        )
    run = results["sections"]["inventory"]["run"]
    return Rendered(join(_tables(r, run), _collections(r), _database(r)))
