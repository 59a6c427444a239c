"""Instrumented wrappers around Airflow's state store accessors.

They work on anything shaped like the Task SDK's accessors (no Airflow import here):

* ``instrument_task_store`` wraps ``context["task_state_store"]``;
* ``instrument_asset_store`` wraps ``context["asset_state_store"]``, either the mapping
  (``store[MY_ASSET].get(...)`` and the single-asset sugar ``store.get(...)``) or one
  per-asset accessor.

Each completed call bumps exactly one counter; the tag set is fixed when the wrapper is made,
so a call costs one integer add. Found vs absent is decided exactly: the inner ``get`` is given
a private sentinel as ``default`` (the default never leaves the process), so a stored value
equal to the caller's default still counts as ``read_found``. An exception from the inner call
reaches the caller as the very same object and counts as ``<store>.error{operation=...}``.
Return values are passed back untouched; every other attribute, ``repr``, ``str``, ``==`` and
``hash`` pass through to the inner accessor, and ``isinstance`` sees the inner accessor's class.
The async methods ``aget/aset/adelete/aclear`` exist on a wrapper exactly when the inner accessor
has them. ``copy.copy``/``copy.deepcopy`` give a wrapper around a copy of the inner accessor
(same counters); pickling a wrapper pickles the inner accessor.

A retried attempt's task store (``instrument_task_store(..., retried=True)``) is a subclass whose
``get``/``aget`` also decide, at the first read that answers, whether the retry resumed: one
``task_state_store.retry_resumed`` (found) or ``retry_not_resumed`` (absent), once per wrapper
and its copies, whichever thread or coroutine reads first. A read that raises decides nothing.
Every other wrapper keeps the one-add ``get``.

A wrapper made with a ``tracer`` is a subclass whose methods (``tracing``) also make each call
an OpenTelemetry CLIENT span; which class a wrapper is gets decided once, when it is made, so a
wrapper without a tracer runs exactly the methods above and imports no OpenTelemetry.

What an accessor is (its methods, as the Task SDK defines them) is said by the Protocols of
``stores``; the wrappers are typed as the accessor they wrap, whose stand-in they are.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, SupportsIndex, TypeVar, cast

from ..catalogue import OPERATION, Operation, Outcome, Store, metric_for
from ..contracts import Emitter
from .reads import _ABSENT, FirstRead
from .stores import AssetStores, AsyncStateStore, StateStore

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer
    from pydantic import JsonValue

    from .stores import AssetKey
    from .tracing import Tracing

#: A counter series' ``add``, looked up once per wrapper: a call costs one attribute load and one add.
Bump = Callable[[], None]
#: The accessor a wrapper stands in for (``instrument_*`` return it typed as what they were given).
S = TypeVar("S", bound=StateStore)
T = TypeVar("T")


class InstrumentedStore:
    """Wraps one accessor (task store, one asset's store, or the asset mapping's sugar)."""

    __slots__ = (
        "__weakref__",
        "_absent",
        "_clear",
        "_delete",
        "_emitter",
        "_err_clear",
        "_err_delete",
        "_err_get",
        "_err_set",
        "_found",
        "_inner",
        "_retry",
        "_store",
        "_tags",
        "_trace",
        "_write",
    )

    _inner: StateStore
    _store: Store
    _emitter: Emitter
    _tags: dict[str, str]
    _retry: FirstRead | None
    _trace: Tracing | None
    _found: Bump
    _absent: Bump
    _write: Bump
    _delete: Bump
    _clear: Bump
    _err_get: Bump
    _err_set: Bump
    _err_delete: Bump
    _err_clear: Bump

    def __init__(
        self,
        inner: StateStore,
        store: Store,
        emitter: Emitter,
        tags: Mapping[str, str],
        retry: FirstRead | None = None,
        *,
        trace: Tracing | None = None,
    ) -> None:
        def bump(outcome: Outcome) -> Bump:
            return emitter.counter(metric_for(store, outcome), tags).add

        def bump_error(operation: Operation) -> Bump:
            return emitter.counter(metric_for(store, Outcome.ERROR), {**tags, OPERATION: operation.value}).add

        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_store", store)
        object.__setattr__(self, "_emitter", emitter)
        object.__setattr__(self, "_tags", dict(tags))
        #: A retried attempt's ``FirstRead`` (its ``get``/``aget`` decide it), else ``None``.
        object.__setattr__(self, "_retry", retry)
        #: A traced wrapper's ``Tracing`` (only its methods read it), else ``None``.
        object.__setattr__(self, "_trace", trace)
        # Bound methods, looked up once: a call then costs one attribute load and one add.
        object.__setattr__(self, "_found", bump(Outcome.READ_FOUND))
        object.__setattr__(self, "_absent", bump(Outcome.READ_ABSENT))
        object.__setattr__(self, "_write", bump(Outcome.WRITE))
        object.__setattr__(self, "_delete", bump(Outcome.DELETE))
        object.__setattr__(self, "_clear", bump(Outcome.CLEAR))
        object.__setattr__(self, "_err_get", bump_error(Operation.GET))
        object.__setattr__(self, "_err_set", bump_error(Operation.SET))
        object.__setattr__(self, "_err_delete", bump_error(Operation.DELETE))
        object.__setattr__(self, "_err_clear", bump_error(Operation.CLEAR))

    # -- the four operations -----------------------------------------------------------------

    def get(self, key: str, default: JsonValue = None) -> JsonValue:
        try:
            value = self._inner.get(key, _ABSENT)
        except Exception:
            self._err_get()
            raise
        if value is _ABSENT:
            self._absent()
            return default
        self._found()
        return value

    def set(self, key: str, value: JsonValue, **kwargs: object) -> object:
        # **kwargs carries the task store's keyword-only ``retention=`` (and anything a later
        # Airflow adds) through unchanged.
        try:
            result = self._inner.set(key, value, **kwargs) if kwargs else self._inner.set(key, value)
        except Exception:
            self._err_set()
            raise
        self._write()
        return result

    def delete(self, key: str) -> object:
        try:
            result = self._inner.delete(key)
        except Exception:
            self._err_delete()
            raise
        self._delete()
        return result

    def clear(self) -> object:
        try:
            result = self._inner.clear()
        except Exception:
            self._err_clear()
            raise
        self._clear()
        return result

    # -- transparency ------------------------------------------------------------------------

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # isinstance(store, TaskStateStoreAccessor) keeps working for operators that check.
        return type(self._inner)

    def __getattr__(self, name: str) -> object:
        # Only reached for names the wrapper lacks. Read the slot directly: on a half-built
        # instance (copy/pickle machinery) ``self._inner`` would land here again, forever.
        try:
            inner = object.__getattribute__(self, "_inner")
        except AttributeError:
            raise AttributeError(name) from None
        return getattr(inner, name)

    def __setattr__(self, name: str, value: object) -> None:
        setattr(self._inner, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._inner, name)

    def __repr__(self) -> str:
        return repr(self._inner)

    def __str__(self) -> str:
        return str(self._inner)

    def __eq__(self, other: object) -> bool:
        return bool(self._inner == unwrap(other))

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._inner)

    def __dir__(self) -> list[str]:
        return dir(self._inner)

    def __copy__(self) -> InstrumentedStore:
        inner = copy.copy(self._inner)
        return _wrap(inner, self._store, self._emitter, self._tags, _retry_of(self), trace=self._trace)

    def __deepcopy__(self, memo: dict[int, object]) -> InstrumentedStore:
        # The emitter is shared, never copied: a copy counts into the same series (and a retried
        # attempt's copy shares its one decision).
        inner = copy.deepcopy(self._inner, memo)
        return _wrap(inner, self._store, self._emitter, self._tags, _retry_of(self), trace=self._trace)

    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[object, ...]:
        # Counters do not travel: another process has its own emitter.
        return self._inner.__reduce_ex__(protocol)


class InstrumentedAsyncStore(InstrumentedStore):
    """Adds the ``aget/aset/adelete/aclear`` methods, for accessors that have them."""

    __slots__ = ()

    _inner: AsyncStateStore

    async def aget(self, key: str, default: JsonValue = None) -> JsonValue:
        try:
            value = await self._inner.aget(key, _ABSENT)
        except Exception:
            self._err_get()
            raise
        if value is _ABSENT:
            self._absent()
            return default
        self._found()
        return value

    async def aset(self, key: str, value: JsonValue, **kwargs: object) -> object:
        try:
            result = await (
                self._inner.aset(key, value, **kwargs) if kwargs else self._inner.aset(key, value)
            )
        except Exception:
            self._err_set()
            raise
        self._write()
        return result

    async def adelete(self, key: str) -> object:
        try:
            result = await self._inner.adelete(key)
        except Exception:
            self._err_delete()
            raise
        self._delete()
        return result

    async def aclear(self) -> object:
        try:
            result = await self._inner.aclear()
        except Exception:
            self._err_clear()
            raise
        self._clear()
        return result


if TYPE_CHECKING:

    class _Retried(InstrumentedAsyncStore):
        """A retried attempt's task store, as its ``get``/``aget`` see it (for type checkers only:
        the class is made by ``_class_for``, one per base)."""

        _retry: FirstRead


def _retried_answer(self: _Retried, value: JsonValue, default: JsonValue) -> JsonValue:
    """What a retried attempt's read answered: the call's counter, then the attempt's decision."""
    found = value is not _ABSENT
    (self._found if found else self._absent)()
    self._retry.decide(found)
    return value if found else default


def _retried_get(self: _Retried, key: str, default: JsonValue = None) -> JsonValue:
    """``get`` of a retried attempt's task store (a read that raised counts its error, decides nothing)."""
    try:
        value = self._inner.get(key, _ABSENT)
    except Exception:
        self._err_get()
        raise
    return _retried_answer(self, value, default)


async def _retried_aget(self: _Retried, key: str, default: JsonValue = None) -> JsonValue:
    """``aget`` of a retried attempt's task store, as ``_retried_get``."""
    try:
        value = await self._inner.aget(key, _ABSENT)
    except Exception:
        self._err_get()
        raise
    return _retried_answer(self, value, default)


class _MappingMixin:
    """``store[MY_ASSET]`` returns that asset's accessor, instrumented, the same object each time."""

    __slots__ = ()

    def _init_mapping(self) -> None:
        object.__setattr__(self, "_children", {})

    def __getitem__(self: _Mapping, key: AssetKey) -> AsyncStateStore:
        inner_accessor = self._inner[key]
        children = self._children
        wrapped = children.get(id(inner_accessor))
        if wrapped is None or unwrap(wrapped) is not inner_accessor:
            # It stands in for the asset's accessor (the same methods); made once per asset.
            wrapped = cast(
                "AsyncStateStore",
                _wrap(inner_accessor, self._store, self._emitter, self._tags, trace=self._trace),
            )
            children[id(inner_accessor)] = wrapped
        return wrapped


if TYPE_CHECKING:

    class _Mapping(Protocol):
        """What the mixin's ``__getitem__`` reads of the mapping wrapper it is mixed into."""

        _inner: AssetStores
        _store: Store
        _emitter: Emitter
        _tags: dict[str, str]
        _trace: Tracing | None
        _children: dict[int, AsyncStateStore]


class InstrumentedAssetMapping(_MappingMixin, InstrumentedStore):
    """The asset mapping: per-asset accessors by subscript, and the single-asset sugar."""

    __slots__ = ("_children",)

    _inner: AssetStores
    #: Each asset's wrapper, by the id of the accessor it wraps.
    _children: dict[int, AsyncStateStore]

    def __init__(
        self,
        inner: AssetStores,
        store: Store,
        emitter: Emitter,
        tags: Mapping[str, str],
        retry: FirstRead | None = None,
        *,
        trace: Tracing | None = None,
    ) -> None:
        super().__init__(inner, store, emitter, tags, retry, trace=trace)
        self._init_mapping()


class InstrumentedAsyncAssetMapping(_MappingMixin, InstrumentedAsyncStore):
    """The asset mapping with async sugar methods."""

    __slots__ = ("_children",)

    _inner: AssetStores
    #: Each asset's wrapper, by the id of the accessor it wraps.
    _children: dict[int, AsyncStateStore]

    def __init__(
        self,
        inner: AssetStores,
        store: Store,
        emitter: Emitter,
        tags: Mapping[str, str],
        retry: FirstRead | None = None,
        *,
        trace: Tracing | None = None,
    ) -> None:
        super().__init__(inner, store, emitter, tags, retry, trace=trace)
        self._init_mapping()


_WRAPPERS = (InstrumentedStore,)
ASYNC_METHODS = ("aget", "aset", "adelete", "aclear")
_ALL_ASYNC = frozenset(ASYNC_METHODS)


@functools.cache
def _class_for(
    mapping: bool, async_methods: frozenset[str], retried: bool = False, traced: bool = False
) -> type[InstrumentedStore]:
    """The wrapper class for an inner accessor with exactly these async methods (a retried attempt's
    task store: its ``get`` and, where it has one, ``aget`` also decide ``FirstRead``; a traced
    wrapper: every method also a span, ``tracing``, which decides a retry itself)."""
    namespace: dict[str, object]
    if traced:
        from . import tracing

        base = _class_for(mapping, async_methods)
        names = ("get", "set", "delete", "clear", *sorted(async_methods))
        namespace = {"__slots__": (), **{name: tracing.METHODS[name] for name in names}}
        return _subclass(f"{base.__name__}[traced]", base, namespace)
    if retried:
        base = _class_for(mapping, async_methods)
        namespace = {"__slots__": (), "get": _retried_get}
        if "aget" in async_methods:
            namespace["aget"] = _retried_aget
        return _subclass(f"{base.__name__}[retried]", base, namespace)
    if not async_methods:
        return InstrumentedAssetMapping if mapping else InstrumentedStore
    if async_methods == _ALL_ASYNC:
        return InstrumentedAsyncAssetMapping if mapping else InstrumentedAsyncStore
    # A partial set (no Airflow release has one, but wrap whatever exists and nothing more).
    base = InstrumentedAssetMapping if mapping else InstrumentedStore
    namespace = {"__slots__": ()}
    for name in sorted(async_methods):
        namespace[name] = InstrumentedAsyncStore.__dict__[name]
    return _subclass(f"{base.__name__}[{','.join(sorted(async_methods))}]", base, namespace)


def _subclass(
    name: str, base: type[InstrumentedStore], namespace: dict[str, object]
) -> type[InstrumentedStore]:
    """A subclass of ``base`` with these methods (made once per kind of wrapper, ``_class_for``)."""
    return cast("type[InstrumentedStore]", type(name, (base,), namespace))


def is_instrumented(obj: object) -> bool:
    """Whether ``obj`` is one of our wrappers (``isinstance`` is fooled on purpose, so check the type)."""
    return issubclass(type(obj), _WRAPPERS)


def unwrap(obj: T) -> T:
    """The accessor inside a wrapper, or ``obj`` itself."""
    while is_instrumented(obj):
        obj = object.__getattribute__(obj, "_inner")
    return obj


def _retry_of(wrapper: InstrumentedStore) -> FirstRead | None:
    retry: FirstRead | None = object.__getattribute__(wrapper, "_retry")
    return retry


def _wrap(
    inner: StateStore,
    store: Store,
    emitter: Emitter,
    tags: Mapping[str, str],
    retry: FirstRead | None = None,
    *,
    trace: Tracing | None = None,
) -> InstrumentedStore:
    async_methods = frozenset(name for name in ASYNC_METHODS if hasattr(inner, name))
    mapping = hasattr(type(inner), "__getitem__")
    cls = _class_for(mapping, async_methods, retry is not None, trace is not None)
    return cls(inner, store, emitter, tags, retry, trace=trace)


def instrument_task_store(
    inner: S,
    emitter: Emitter,
    tags: Mapping[str, str],
    *,
    retried: bool = False,
    tracer: Tracer | None = None,
    trace_keys: bool = False,
    task_span: Span | None = None,
) -> S:
    """Wrap ``context["task_state_store"]``. Already-wrapped accessors are returned as they are.

    ``retried``: the store of a retried attempt's first execution (``try_number >= 2``, not resumed
    from a deferral or a reschedule): its first read that answers also counts
    ``task_state_store.retry_resumed`` or ``retry_not_resumed``, once.
    ``tracer``: an OpenTelemetry tracer: every call is also a CLIENT span (``tracing``), its key
    on it only with ``trace_keys``; a retried attempt's decision also goes on ``task_span``. Without
    a tracer the wrapper is the counting one, unchanged.
    """
    if is_instrumented(inner):
        return inner
    if tracer is None:
        wrapper = _wrap(inner, Store.TASK, emitter, tags, FirstRead(emitter, tags) if retried else None)
    else:
        from . import tracing

        retry = tracing.TracedFirstRead(emitter, tags, task_span) if retried else None
        wrapper = _wrap(
            inner, Store.TASK, emitter, tags, retry, trace=tracing.Tracing(tracer, Store.TASK, trace_keys)
        )
    # The wrapper stands in for the accessor: same methods, and isinstance sees the accessor's class.
    return cast("S", wrapper)


def instrument_asset_store(
    inner: S,
    emitter: Emitter,
    tags: Mapping[str, str],
    *,
    tracer: Tracer | None = None,
    trace_keys: bool = False,
) -> S:
    """Wrap ``context["asset_state_store"]`` (the mapping or one asset's accessor); ``tracer`` and
    ``trace_keys`` as for ``instrument_task_store``."""
    if is_instrumented(inner):
        return inner
    if tracer is None:
        wrapper = _wrap(inner, Store.ASSET, emitter, tags)
    else:
        from . import tracing

        wrapper = _wrap(
            inner, Store.ASSET, emitter, tags, trace=tracing.Tracing(tracer, Store.ASSET, trace_keys)
        )
    return cast("S", wrapper)
