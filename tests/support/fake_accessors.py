"""Small in-memory stand-ins with the shape of the Task SDK's state store accessors.

``TaskStateStoreAccessor`` of Task SDK 1.3 (sync only) and of 1.4 (with ``aget/aset/adelete/aclear``),
``AssetStateStoreAccessor`` and ``AssetStateStoreAccessors``. They stand in for the supervisor round
trip a real accessor makes, which only exists inside a running Airflow task;
``tests/airflow/test_accessor_shapes.py`` checks them against the installed Airflow classes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from store_metrics import catalogue

TAGS = catalogue.task_tags(dag_id="d", task_id="t", run_type="manual", operator="X")
NEVER_EXPIRE = object()
#: FakeTaskStore.set's own default for ``retention``: the keyword was not passed at all.
NOT_GIVEN: Any = object()


class Boom(RuntimeError):
    """What the supervisor round trip raises (AirflowRuntimeError in real Airflow)."""


class FakeTaskStore:
    """Shaped like TaskStateStoreAccessor in Task SDK 1.3.2 (sync only)."""

    def __init__(self, ti_id: str = "ti-1") -> None:
        self._ti_id = ti_id
        self.data: dict[str, Any] = {}
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.fail: BaseException | None = None
        self.backend_cleared = 0

    def _call(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((name, args, kwargs))
        if self.fail is not None:
            raise self.fail

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FakeTaskStore):
            return False
        return self._ti_id == other._ti_id

    def __hash__(self) -> int:
        return hash(self._ti_id)

    def __repr__(self) -> str:
        return f"<TaskStateStoreAccessor ti_id={self._ti_id}>"

    def get(self, key: str, default: Any = None) -> Any:
        self._call("get", key, default)
        return self.data.get(key, default)

    def set(self, key: str, value: Any, *, retention: Any = NOT_GIVEN) -> None:
        # Records the keywords it was given, not its defaults: a caller that passes
        # retention=None is told apart from one that passes nothing.
        given = {} if retention is NOT_GIVEN else {"retention": retention}
        self._call("set", key, value, **given)
        if value is None:
            raise ValueError("Cannot set value as None")
        self.data[key] = value

    def delete(self, key: str) -> None:
        self._call("delete", key)
        self.data.pop(key, None)

    def clear(self) -> None:
        self._call("clear")
        self.data.clear()

    def _clear_backend_only(self) -> None:
        self.backend_cleared += 1


class FakeAsyncTaskStore(FakeTaskStore):
    """Shaped like TaskStateStoreAccessor in Task SDK 1.4: the sync methods and their async twins."""

    async def aget(self, key: str, default: Any = None) -> Any:
        await asyncio.sleep(0)
        return self.get(key, default)

    async def aset(self, key: str, value: Any, *, retention: Any = NOT_GIVEN) -> None:
        await asyncio.sleep(0)
        self.set(key, value, **({} if retention is NOT_GIVEN else {"retention": retention}))

    async def adelete(self, key: str) -> None:
        await asyncio.sleep(0)
        self.delete(key)

    async def aclear(self) -> None:
        await asyncio.sleep(0)
        self.clear()


class FakeAssetStore:
    """Shaped like AssetStateStoreAccessor: sync and async get/set/delete/clear."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.data: dict[str, Any] = {}
        self.fail: BaseException | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeAssetStore) and self._name == other._name

    def __hash__(self) -> int:
        return hash((self._name, None))

    def __repr__(self) -> str:
        return f"<AssetStateStoreAccessor name={self._name!r}>"

    def _check(self) -> None:
        if self.fail is not None:
            raise self.fail

    def get(self, key: str, default: Any = None) -> Any:
        self._check()
        return self.data.get(key, default)

    async def aget(self, key: str, default: Any = None) -> Any:
        await asyncio.sleep(0)
        return self.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self._check()
        self.data[key] = value

    async def aset(self, key: str, value: Any) -> None:
        await asyncio.sleep(0)
        self.set(key, value)

    def delete(self, key: str) -> None:
        self._check()
        self.data.pop(key, None)

    async def adelete(self, key: str) -> None:
        await asyncio.sleep(0)
        self.delete(key)

    def clear(self) -> None:
        self._check()
        self.data.clear()

    async def aclear(self) -> None:
        await asyncio.sleep(0)
        self.clear()


class Asset:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Asset(name={self.name!r})"


class FakeAssetStores:
    """Shaped like AssetStateStoreAccessors: subscript by asset, or single-asset sugar."""

    def __init__(self, *names: str) -> None:
        self._by_name = {n: FakeAssetStore(n) for n in names}

    def __getitem__(self, key: Asset) -> FakeAssetStore:
        try:
            return self._by_name[key.name]
        except KeyError:
            raise KeyError(f"{key!r} is not in this task's inlets or outlets") from None

    def _single_accessor(self) -> FakeAssetStore:
        if len(self._by_name) != 1:
            raise ValueError(f"Task has {len(self._by_name)} concrete inlets and outlets")
        return next(iter(self._by_name.values()))

    def get(self, key: str, default: Any = None) -> Any:
        return self._single_accessor().get(key, default)

    async def aget(self, key: str, default: Any = None) -> Any:
        return await self._single_accessor().aget(key, default)

    def set(self, key: str, value: Any) -> None:
        self._single_accessor().set(key, value)

    async def aset(self, key: str, value: Any) -> None:
        await self._single_accessor().aset(key, value)

    def delete(self, key: str) -> None:
        self._single_accessor().delete(key)

    async def adelete(self, key: str) -> None:
        await self._single_accessor().adelete(key)

    def clear(self) -> None:
        self._single_accessor().clear()

    async def aclear(self) -> None:
        await self._single_accessor().aclear()

    def __repr__(self) -> str:
        return f"<AssetStateStoreAccessors [{', '.join(f'name={k!r}' for k in self._by_name)}]>"
