"""The State store views' cost: the tab's one statement per DAG on PostgreSQL, and the API server's CPU.

    python -m benchmarks.ui            # 1,000,000 task-store rows over 2,000 DAGs; prints JSON
    python -m benchmarks.ui --quick    # 20,000 rows over 40 DAGs, short windows; prints JSON

``measure`` returns plain data (a dict, JSON-serialisable); nothing here renders Markdown.

The database is the inventory benchmark's (``benchmarks.inventory``): a throwaway PostgreSQL
with Airflow 3.3's schema from ``airflow db migrate`` and the same ``generate_series`` rows, plus
asset references (each DAG's ``task_01`` has an outlet, ``task_02`` an inlet, every other DAG a
schedule on an asset), so the statement's asset half has assets to find. Then:

* **the tab's statement** (``store_metrics.ui.reading.read_dag``, the product's own path:
  Airflow's engine, a read-only transaction under ``SET LOCAL statement_timeout``) for a sample of
  DAGs, twice: the time ``Database.fetch`` measures (statement and fetch) and the wall time of
  the whole read; target: at most 100 ms at the median;
* ``EXPLAIN (ANALYZE, BUFFERS)`` of that statement for one DAG: which index it uses;
* the deployment page's reads (``read_deployment``, the whole table);
* **the API server**: ``airflow api-server`` (one worker) with ``[store_metrics] ui`` on and off,
  alternating: its processes' CPU time over an idle window with nobody looking (after one tab view,
  with ``ui`` on), and their threads; then, ``ui`` on, the CPU one tab view costs it, first read
  (statement) and cached. ``server_metrics = false`` and backend ``none`` in both, so the stall
  monitor's ticker does not add its own CPU to the baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from testbed.databases import ThrowawayPostgres
from testbed.ports import free_port

from .common import log
from .inventory import FULL, QUICK, airflow_env, explain_statement, fill, migrate

TARGET_MS = 100.0

_REFERENCES = """
SET session_replication_role = replica;  -- the rows name DAGs that have no `dag` row here
INSERT INTO task_outlet_asset_reference (asset_id, dag_id, task_id, created_at, updated_at)
SELECT d, 'bench_dag_' || lpad(d::text, 4, '0'), 'task_01', now(), now() FROM generate_series(1, %(dags)s) d;
INSERT INTO task_inlet_asset_reference (asset_id, dag_id, task_id, created_at, updated_at)
SELECT d %% %(dags)s + 1, 'bench_dag_' || lpad(d::text, 4, '0'), 'task_02', now(), now()
FROM generate_series(1, %(dags)s) d;
INSERT INTO dag_schedule_asset_reference (asset_id, dag_id, created_at, updated_at)
SELECT (d + 1) %% %(dags)s + 1, 'bench_dag_' || lpad(d::text, 4, '0'), now(), now()
FROM generate_series(2, %(dags)s, 2) d;
"""


def add_asset_references(pg: ThrowawayPostgres, dags: int) -> int:
    """Each DAG uses two or three assets (asset ids are 1..dags, as ``fill`` makes them)."""
    conn = pg.connect()
    with conn, conn.cursor() as cur:
        cur.execute(_REFERENCES, {"dags": dags})
        cur.execute(
            "SELECT (SELECT count(*) FROM task_outlet_asset_reference) + "
            "(SELECT count(*) FROM task_inlet_asset_reference) + "
            "(SELECT count(*) FROM dag_schedule_asset_reference)"
        )
        count = int(cur.fetchone()[0])
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(
            "ANALYZE task_outlet_asset_reference, task_inlet_asset_reference, dag_schedule_asset_reference"
        )
    conn.close()
    return count


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        "min": ordered[0],
        "max": ordered[-1],
        "n": len(ordered),
    }


def tab_statement(database: Any, dag_ids: list[str]) -> dict[str, Any]:
    """``read_dag`` for each DAG, two passes: statement ms (as the UI measures it) and wall ms."""
    from store_metrics.ui.reading import read_dag

    passes = []
    rows = 0
    for _ in range(2):
        query_ms, wall_ms = [], []
        for dag_id in dag_ids:
            t0 = time.perf_counter()
            footprint = read_dag(database, dag_id)
            wall_ms.append((time.perf_counter() - t0) * 1000.0)
            query_ms.append(footprint.duration_ms)
            rows = len(footprint.tasks) + len(footprint.assets)
        passes.append({"query_ms": _summary(query_ms), "wall_ms": _summary(wall_ms)})
    median = passes[0]["query_ms"]["median"]
    return {
        "dags": len(dag_ids),
        "first": passes[0],
        "again": passes[1],
        "groups_per_dag": rows,
        "target_ms": TARGET_MS,
        "met": median <= TARGET_MS and passes[1]["query_ms"]["median"] <= TARGET_MS,
    }


def explain_dag(database: Any, dag_id: str) -> dict[str, Any]:
    """``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` of the tab's statement for ``dag_id``."""
    import datetime as dt

    from store_metrics.inventory.queries import dag_statement

    now = dt.datetime.now(dt.timezone.utc)
    return {
        "dag_id": dag_id,
        **explain_statement(database.engine, dag_statement(), {"dag_id": dag_id, "now": now}),
    }


def deployment_reads(database: Any, repeat: int) -> dict[str, Any]:
    from store_metrics.ui.reading import read_deployment

    walls, queries = [], []
    dags = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        deployment = read_deployment(database, top=20)
        walls.append((time.perf_counter() - t0) * 1000.0)
        queries.append(deployment.duration_ms)
        dags = len(deployment.dags)
    return {"query_ms": _summary(queries), "wall_ms": _summary(walls), "dags": dags}


# -- the API server ------------------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _group(pgid: int) -> tuple[float, int]:
    """(CPU seconds, threads) of every process of the group."""
    cpu, threads = 0.0, 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:
            cpu += (int(fields[11]) + int(fields[12])) / _TICK
            threads += int(fields[17])
    return cpu, threads


class ApiServer:
    """``airflow api-server`` with one worker, in its own process group."""

    def __init__(self, env: dict[str, str], ui: bool, log_path: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            **env,
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__STORE_METRICS__UI": str(ui).lower(),
            "AIRFLOW__STORE_METRICS__SERVER_METRICS": "false",
            "AIRFLOW__STORE_METRICS__BACKEND": "none",
        }
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "airflow", "api-server"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 180
        while not self._healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"api-server did not start:\n{log_path.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.5)
        self.token = json.loads(self.get("/auth/token", auth=False))["access_token"]

    def _healthy(self) -> bool:
        try:
            return bool(self.get("/api/v2/monitor/health", auth=False))
        except OSError:
            return False

    def get(self, path: str, auth: bool = True) -> str:
        headers = {"Authorization": f"Bearer {self.token}"} if auth else {}
        request = urllib.request.Request(self.base + path, headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            return str(response.read().decode())

    def cpu(self) -> tuple[float, int]:
        return _group(self.proc.pid)

    def stop(self) -> None:
        import signal

        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything of the group still there
        self.proc.wait(10)
        self._log.close()


def idle_cpu(
    env: dict[str, str], tmp: Path, window_s: float, rounds: int, dag_ids: list[str]
) -> dict[str, Any]:
    """CPU % of a core and threads of the API server, idle, ``ui`` on and off, alternating."""
    out: dict[str, Any] = {"window_s": window_s, "on": [], "off": [], "threads_on": [], "threads_off": []}
    for n in range(rounds):
        for ui in (True, False):
            server = ApiServer(env, ui, tmp / f"api-server-{n}-{ui}.log")
            try:
                if ui:  # somebody looked once: the worker's sources and caches exist, then nobody looks
                    server.get(f"/store-metrics/api/dags/{dag_ids[0]}/footprint")
                    server.get("/store-metrics/api/deployment")
                time.sleep(3)  # let start-up settle
                cpu0, _ = server.cpu()
                time.sleep(window_s)
                cpu1, threads = server.cpu()
            finally:
                server.stop()
            key = "on" if ui else "off"
            out[key].append(100.0 * (cpu1 - cpu0) / window_s)
            out[f"threads_{key}"].append(threads)
    out["added_percent"] = statistics.median(out["on"]) - statistics.median(out["off"])
    spread = [abs(a - b) for a, b in zip(out["on"], out["on"][1:], strict=False)] + [
        abs(a - b) for a, b in zip(out["off"], out["off"][1:], strict=False)
    ]
    out["aa_spread_percent"] = max(spread) if spread else None
    return out


def request_cpu(env: dict[str, str], tmp: Path, dag_ids: list[str]) -> dict[str, Any]:
    """API server CPU ms per tab view (the footprint request): first read, then from the cache."""
    server = ApiServer(env, True, tmp / "api-server-requests.log")
    try:
        server.get(f"/store-metrics/api/dags/{dag_ids[-1]}/footprint")  # builds the worker's sources
        result = {}
        for kind in ("first", "cached"):
            cpu0, _ = server.cpu()
            t0 = time.perf_counter()
            for dag_id in dag_ids:
                server.get(f"/store-metrics/api/dags/{dag_id}/footprint")
            wall = (time.perf_counter() - t0) * 1000.0 / len(dag_ids)
            cpu1, _ = server.cpu()
            result[kind] = {"cpu_ms": 1000.0 * (cpu1 - cpu0) / len(dag_ids), "wall_ms": wall}
        return {"requests": len(dag_ids), **result}
    finally:
        server.stop()


# -- the whole run -------------------------------------------------------------------------------------


def measure(quick: bool = False) -> dict[str, Any]:
    """Everything above, on a database of its own; returns plain data."""
    sizes = QUICK if quick else FULL
    reason = ThrowawayPostgres.unavailable()
    if reason:
        return {"skipped": reason}
    load_start = os.getloadavg()
    pg = ThrowawayPostgres()
    tmp = Path(tempfile.mkdtemp(prefix="store-metrics-bench-ui-"))
    saved = {k: os.environ.get(k) for k in ("AIRFLOW_HOME", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")}
    try:
        log(f"[ui] PostgreSQL on port {pg.port}")
        pg.init()
        env = airflow_env(pg.url, tmp)
        migrate_s = migrate(env)
        data: dict[str, Any] = dict(fill(pg, {k: v for k, v in sizes.items() if k != "repeat"}))
        data["asset_references"] = add_asset_references(pg, sizes["dags"])
        log(
            f"[ui] {data['rows']:,} task-store rows over {data['dags']:,} DAGs; measuring the tab's statement"
        )
        os.environ.update(AIRFLOW_HOME=str(tmp), AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=pg.url)
        from store_metrics.inventory.database import Database

        database = Database.from_airflow(timeout=30)
        every = [f"bench_dag_{d:04d}" for d in range(1, sizes["dags"] + 1)]
        sample = every[:: max(1, len(every) // 200)]
        tab = tab_statement(database, sample)
        plan = explain_dag(database, sample[len(sample) // 2])
        deployment = deployment_reads(database, 3 if quick else 5)
        log("[ui] the API server: idle CPU with the views on and off")
        idle = idle_cpu(env, tmp, 5.0 if quick else 60.0, 1 if quick else 2, sample)
        requests = request_cpu(env, tmp, sample[:20] if quick else sample[:100])
    finally:
        pg.close()
        shutil.rmtree(tmp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {
        "quick": quick,
        "sizes": sizes,
        "data": data,
        "migrate_s": migrate_s,
        "cpus": os.cpu_count(),
        "load_start": list(load_start),
        "load_end": list(os.getloadavg()),
        "tab": tab,
        "plan": plan,
        "deployment": deployment,
        "api_server": {"idle": idle, "per_tab_view": requests},
    }


def run(quick: bool) -> dict[str, Any]:
    """``measure`` in a fresh interpreter: Airflow reads which database it uses once per process,
    and the earlier sections of a full run have imported it already (with another database)."""
    with tempfile.TemporaryDirectory(prefix="store-metrics-bench-ui-") as tmp:
        out = Path(tmp) / "ui.json"
        command = [sys.executable, "-m", "benchmarks.ui", "--out", str(out), *(["--quick"] if quick else [])]
        done = subprocess.run(command, check=False, cwd=Path(__file__).resolve().parent.parent)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"benchmarks.ui exited with {done.returncode}")
        data: dict[str, Any] = json.loads(out.read_text())
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 rows over 40 DAGs, 5 s idle windows")
    parser.add_argument("--out", type=Path, help="write the JSON there instead of to stdout")
    args = parser.parse_args()
    text = json.dumps(measure(args.quick), indent=2, default=str)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
