"""What the UI reads from the metadata database: one DAG's footprint, and the deployment's.

Both go through the inventory (``store_metrics.inventory``): its statements
(``dag_statement`` and friends), its time-bounded
transactions (``fetch``; read-only on PostgreSQL)
and its ``Group``. Only aggregates come back: no key, no value.

Unlike the inventory's gauges, names are kept exactly as Airflow has them (not sanitised into tag
values): the pages link to DAGs by their id.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..catalogue import Store
from ..inventory.database import Database
from ..inventory.footprint import Group, by_size, group_of
from ..inventory.queries import asset_statement, asset_users_statement, dag_statement, dag_totals_statement

Named = tuple[str, Group]
#: The name shown for an asset-store row whose asset row is gone (the outer join found none).
NO_ASSET = "(no asset)"


def _named(rows: Sequence[Sequence[Any]], store: Store, width: int) -> tuple[Named, ...]:
    named = (
        (NO_ASSET if row[width - 1] is None else str(row[width - 1]), group_of(store, row[width:]))
        for row in rows
    )
    return tuple(sorted(named, key=by_size))


def total(groups: Sequence[Named]) -> Group | None:
    """The groups summed; ``None`` when there are none."""
    out: Group | None = None
    for _, group in groups:
        out = group if out is None else out.merge(group)
    return out


@dataclass(frozen=True)
class DagFootprint:
    """What one DAG keeps in the state store, per task and per asset it uses, largest first."""

    dag_id: str
    tasks: tuple[Named, ...]
    assets: tuple[Named, ...]
    #: When the query was sent (UTC): expiry is relative to it.
    read_at: dt.datetime
    duration_ms: float


def read_dag(database: Database, dag_id: str, now: dt.datetime | None = None) -> DagFootprint:
    """One aggregate statement for ``dag_id``; raises what the database raised."""
    at = now or dt.datetime.now(dt.timezone.utc)
    rows, duration_ms = database.fetch(dag_statement(), {"dag_id": dag_id, "now": at})
    tasks = [row for row in rows if row[0] == Store.TASK.value]
    assets = [row for row in rows if row[0] == Store.ASSET.value]
    return DagFootprint(
        dag_id=dag_id,
        tasks=_named(tasks, Store.TASK, 2),
        assets=_named(assets, Store.ASSET, 2),
        read_at=at,
        duration_ms=duration_ms,
    )


@dataclass(frozen=True)
class Deployment:
    """The whole task store per DAG, the largest assets, and which DAGs use those assets."""

    #: Every DAG with task state, largest first (filtered per user when shown).
    dags: tuple[Named, ...]
    #: The ``top`` largest assets.
    assets: tuple[Named, ...]
    #: How many assets hold state in all.
    asset_count: int
    #: asset name -> the DAGs using it (schedule, inlets, outlets), sorted.
    asset_users: Mapping[str, tuple[str, ...]]
    read_at: dt.datetime
    duration_ms: float


def read_deployment(database: Database, top: int, now: dt.datetime | None = None) -> Deployment:
    """Three aggregate statements, each in its own bounded transaction; raises what the database raised."""
    at = now or dt.datetime.now(dt.timezone.utc)
    dag_rows, dags_ms = database.fetch(dag_totals_statement(), {"now": at})
    asset_rows, assets_ms = database.fetch(asset_statement(), {})
    assets = _named(asset_rows, Store.ASSET, 1)
    kept = assets[:top]
    users: dict[str, set[str]] = defaultdict(set)
    users_ms = 0.0
    if kept:
        user_rows, users_ms = database.fetch(asset_users_statement(), {"names": [name for name, _ in kept]})
        for name, dag_id in user_rows:
            users[str(name)].add(str(dag_id))
    return Deployment(
        dags=_named(dag_rows, Store.TASK, 1),
        assets=kept,
        asset_count=len(assets),
        asset_users={name: tuple(sorted(dags)) for name, dags in users.items()},
        read_at=at,
        duration_ms=dags_ms + assets_ms + users_ms,
    )
