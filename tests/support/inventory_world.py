"""The world the inventory tests read: real DAG runs, Airflow's own writes, and what they must add
up to, computed by hand from the values written.

``build_world`` takes an empty database (SQLite file, a throwaway PostgreSQL or MariaDB), runs
``airflow db migrate`` on it, runs two DAGs (``testbed/dags/inventory/``) with ``dag.test()`` in
fresh processes (the second with a worker-side custom state store backend, ``[workers]
state_store_backend``, so its entries hold references), then writes a few more entries through
Airflow's own server-side backend (``airflow.state.metastore.MetastoreBackend``: a non-ASCII value,
an expired one, one dated two days back). ``EXPECTED`` is what the inventory must report for them,
derived from the same values with ``json.dumps`` (what the Execution API stores). ``Served`` runs
``store-metrics inventory --serve`` and scrapes it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.airflow import DAGS, AirflowHome
from testbed.ports import free_port
from testbed.repository import ROOT, python_path
from testbed.waiting import wait_until

DAY = 86400.0
#: ``inventory_footprint`` and ``inventory_offloaded``, the two DAGs ``build_world`` runs.
INVENTORY_DAGS = DAGS / "inventory"

#: A worker-side backend that keeps values in files and stores a ``file://`` reference.
REF_BACKEND = """
import json
import os
from pathlib import Path

from airflow.sdk.state import AssetScope, BaseStoreBackend, TaskScope

ROOT = Path(os.environ["INVENTORY_REF_ROOT"])


def _path(scope, key):
    if isinstance(scope, TaskScope):
        return ROOT / "task" / scope.dag_id / scope.run_id / scope.task_id / str(scope.map_index) / key
    return ROOT / "asset" / (scope.name or scope.uri or str(scope.asset_id)).replace("/", "_") / key


class RefBackend(BaseStoreBackend):
    def get(self, scope, key, *, session=None):
        p = _path(scope, key)
        return p.read_text() if p.exists() else None

    def set(self, scope, key, value, *, expires_at=None, session=None):
        p = _path(scope, key)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(value)

    def delete(self, scope, key, *, session=None):
        _path(scope, key).unlink(missing_ok=True)

    def clear(self, scope, *, all_map_indices=False, session=None):
        for p in _path(scope, "x").parent.glob("*"):
            p.unlink()

    async def aget(self, scope, key, *, session=None):
        return self.get(scope, key)

    async def aset(self, scope, key, value, *, expires_at=None, session=None):
        self.set(scope, key, value)

    async def adelete(self, scope, key, *, session=None):
        self.delete(scope, key)

    async def aclear(self, scope, *, all_map_indices=False, session=None):
        self.clear(scope)

    def serialize_task_state_store_to_ref(self, *, value, key, scope):
        self.set(scope, key, json.dumps(value))
        return "file://" + str(_path(scope, key))

    def deserialize_task_state_store_from_ref(self, stored):
        return json.loads(Path(stored[len("file://"):]).read_text())

    def serialize_asset_state_store_to_ref(self, *, value, key, scope):
        self.set(scope, key, json.dumps(value))
        return "file://" + str(_path(scope, key))

    def deserialize_asset_state_store_from_ref(self, stored):
        return json.loads(Path(stored[len("file://"):]).read_text())
"""

#: Written through Airflow's server-side backend (MetastoreBackend.set), as the Core API would.
DIRECT_WRITES = """
import datetime as dt

from sqlalchemy import select, update

from airflow.models.asset import AssetModel
from airflow.models.dagrun import DagRun
from airflow.models.task_state_store import TaskStateStoreModel
from airflow.state import AssetScope, TaskScope
from airflow.state.metastore import MetastoreBackend
from airflow.utils.session import create_session

now = dt.datetime.now(dt.timezone.utc)
backend = MetastoreBackend()
with create_session() as session:
    run_id = session.scalar(select(DagRun.run_id).where(DagRun.dag_id == "inventory_footprint"))
    scope = TaskScope(dag_id="inventory_footprint", run_id=run_id, task_id="admin_note")
    backend.set(scope, "note", '"n\\u00e9\\u20ac"', expires_at=now - dt.timedelta(minutes=1), session=session)
    backend.set(scope, "forever", '{"k": "v"}', session=session)
    session.execute(
        update(TaskStateStoreModel)
        .where(TaskStateStoreModel.task_id == "admin_note", TaskStateStoreModel.key == "note")
        .values(updated_at=now - dt.timedelta(days=2))
    )
    events = session.scalar(select(AssetModel.id).where(AssetModel.name == "inventory/events"))
    backend.set(AssetScope(asset_id=events), "manual", '"\\u00fc"', session=session)
"""


def _dumps(value: Any) -> str:
    return json.dumps(value)


@dataclass
class Want:
    """What one group must show: its stored values (JSON text), expired and external counts."""

    values: list[str] = field(default_factory=list)
    expired: int = 0
    external: int = 0
    #: Seconds since its oldest entry was written, at least (None: only "recent").
    oldest_at_least: float | None = None

    @property
    def entries(self) -> int:
        return len(self.values)

    @property
    def bytes(self) -> int | None:
        return None if self.external else sum(len(v.encode()) for v in self.values)


def _ref() -> str:
    # A reference's stored text; its length does not matter: its bytes are reported as unknown.
    return _dumps({"__airflow_state_ref__": "file:///..."})


#: The task store, by (dag_id, task_id): the ids as they are, as labelled.
EXPECTED_TASKS: dict[tuple[str, str], Want] = {
    ("inventory_footprint", "writer"): Want(
        [
            _dumps("job-123"),
            _dumps({"offset": 42, "done": False}),
            _dumps("old"),
            _dumps([1, 2, 3]),
            _dumps("x" * 5000),
        ],
        expired=2,
    ),
    ("inventory_footprint", "mapped"): Want(
        [_dumps("p" * 10), _dumps("p" * 20), _dumps("p" * 30), _dumps(2)], expired=1
    ),
    ("inventory_footprint", "cleaner"): Want([_dumps("after-clear")]),
    # Written by MetastoreBackend: '"né€"' is 8 bytes in UTF-8 (5 characters); one entry is 2 days old.
    ("inventory_footprint", "admin_note"): Want(
        ['"n\u00e9\u20ac"', '{"k": "v"}'], expired=1, oldest_at_least=2 * DAY
    ),
    ("inventory_offloaded", "offloaded"): Want([_ref(), _ref()], expired=1, external=2),
}
#: The asset store, by asset name: as it is, as labelled (``/`` is no separator).
EXPECTED_ASSETS: dict[str, Want] = {
    "inventory/orders": Want([_dumps("2026-01-01T00:00:00+00:00"), _dumps("z" * 2000)]),
    "inventory/events": Want([_dumps(7), '"\u00fc"']),
    "inventory/offloaded": Want([_ref()], external=1),
}


@dataclass
class World:
    """A migrated Airflow database with the entries above, and the environment to reach it."""

    home: Path
    url: str
    #: When the first entry was written (time.time()): every age is at most now minus this.
    started: float = 0.0

    @property
    def airflow(self) -> AirflowHome:
        return AirflowHome(self.home, self.url)

    def env(self, **settings: str) -> dict[str, str]:
        return self.airflow.env(**{"AIRFLOW__STORE_METRICS__BACKEND": "none", **settings})


def _run(cmd: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{cmd[:4]} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def _run_dag(world: World, module: str, env: dict[str, str]) -> None:
    result = world.airflow.run(world.home, [module], env)
    assert result["runs"] == [[module, "success"]], (result["runs"], result["log"][-5000:])


def build_world(home: Path, url: str) -> World:
    """Migrate the database at ``url``, run the DAGs, make the direct writes."""
    world = World(home, url, time.time())
    (home / "dags").mkdir(parents=True)
    for dag_file in INVENTORY_DAGS.glob("*.py"):
        shutil.copy(dag_file, home / "dags")
    lib = home / "lib"
    lib.mkdir()
    (lib / "inventory_ref_backend.py").write_text(REF_BACKEND)
    _run([sys.executable, "-m", "airflow", "db", "migrate"], world.env())
    _run_dag(world, "inventory_footprint", world.env())
    offload = world.env(
        AIRFLOW__WORKERS__STATE_STORE_BACKEND="inventory_ref_backend.RefBackend",
        INVENTORY_REF_ROOT=str(home / "refs"),
        PYTHONPATH=python_path(lib),
    )
    _run_dag(world, "inventory_offloaded", offload)
    _run([sys.executable, "-c", DIRECT_WRITES], world.env())
    return world


def inventory(
    world: World, *args: str, timeout: float = 120, **settings: str
) -> subprocess.CompletedProcess[str]:
    """``store-metrics inventory ARGS`` against the world; not checked."""
    return subprocess.run(
        [sys.executable, "-m", "store_metrics.commands.cli", "inventory", *args],
        env=world.env(**settings),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# -- the scrape endpoint ---------------------------------------------------------------------------------

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample of the endpoint: (name, sorted labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def task_labels(dag_id: str, task_id: str) -> tuple[tuple[str, str], ...]:
    return (("dag_id", dag_id), ("task_id", task_id))


def asset_labels(asset: str) -> tuple[tuple[str, str], ...]:
    return (("asset", asset),)


class Served:
    """``store-metrics inventory --serve`` in a fresh process; its log on a file."""

    def __init__(self, world: World, log: Path, wrap: Sequence[str] = (), **settings: str) -> None:
        """``wrap``: a command the inventory's command line is appended to (it runs it)."""
        self.port = free_port()
        self.log = log
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            [
                *wrap,
                sys.executable,
                "-m",
                "store_metrics.commands.cli",
                "inventory",
                "--serve",
                "--host",
                "127.0.0.1",
            ],
            env=world.env(AIRFLOW__STORE_METRICS__INVENTORY_PORT=str(self.port), **settings),
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}/metrics"

    def samples(self) -> Samples:
        return scrape(self.url)

    def up(self, store: str) -> float | None:
        try:
            return self.samples().get(("airflow_state_store_inventory_up", (("store", store),)))
        except OSError:
            return None

    def wait_up(self, value: float, timeout: float = 60) -> Samples:
        """Wait until both stores' ``up`` gauge is ``value``; return that scrape."""
        wait_until(
            lambda: self.alive() and self.up("task") == value and self.up("asset") == value, timeout, 0.2
        )
        return self.samples()

    def wait_for_reads(self, store: str, count: int, timeout: float = 60) -> Samples:
        """Wait until ``store``'s table has been read ``count`` more times; return the last scrape.

        A read is seen as the store's footprint age going down between two scrapes (its footprint
        was read again in between; the age only grows otherwise). A loaded machine may hide a read
        (two between scrapes), never invent one: at least ``count`` reads happened.
        """
        key = ("airflow_state_store_inventory_footprint_age_seconds", (("store", store),))
        seen: dict[str, Any] = {"reads": 0, "age": float("inf"), "samples": {}}

        def read_again() -> bool:
            assert self.alive()
            samples = self.samples()
            age = samples.get(key)
            if age is not None:
                if age < seen["age"] and seen["age"] != float("inf"):
                    seen["reads"] += 1
                seen["age"], seen["samples"] = age, samples
            return seen["reads"] >= count

        wait_until(read_again, timeout, 0.1)
        samples: Samples = seen["samples"]
        return samples

    def alive(self) -> bool:
        assert self.proc.poll() is None, f"the serve loop died:\n{self.text()}"
        return True

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self, needle: str) -> list[str]:
        return [line for line in self.text().splitlines() if needle in line]

    def close(self) -> int:
        import signal

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait(10)
        self._out.close()
        return code

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_footprint(samples: Samples, world: World) -> None:
    """Assert the scrape shows exactly the expected footprint (ages: within the world's lifetime)."""
    slack = time.time() - world.started + 5
    prefix = "airflow_task_state_store_footprint_"
    for (dag_id, task_id), want in EXPECTED_TASKS.items():
        labels = task_labels(dag_id, task_id)
        got = {name: samples.get((prefix + name, labels)) for name in _TASK_GAUGES}
        assert got["entries"] == want.entries, (dag_id, task_id, got)
        assert got["bytes"] == want.bytes, (dag_id, task_id, got)
        assert got["expired_entries"] == want.expired, (dag_id, task_id, got)
        assert got["external_entries"] == want.external, (dag_id, task_id, got)
        _check_ages(got, want, slack, (dag_id, task_id))
    prefix = "airflow_asset_state_store_footprint_"
    for asset, want in EXPECTED_ASSETS.items():
        labels = asset_labels(asset)
        got = {name: samples.get((prefix + name, labels)) for name in _ASSET_GAUGES}
        assert got["entries"] == want.entries, (asset, got)
        assert got["bytes"] == want.bytes, (asset, got)
        assert got["external_entries"] == want.external, (asset, got)
        _check_ages(got, want, slack, asset)
    # Nothing else: no other group, no key, no run id anywhere.
    task_groups = {
        dict(labels)["dag_id"] + "/" + dict(labels)["task_id"]
        for name, labels in samples
        if name.startswith("airflow_task_state_store_footprint_")
    }
    assert task_groups == {f"{d}/{t}" for d, t in EXPECTED_TASKS}
    asset_groups = {
        dict(labels)["asset"]
        for name, labels in samples
        if name.startswith("airflow_asset_state_store_footprint_")
    }
    assert asset_groups == set(EXPECTED_ASSETS)


_TASK_GAUGES = (
    "entries",
    "bytes",
    "oldest_age_seconds",
    "newest_age_seconds",
    "external_entries",
    "expired_entries",
)
_ASSET_GAUGES = ("entries", "bytes", "oldest_age_seconds", "newest_age_seconds", "external_entries")


def _check_ages(got: dict[str, float | None], want: Want, slack: float, what: object) -> None:
    oldest, newest = got["oldest_age_seconds"], got["newest_age_seconds"]
    assert oldest is not None and newest is not None, (what, got)
    assert 0 <= newest <= oldest, (what, got)
    if want.oldest_at_least is not None:
        assert want.oldest_at_least <= oldest <= want.oldest_at_least + slack, (what, got)
        assert newest <= slack, (what, got)
    else:
        assert oldest <= slack, (what, got)


def expected_totals() -> tuple[int, int, int]:
    """(task entries, task expired, asset entries) over everything."""
    return (
        sum(w.entries for w in EXPECTED_TASKS.values()),
        sum(w.expired for w in EXPECTED_TASKS.values()),
        sum(w.entries for w in EXPECTED_ASSETS.values()),
    )


#: Read every 0.5 s, give up on a statement after 1 s.
FAST = {
    "AIRFLOW__STORE_METRICS__INVENTORY_INTERVAL": "0.5",
    "AIRFLOW__STORE_METRICS__INVENTORY_TIMEOUT": "1",
}


def a_locked_table_costs_one_line(world: World, log: Path, hold: Callable[[threading.Event], None]) -> str:
    """The inventory against a database whose task table ``hold`` keeps locked for a while.

    ``hold`` takes the lock, sets the event and keeps it (15 s, against a 1 s statement timeout).
    While it does, the task table reads as down, the asset table as up, and the last footprint
    read is still served; afterwards the footprint is read again. Returns the one warning line.
    """
    with Served(world, log, **FAST) as served:
        served.wait_up(1.0)
        locked = threading.Event()
        holder = threading.Thread(target=hold, args=(locked,))
        holder.start()
        assert locked.wait(30)
        # The task query waits on the lock until its statement timeout stops it, every interval.
        wait_until(lambda: served.alive() and served.up("task") == 0.0, 30, 0.2)
        during = served.samples()
        assert during[("airflow_state_store_inventory_up", (("store", "asset"),))] == 1.0
        writer = ("airflow_task_state_store_footprint_entries", task_labels("inventory_footprint", "writer"))
        assert during[writer] == EXPECTED_TASKS[("inventory_footprint", "writer")].entries
        # Several more collections, the task query timing out in each (the asset table, not
        # locked, is read every time): still one line.
        later = served.wait_for_reads("asset", 3)
        assert later[("airflow_state_store_inventory_up", (("store", "task"),))] == 0.0
        holder.join(30)
        samples = served.wait_up(1.0, timeout=30)
        check_footprint(samples, world)
        warnings = served.lines("WARNING")
        assert len(warnings) == 1, served.text()
        assert "the task_state_store query took longer than its statement timeout (1 s)" in warnings[0]
        assert len(served.lines("works again")) == 1, served.text()
        assert served.lines("ERROR") == []
        return warnings[0]


# -- the UI's statements on the same world (store_metrics.ui.reading) -----------------------------------

#: The assets each DAG uses (its tasks' outlets): real name -> the label the gauges give it above.
DAG_ASSETS = {
    "inventory_footprint": {"inventory/orders": "inventory/orders", "inventory/events": "inventory/events"},
    "inventory_offloaded": {"inventory/offloaded": "inventory/offloaded"},
}

#: Runs the UI's reads through Airflow's own engine, as an API server worker does; prints JSON.
UI_READING = """
import json

from store_metrics.inventory.database import Database
from store_metrics.ui.payload import group_json
from store_metrics.ui.reading import read_dag, read_deployment

database = Database.from_airflow(30)
out = {}
for dag_id in ("inventory_footprint", "inventory_offloaded", "no_such_dag"):
    fp = read_dag(database, dag_id)
    out[dag_id] = {
        "tasks": {name: group_json(g) for name, g in fp.tasks},
        "assets": {name: group_json(g) for name, g in fp.assets},
    }
deployment = read_deployment(database, top=20)
out["deployment"] = {
    "dags": [[name, group_json(g)] for name, g in deployment.dags],
    "assets": [[name, group_json(g)] for name, g in deployment.assets],
    "users": {name: list(dags) for name, dags in deployment.asset_users.items()},
}
print(json.dumps(out))
"""


def _same(got: dict[str, Any], want: Want, what: object) -> None:
    assert got["entries"] == want.entries, (what, got)
    assert got["external"] == want.external, (what, got)
    assert got["value_bytes"] == want.bytes, (what, got)  # None (unknown) where entries hold references
    if want.bytes is not None:
        assert got["bytes"] == want.bytes, (what, got)


def check_printed_footprint(proc: subprocess.CompletedProcess[str]) -> None:
    """The one-shot ``store-metrics inventory`` against the world exited 0 and printed its footprint."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("task state store: 14 entries in 5 DAG tasks, 2 entries hold a custom ")
    assert (
        "asset state store: 5 entries in 3 assets, 1 entry holds a custom backend's reference" in proc.stdout
    )


def check_served_and_printed(world: World, log: Path) -> None:
    """The footprint story on one database: ``inventory --serve`` scraped shows exactly the
    hand-computed footprint with no warning nor error, and the one-shot table prints it."""
    with Served(world, log, **FAST) as served:
        samples = served.wait_up(1.0)
        check_footprint(samples, world)
        assert served.lines("WARNING") == [], served.text()
        assert served.lines("ERROR") == [], served.text()
    check_printed_footprint(inventory(world))


#: What the inventory's read-only role of docs/deploy/helm.md may not do: write the store, write
#: Airflow's other tables, read them.
DENIED_TO_THE_READ_ONLY_ROLE = (
    "DELETE FROM task_state_store",
    "UPDATE asset SET uri = uri",
    "SELECT 1 FROM dag_run",
)


def check_ui_reading(world: World) -> None:
    """The UI's per-DAG statement and deployment statements equal the hand-computed footprint."""
    read = json.loads(_run([sys.executable, "-c", UI_READING], world.env()).stdout)
    for dag_id, assets in DAG_ASSETS.items():
        tasks = {t: w for (d, t), w in EXPECTED_TASKS.items() if d == dag_id}
        assert set(read[dag_id]["tasks"]) == set(tasks), read[dag_id]
        for task_id, want in tasks.items():
            got = read[dag_id]["tasks"][task_id]
            _same(got, want, (dag_id, task_id))
            assert got["expired"] == want.expired, (dag_id, task_id, got)
        assert set(read[dag_id]["assets"]) == set(assets), read[dag_id]
        for name, label in assets.items():
            got = read[dag_id]["assets"][name]
            _same(got, EXPECTED_ASSETS[label], (dag_id, name))
            assert got["expired"] is None
    assert read["no_such_dag"] == {"tasks": {}, "assets": {}}
    # The deployment: every DAG's task state summed, largest first; the assets with their users.
    dags = dict((name, group) for name, group in read["deployment"]["dags"])
    for dag_id in DAG_ASSETS:
        wants = [w for (d, _), w in EXPECTED_TASKS.items() if d == dag_id]
        assert dags[dag_id]["entries"] == sum(w.entries for w in wants)
        assert dags[dag_id]["expired"] == sum(w.expired for w in wants)
    stored = [group["bytes"] for _, group in read["deployment"]["dags"]]
    assert stored == sorted(stored, reverse=True)
    assert {name for name, _ in read["deployment"]["assets"]} == {n for d in DAG_ASSETS.values() for n in d}
    assert read["deployment"]["users"] == {
        name: [dag_id] for dag_id, names in DAG_ASSETS.items() for name in names
    }


def role_sql(starting: str) -> str:
    """The SQL block of docs/deploy/helm.md that creates the inventory's read-only role and starts
    with ``starting`` (``CREATE ROLE``: PostgreSQL; ``CREATE USER``: MySQL and MariaDB)."""
    text = (ROOT / "docs" / "deploy" / "helm.md").read_text()
    (block,) = [
        b for b in re.findall(r"^```sql\n(.*?)^```$", text, flags=re.M | re.S) if b.startswith(starting)
    ]
    return str(block)
