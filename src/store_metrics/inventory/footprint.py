"""What one store's table holds, per group, with cardinality bounded: the top N and ``<other>``.

A ``Group`` is one row of an aggregate query (entries, bytes, references, oldest and newest
write, expired entries). ``footprint_of`` turns a query's rows into a ``StoreFootprint``:

1. group keys are the names exactly as Airflow has them (a missing one is ``<unknown>``); the tag value
   rule of every other metric (``tag_value``) is applied where they
   become labels, and keeps them apart, so a DAG has the same labels on every path;
2. the task store keeps the ``top`` DAGs by bytes (then entries, then name), and within each of
   them its ``top`` tasks; the other tasks of a kept DAG are summed under ``task_id="<other>"``, every
   other DAG under ``dag_id="<other>", task_id="<other>"`` (a value no DAG or task id can take).
   The asset store keeps the ``top`` assets and sums the rest under ``asset="<other>"``. At most
   ``top * (top + 1) + 1`` task series and ``top + 1`` asset series per metric, whatever the table
   holds.

Sums over all groups are exact whatever ``top`` is: ``<other>`` holds the rest, not nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..catalogue import OTHER, UNKNOWN, Store
from .queries import KEY_COLUMNS

Key = tuple[str, ...]


@dataclass(frozen=True)
class Group:
    """What one DAG's task (or one asset) keeps in the store."""

    entries: int
    #: Bytes of the values as the table holds them (for references: the reference's bytes).
    stored_bytes: int
    #: Entries whose value is a reference to a worker-side custom backend.
    external: int
    oldest: dt.datetime | None
    newest: dt.datetime | None
    #: Entries past ``expires_at`` still stored; ``None`` for the asset store (no expiry).
    expired: int | None

    @property
    def value_bytes(self) -> int | None:
        """The values' bytes, or ``None`` (unknown) when some entries hold a reference."""
        return None if self.external else self.stored_bytes

    def merge(self, other: Group) -> Group:
        return Group(
            entries=self.entries + other.entries,
            stored_bytes=self.stored_bytes + other.stored_bytes,
            external=self.external + other.external,
            oldest=_pick(min, self.oldest, other.oldest),
            newest=_pick(max, self.newest, other.newest),
            expired=None if self.expired is None or other.expired is None else self.expired + other.expired,
        )


def _pick(choose: Any, a: dt.datetime | None, b: dt.datetime | None) -> dt.datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    chosen: dt.datetime = choose(a, b)
    return chosen


def _utc(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):  # a driver without result types (never with Airflow's UtcDateTime)
        value = dt.datetime.fromisoformat(value)
    if not isinstance(value, dt.datetime):
        raise TypeError(f"expected a datetime, got {value!r}")
    utc = dt.timezone.utc
    return value.replace(tzinfo=utc) if value.tzinfo is None else value.astimezone(utc)


def group_of(store: Store, values: Sequence[Any]) -> Group:
    """A ``Group`` from the aggregate columns of one row (after its key columns)."""
    entries, stored, external, oldest, newest, *rest = values
    return Group(
        entries=int(entries or 0),
        stored_bytes=int(stored or 0),
        external=int(external or 0),
        oldest=_utc(oldest),
        newest=_utc(newest),
        expired=int(rest[0] or 0) if store is Store.TASK else None,
    )


@dataclass(frozen=True)
class StoreFootprint:
    """One store's footprint as read at ``read_at``: bounded groups, and the table's totals."""

    store: Store
    #: ``(dag_id, task_id)`` or ``(asset,)`` -> group, at most the bound above.
    groups: Mapping[Key, Group]
    read_at: dt.datetime
    duration_ms: float
    #: How many groups the table had, before the top N were kept.
    distinct: int

    @property
    def total(self) -> Group | None:
        """Everything the table holds, summed; ``None`` when it is empty."""
        total: Group | None = None
        for group in self.groups.values():
            total = group if total is None else total.merge(group)
        return total

    def largest_first(self) -> list[tuple[Key, Group]]:
        """The groups by stored bytes, then entries, descending; ``<other>`` buckets last."""
        return sorted(
            self.groups.items(),
            key=lambda item: (OTHER in item[0], -item[1].stored_bytes, -item[1].entries, item[0]),
        )


def by_size(item: tuple[Any, Group]) -> tuple[int, int, Any]:
    """Sort key of ``(key, group)`` pairs: stored bytes, then entries, descending; then the key."""
    key, group = item
    return (-group.stored_bytes, -group.entries, key)


def _merged(pairs: Iterable[tuple[Key, Group]]) -> dict[Key, Group]:
    out: dict[Key, Group] = {}
    for key, group in pairs:
        previous = out.get(key)
        out[key] = group if previous is None else previous.merge(group)
    return out


def bound(store: Store, groups: Mapping[Key, Group], top: int) -> dict[Key, Group]:
    """Keep the ``top`` DAGs (and ``top`` tasks of each) or assets; sum the rest under ``<other>``."""
    if store is Store.ASSET:
        ranked = sorted(groups.items(), key=by_size)
        kept = ranked[:top]
        rest = [((OTHER,), group) for _, group in ranked[top:]]
        return _merged([*kept, *rest])
    by_dag: dict[str, dict[Key, Group]] = {}
    for key, group in groups.items():
        by_dag.setdefault(key[0], {})[key] = group
    dag_totals = {dag: _merged(((dag,), g) for g in tasks.values())[(dag,)] for dag, tasks in by_dag.items()}
    ranked_dags = [dag for dag, _ in sorted(dag_totals.items(), key=by_size)]
    out: list[tuple[Key, Group]] = []
    for dag in ranked_dags[:top]:
        ranked_tasks = sorted(by_dag[dag].items(), key=by_size)
        out += ranked_tasks[:top]
        out += [((dag, OTHER), group) for _, group in ranked_tasks[top:]]
    out += [((OTHER, OTHER), dag_totals[dag]) for dag in ranked_dags[top:]]
    return _merged(out)


def footprint_of(
    store: Store, rows: Iterable[Sequence[Any]], read_at: dt.datetime, duration_ms: float, top: int
) -> StoreFootprint:
    """The bounded footprint of ``store`` from its aggregate query's rows."""
    width = KEY_COLUMNS[store]
    groups = _merged(
        (tuple(UNKNOWN if v is None else str(v) for v in row[:width]), group_of(store, row[width:]))
        for row in rows
    )
    return StoreFootprint(
        store=store,
        groups=bound(store, groups, top),
        read_at=read_at,
        duration_ms=duration_ms,
        distinct=len(groups),
    )
