"""A snapshot as gauge values: (catalogue metric, tags, value), the same for every exporter.

Ages are computed at the moment of reporting from the stored ``updated_at`` values, so they grow
between two readings as they do in the table. A group whose bytes are unknown (some entries hold
a reference to a custom backend) has no ``bytes`` series. The inventory's own health comes last:
``state_store_inventory.up`` per store, and for a store read at least once the duration of its
last good query and the age of the footprint shown.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping

from .. import catalogue
from ..catalogue import ASSET, DAG_ID, STORE, TASK_ID, Metric, Store
from .collect import Snapshot
from .footprint import Group, Key

#: The ``store`` tag's value of each store (as on the API server's metrics).

Series = tuple[Metric, dict[str, str], float]


def _metric(store: Store, name: str) -> Metric:
    return catalogue.get(f"{store.value}.footprint.{name}")


def _tags(store: Store, key: Key) -> dict[str, str]:
    if store is Store.TASK:
        return {DAG_ID: key[0], TASK_ID: key[1]}
    return {ASSET: key[0]}


def _age(now: dt.datetime, then: dt.datetime | None) -> float | None:
    return None if then is None else max(0.0, (now - then).total_seconds())


def group_series(store: Store, key: Key, group: Group, now: dt.datetime) -> Iterator[Series]:
    """The footprint gauges of one group."""
    tags = _tags(store, key)
    values: Mapping[str, float | None] = {
        "entries": group.entries,
        "bytes": group.value_bytes,
        "oldest_age": _age(now, group.oldest),
        "newest_age": _age(now, group.newest),
        "external_entries": group.external,
    }
    if store is Store.TASK:
        values = {**values, "expired_entries": group.expired}
    for name, value in values.items():
        if value is not None:
            yield _metric(store, name), tags, float(value)


def snapshot_series(snapshot: Snapshot, now: dt.datetime | None = None) -> Iterator[Series]:
    """Every gauge of ``snapshot``: the footprint of each store read so far, then the health gauges."""
    now = now or dt.datetime.now(dt.timezone.utc)
    for store in Store:
        footprint = snapshot.footprints.get(store)
        if footprint is not None:
            for key, group in footprint.largest_first():
                yield from group_series(store, key, group, now)
    for store in Store:
        tags = {STORE: store.tag}
        if store in snapshot.up:
            yield catalogue.INVENTORY_UP, tags, float(snapshot.up[store])
        footprint = snapshot.footprints.get(store)
        if footprint is not None:
            yield catalogue.INVENTORY_QUERY_DURATION, tags, footprint.duration_ms
            yield catalogue.INVENTORY_FOOTPRINT_AGE, tags, _age(now, footprint.read_at) or 0.0
