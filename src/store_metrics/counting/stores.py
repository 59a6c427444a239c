"""What a state store accessor is: the Protocols the wrappers wrap, as the Task SDK defines them.

The Task SDK (``airflow.sdk.execution_time.context``) has three accessor classes:

* ``TaskStateStoreAccessor`` (``context["task_state_store"]``): ``get``, ``set`` (with a
  keyword-only ``retention``), ``delete``, ``clear``: a ``StateStore``. Task SDK 1.4 (Airflow 3.4)
  adds the async four, which makes it an ``AsyncStateStore``;
* ``AssetStateStoreAccessor`` (one asset's store): the four and ``aget``, ``aset``, ``adelete``,
  ``aclear``: an ``AsyncStateStore``;
* ``AssetStateStoreAccessors`` (``context["asset_state_store"]``): the single-asset sugar (an
  ``AsyncStateStore``) whose subscript by asset is that asset's store: ``AssetStores``.

A value is the SDK's ``JsonValue`` (pydantic's); a method that writes returns ``object``: the
wrappers hand back whatever the inner accessor returned (``None`` from the SDK's). Airflow and
pydantic are named for type checkers only: at run time this module imports nothing but ``typing``,
and the wrappers take anything of this shape (the unit tests' in-memory stand-ins included). The
type checker holds the installed SDK's classes to these Protocols (``_the_sdk_accessors_conform``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from airflow.sdk.definitions.asset import Asset, AssetNameRef, AssetUriRef
    from airflow.sdk.execution_time.context import (
        AssetStateStoreAccessor,
        AssetStateStoreAccessors,
        TaskStateStoreAccessor,
    )
    from pydantic import JsonValue

    #: What ``AssetStores`` is subscripted by: an asset, or a reference to one by name or URI.
    AssetKey: TypeAlias = Asset | AssetNameRef | AssetUriRef


class StateStore(Protocol):
    """A state store accessor: the task's, or one asset's (sync methods)."""

    def get(self, key: str, default: JsonValue = None) -> JsonValue:
        """The stored value, or ``default`` when ``key`` is not stored."""
        ...

    def set(self, key: str, value: JsonValue) -> object:
        """Store ``value`` under ``key`` (the task's store also takes ``retention=``)."""
        ...

    def delete(self, key: str) -> object: ...

    def clear(self) -> object: ...


class AsyncStateStore(StateStore, Protocol):
    """A state store accessor with the async methods too (an asset's; the task's from Task SDK 1.4)."""

    async def aget(self, key: str, default: JsonValue = None) -> JsonValue: ...

    async def aset(self, key: str, value: JsonValue) -> object: ...

    async def adelete(self, key: str) -> object: ...

    async def aclear(self) -> object: ...


class AssetStores(AsyncStateStore, Protocol):
    """``context["asset_state_store"]``: each asset's store by subscript, and the single-asset sugar."""

    def __getitem__(self, key: AssetKey) -> AsyncStateStore: ...


if TYPE_CHECKING:

    def _the_sdk_accessors_conform(
        task: TaskStateStoreAccessor, asset: AssetStateStoreAccessor, assets: AssetStateStoreAccessors
    ) -> tuple[StateStore, AsyncStateStore, AssetStores]:
        # Never called: mypy checks each SDK class against its Protocol, structurally.
        return task, asset, assets
