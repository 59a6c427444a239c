"""The two aggregate queries: one per state store table, grouped, sizes computed in SQL.

Built with SQLAlchemy Core on Airflow's own table definitions
(``airflow.models.task_state_store.TaskStateStoreModel``, ``...asset_state_store.AssetStateStoreModel``
and ``airflow.models.asset.AssetModel``), so the columns and their types (``UtcDateTime``) are
exactly those of the installed Airflow's schema, on SQLite, PostgreSQL and MySQL. Only columns
that every supported schema has are read (``dag_id``, ``task_id``, ``value``, ``updated_at``,
``expires_at``; ``asset_id`` and the asset's ``name``): Airflow 3.4's migrations rename
``task_state_store.map_index`` to ``region_index``, add ``region_id`` to the task store and
``last_updated_by_*`` to the asset store, and none of them is read or grouped by. A task's entries
in several regions or map indexes are one group, as they are one series of the task's counters.

Nothing reads ``value`` into Python. Per group, the database returns:

* ``entries`` — ``count(*)``;
* ``bytes`` — ``sum`` of the value's size in bytes: ``octet_length(value)`` on PostgreSQL (read
  from the TOAST header, the value is not decompressed) and MySQL, ``length(CAST(value AS BLOB))``
  on SQLite (whose ``length()`` of text counts characters, and which has ``octet_length`` only
  from 3.43);
* ``external`` — entries whose value is a reference written by a worker-side custom backend
  (``[workers] state_store_backend``): the Task SDK stores ``{"__airflow_state_ref__": "<ref>"}``
  instead of the value, so its size in the table is the reference's, not the value's. Detected by
  the value's first 25 characters, for values of at most ``MAX_REF_BYTES`` (larger ones are
  data held in the table, and are never sliced);
* ``oldest`` / ``newest`` — ``min``/``max`` of ``updated_at``;
* ``expired`` (task store only) — entries whose ``expires_at`` is before ``now``, still in the
  table because retention (``airflow db clean`` / the state store cleanup) has not run yet.

The same aggregates serve the UI's State store tab (``store_metrics.ui``) for one DAG at a time:
``dag_statement`` is one ``UNION ALL`` of the task store restricted to ``:dag_id`` (through the
table's ``idx_task_state_store_lookup`` index, which leads with ``dag_id``) and the asset store
restricted to the assets that DAG uses (its schedule, its tasks' inlets and outlets: Airflow's three
reference tables, looked up by their ``dag_id`` indexes, then ``asset_state_store``'s primary key).
``dag_totals_statement`` is the task store per DAG (the deployment page).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import CompoundSelect, Integer, Select, bindparam, case, func, literal, null, select, union
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from ..catalogue import Store

#: How the Task SDK marks a value held by a worker-side backend (``_EXTERNAL_STATE_REF_KEY`` in
#: ``airflow/sdk/execution_time/context.py``), as the Execution API's ``json.dumps`` writes it.
REF_MARKER = '{"__airflow_state_ref__":'
#: A stored value longer than this is data, not a reference (references are URIs or paths: an S3
#: key is at most 1,024 bytes). Such a value is counted as held in the table, whatever it starts with.
MAX_REF_BYTES = 2048


class Column(str, enum.Enum):
    """The columns every aggregate row has after its group key(s)."""

    ENTRIES = "entries"
    BYTES = "bytes"
    EXTERNAL = "external"
    OLDEST = "oldest"
    NEWEST = "newest"
    EXPIRED = "expired"


class value_bytes(FunctionElement[int]):
    """The size of a text value in bytes, spelled for each dialect (see the module docstring)."""

    type = Integer()
    name = "value_bytes"
    inherit_cache = True


@compiles(value_bytes)
def _value_bytes_default(element: value_bytes, compiler: SQLCompiler, **kw: Any) -> str:
    return f"octet_length({compiler.process(element.clauses, **kw)})"


@compiles(value_bytes, "sqlite")
def _value_bytes_sqlite(element: value_bytes, compiler: SQLCompiler, **kw: Any) -> str:
    return f"length(CAST({compiler.process(element.clauses, **kw)} AS BLOB))"


def _tables() -> tuple[Any, Any, Any]:
    from airflow.models.asset import AssetModel
    from airflow.models.asset_state_store import AssetStateStoreModel
    from airflow.models.task_state_store import TaskStateStoreModel

    return TaskStateStoreModel.__table__, AssetStateStoreModel.__table__, AssetModel.__table__


def _asset_references() -> tuple[Any, ...]:
    """Airflow's tables saying which assets a DAG uses: its schedule, its tasks' outlets and inlets."""
    from airflow.models.asset import (
        DagScheduleAssetReference,
        TaskInletAssetReference,
        TaskOutletAssetReference,
    )

    return tuple(
        model.__table__
        for model in (DagScheduleAssetReference, TaskOutletAssetReference, TaskInletAssetReference)
    )


def _common(table: Any) -> list[Any]:
    size = value_bytes(table.c.value)
    # The size test comes first and CASE evaluates lazily: a large value is never sliced (on
    # PostgreSQL its TOAST chunks are not fetched); no reference is that long.
    marked = func.substr(table.c.value, 1, len(REF_MARKER)) == REF_MARKER
    external = case((size > MAX_REF_BYTES, 0), (marked, 1), else_=0)
    return [
        func.count().label(Column.ENTRIES.value),
        func.coalesce(func.sum(size), 0).label(Column.BYTES.value),
        func.coalesce(func.sum(external), 0).label(Column.EXTERNAL.value),
        func.min(table.c.updated_at).label(Column.OLDEST.value),
        func.max(table.c.updated_at).label(Column.NEWEST.value),
    ]


def _expired(task: Any) -> Any:
    """Entries past their ``expires_at`` at ``:now``."""
    now = bindparam("now", type_=task.c.expires_at.type)
    expired = case((task.c.expires_at < now, 1), else_=0)
    return func.coalesce(func.sum(expired), 0).label(Column.EXPIRED.value)


def task_statement() -> Select[Any]:
    """Per (dag_id, task_id): entries, bytes, external, oldest, newest, expired. Takes ``:now``."""
    task, _, _ = _tables()
    return select(task.c.dag_id, task.c.task_id, *_common(task), _expired(task)).group_by(
        task.c.dag_id, task.c.task_id
    )


def asset_statement() -> Select[Any]:
    """Per asset name: entries, bytes, external, oldest, newest (the asset store has no expiry)."""
    return _per_asset(lambda asset: [asset.c.name])


def _per_asset(keys: Callable[[Any], list[Any]], extra: Sequence[Any] = (), where: Any = None) -> Select[Any]:
    """The asset store grouped by its asset's name: ``keys(asset table)`` first, then the aggregates."""
    _, state, asset = _tables()
    stmt = select(*keys(asset), *_common(state), *extra).select_from(
        state.outerjoin(asset, state.c.asset_id == asset.c.id)
    )
    if where is not None:
        stmt = stmt.where(where(state))
    return stmt.group_by(asset.c.name)


def statement(store: Store) -> Select[Any]:
    """The aggregate query of ``store``'s table."""
    return task_statement() if store is Store.TASK else asset_statement()


#: How many leading columns of a row of ``statement`` are its group key.
KEY_COLUMNS: dict[Store, int] = {Store.TASK: 2, Store.ASSET: 1}


# -- for the UI (store_metrics.ui): one DAG, and the deployment per DAG ---------------------------------


def dag_asset_ids() -> CompoundSelect[Any]:
    """The ids of the assets the DAG ``:dag_id`` uses (schedule, outlets, inlets), each once."""
    dag_id: Any = bindparam("dag_id")
    return union(*(select(ref.c.asset_id).where(ref.c.dag_id == dag_id) for ref in _asset_references()))


def dag_statement() -> CompoundSelect[Any]:
    """One DAG's footprint in one statement: per task, then per asset it uses. Takes ``:dag_id``, ``:now``.

    Each row: the store (a ``Store`` value), the task id or the asset name, then the columns of
    ``Column`` (``expired`` is NULL for an asset).
    """
    task, _, _ = _tables()
    tasks = (
        select(
            literal(Store.TASK.value).label("store"),
            task.c.task_id.label("name"),
            *_common(task),
            _expired(task),
        )
        .where(task.c.dag_id == bindparam("dag_id"))
        .group_by(task.c.task_id)
    )
    assets = _per_asset(
        lambda asset: [literal(Store.ASSET.value).label("store"), asset.c.name.label("name")],
        extra=[null().label(Column.EXPIRED.value)],
        where=lambda state: state.c.asset_id.in_(dag_asset_ids()),
    )
    return tasks.union_all(assets)


def dag_totals_statement() -> Select[Any]:
    """Per dag_id: entries, bytes, external, oldest, newest, expired. Takes ``:now``."""
    task, _, _ = _tables()
    return select(task.c.dag_id, *_common(task), _expired(task)).group_by(task.c.dag_id)


def asset_users_statement() -> CompoundSelect[Any]:
    """(asset name, dag_id) of every DAG using an asset named in ``:names`` (a list), each pair once."""
    _, _, asset = _tables()
    names: Any = bindparam("names", expanding=True)
    return union(
        *(
            select(asset.c.name, ref.c.dag_id)
            .select_from(ref.join(asset, ref.c.asset_id == asset.c.id))
            .where(asset.c.name.in_(names))
            for ref in _asset_references()
        )
    )
