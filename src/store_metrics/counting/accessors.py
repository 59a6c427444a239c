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
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

from ..catalogue import OPERATION, Operation, Outcome, Store, metric_for
from ..contracts import Emitter
from .reads import _ABSENT, FirstRead


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

    def __init__(
        self,
        inner: Any,
        store: Store,
        emitter: Emitter,
        tags: Mapping[str, str],
        retry: Any = None,
        *,
        trace: Any = None,
    ) -> None:
        def bump(outcome: Outcome) -> Any:
            return emitter.counter(metric_for(store, outcome), tags).add

        def bump_error(operation: Operation) -> Any:
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

    def get(self, key: str, default: Any = None) -> Any:
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

    def set(self, key: str, value: Any, **kwargs: Any) -> Any:
        # **kwargs carries the task store's keyword-only ``retention=`` (and anything a later
        # Airflow adds) through unchanged.
        try:
            result = self._inner.set(key, value, **kwargs) if kwargs else self._inner.set(key, value)
        except Exception:
            self._err_set()
            raise
        self._write()
        return result

    def delete(self, key: str) -> Any:
        try:
            result = self._inner.delete(key)
        except Exception:
            self._err_delete()
            raise
        self._delete()
        return result

    def clear(self) -> Any:
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

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the wrapper lacks. Read the slot directly: on a half-built
        # instance (copy/pickle machinery) ``self._inner`` would land here again, forever.
        try:
            inner = object.__getattribute__(self, "_inner")
        except AttributeError:
            raise AttributeError(name) from None
        return getattr(inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
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

    def __copy__(self) -> Any:
        inner = copy.copy(self._inner)
        return _wrap(inner, self._store, self._emitter, self._tags, _retry_of(self), trace=self._trace)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        # The emitter is shared, never copied: a copy counts into the same series (and a retried
        # attempt's copy shares its one decision).
        inner = copy.deepcopy(self._inner, memo)
        return _wrap(inner, self._store, self._emitter, self._tags, _retry_of(self), trace=self._trace)

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Counters do not travel: another process has its own emitter.
        return self._inner.__reduce_ex__(protocol)


class InstrumentedAsyncStore(InstrumentedStore):
    """Adds the ``aget/aset/adelete/aclear`` methods, for accessors that have them."""

    __slots__ = ()

    async def aget(self, key: str, default: Any = None) -> Any:
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

    async def aset(self, key: str, value: Any, **kwargs: Any) -> Any:
        try:
            result = await (
                self._inner.aset(key, value, **kwargs) if kwargs else self._inner.aset(key, value)
            )
        except Exception:
            self._err_set()
            raise
        self._write()
        return result

    async def adelete(self, key: str) -> Any:
        try:
            result = await self._inner.adelete(key)
        except Exception:
            self._err_delete()
            raise
        self._delete()
        return result

    async def aclear(self) -> Any:
        try:
            result = await self._inner.aclear()
        except Exception:
            self._err_clear()
            raise
        self._clear()
        return result


def _retried_answer(self: Any, value: Any, default: Any) -> Any:
    """What a retried attempt's read answered: the call's counter, then the attempt's decision."""
    found = value is not _ABSENT
    (self._found if found else self._absent)()
    self._retry.decide(found)
    return value if found else default


def _retried_get(self: Any, key: str, default: Any = None) -> Any:
    """``get`` of a retried attempt's task store (a read that raised counts its error, decides nothing)."""
    try:
        value = self._inner.get(key, _ABSENT)
    except Exception:
        self._err_get()
        raise
    return _retried_answer(self, value, default)


async def _retried_aget(self: Any, key: str, default: Any = None) -> Any:
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

    def __getitem__(self, asset: Any) -> Any:
        this: Any = self
        inner_accessor = this._inner[asset]
        children: dict[int, Any] = this._children
        wrapped = children.get(id(inner_accessor))
        if wrapped is None or unwrap(wrapped) is not inner_accessor:
            wrapped = _wrap(inner_accessor, this._store, this._emitter, this._tags, trace=this._trace)
            children[id(inner_accessor)] = wrapped
        return wrapped


class InstrumentedAssetMapping(_MappingMixin, InstrumentedStore):
    """The asset mapping: per-asset accessors by subscript, and the single-asset sugar."""

    __slots__ = ("_children",)

    def __init__(
        self,
        inner: Any,
        store: Store,
        emitter: Emitter,
        tags: Mapping[str, str],
        retry: Any = None,
        *,
        trace: Any = None,
    ) -> None:
        super().__init__(inner, store, emitter, tags, retry, trace=trace)
        self._init_mapping()


class InstrumentedAsyncAssetMapping(_MappingMixin, InstrumentedAsyncStore):
    """The asset mapping with async sugar methods."""

    __slots__ = ("_children",)

    def __init__(
        self,
        inner: Any,
        store: Store,
        emitter: Emitter,
        tags: Mapping[str, str],
        retry: Any = None,
        *,
        trace: Any = None,
    ) -> None:
        super().__init__(inner, store, emitter, tags, retry, trace=trace)
        self._init_mapping()


_WRAPPERS = (InstrumentedStore,)
ASYNC_METHODS = ("aget", "aset", "adelete", "aclear")
_ALL_ASYNC = frozenset(ASYNC_METHODS)


@functools.cache
def _class_for(
    mapping: bool, async_methods: frozenset[str], retried: bool = False, traced: bool = False
) -> type:
    """The wrapper class for an inner accessor with exactly these async methods (a retried attempt's
    task store: its ``get`` and, where it has one, ``aget`` also decide ``FirstRead``; a traced
    wrapper: every method also a span, ``tracing``, which decides a retry itself)."""
    namespace: dict[str, Any]
    if traced:
        from . import tracing

        base = _class_for(mapping, async_methods)
        names = ("get", "set", "delete", "clear", *sorted(async_methods))
        namespace = {"__slots__": (), **{name: tracing.METHODS[name] for name in names}}
        return type(f"{base.__name__}[traced]", (base,), namespace)
    if retried:
        base = _class_for(mapping, async_methods)
        namespace = {"__slots__": (), "get": _retried_get}
        if "aget" in async_methods:
            namespace["aget"] = _retried_aget
        return type(f"{base.__name__}[retried]", (base,), namespace)
    if not async_methods:
        return InstrumentedAssetMapping if mapping else InstrumentedStore
    if async_methods == _ALL_ASYNC:
        return InstrumentedAsyncAssetMapping if mapping else InstrumentedAsyncStore
    # A partial set (no Airflow release has one, but wrap whatever exists and nothing more).
    base = InstrumentedAssetMapping if mapping else InstrumentedStore
    namespace = {"__slots__": ()}
    for name in sorted(async_methods):
        namespace[name] = InstrumentedAsyncStore.__dict__[name]
    return type(f"{base.__name__}[{','.join(sorted(async_methods))}]", (base,), namespace)


def is_instrumented(obj: object) -> bool:
    """Whether ``obj`` is one of our wrappers (``isinstance`` is fooled on purpose, so check the type)."""
    return issubclass(type(obj), _WRAPPERS)


def unwrap(obj: Any) -> Any:
    """The accessor inside a wrapper, or ``obj`` itself."""
    while is_instrumented(obj):
        obj = object.__getattribute__(obj, "_inner")
    return obj


def _retry_of(wrapper: Any) -> FirstRead | None:
    retry: FirstRead | None = object.__getattribute__(wrapper, "_retry")
    return retry


def _wrap(
    inner: Any,
    store: Store,
    emitter: Emitter,
    tags: Mapping[str, str],
    retry: FirstRead | None = None,
    *,
    trace: Any = None,
) -> Any:
    async_methods = frozenset(name for name in ASYNC_METHODS if hasattr(inner, name))
    mapping = hasattr(type(inner), "__getitem__")
    cls = _class_for(mapping, async_methods, retry is not None, trace is not None)
    return cls(inner, store, emitter, tags, retry, trace=trace)


def instrument_task_store(
    inner: Any,
    emitter: Emitter,
    tags: Mapping[str, str],
    *,
    retried: bool = False,
    tracer: Any = None,
    trace_keys: bool = False,
    task_span: Any = None,
) -> Any:
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
        return _wrap(inner, Store.TASK, emitter, tags, FirstRead(emitter, tags) if retried else None)
    from . import tracing

    retry = tracing.TracedFirstRead(emitter, tags, task_span) if retried else None
    return _wrap(
        inner, Store.TASK, emitter, tags, retry, trace=tracing.Tracing(tracer, Store.TASK, trace_keys)
    )


def instrument_asset_store(
    inner: Any, emitter: Emitter, tags: Mapping[str, str], *, tracer: Any = None, trace_keys: bool = False
) -> Any:
    """Wrap ``context["asset_state_store"]`` (the mapping or one asset's accessor); ``tracer`` and
    ``trace_keys`` as for ``instrument_task_store``."""
    if is_instrumented(inner):
        return inner
    if tracer is None:
        return _wrap(inner, Store.ASSET, emitter, tags)
    from . import tracing

    return _wrap(inner, Store.ASSET, emitter, tags, trace=tracing.Tracing(tracer, Store.ASSET, trace_keys))
