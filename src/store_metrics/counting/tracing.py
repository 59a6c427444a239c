"""Each state store call as an OpenTelemetry CLIENT span: the traced wrappers' methods.

A wrapper made with a tracer (``store_metrics.counting.accessors.instrument_task_store`` and
``instrument_asset_store``'s ``tracer=``) is a subclass of the counting wrapper whose methods are
the ones below: each call counts exactly as the untraced wrapper does, inside a span named and
attributed per OpenTelemetry's database client conventions:

* name ``{db.operation.name} {db.collection.name}``, e.g. ``get task_state_store``; kind CLIENT;
* ``db.system.name`` = ``airflow.state_store``, ``db.collection.name`` = the store,
  ``db.operation.name`` = ``get`` / ``set`` / ``delete`` / ``clear`` (the async methods too);
* ``store_metrics.outcome`` = ``found`` / ``absent`` / ``written`` / ``deleted`` / ``cleared`` /
  ``error``; on error also ``error.type`` (the exception's fully qualified class name), the
  exception recorded as an event and the status ERROR: the exception itself still reaches the
  caller unchanged;
* ``store_metrics.key``: only with ``keys=True`` (``[store_metrics] traces_keys``);
* ``store_metrics.retry`` = ``resumed`` / ``started_over``: on the span of the read that decided
  whether a retried attempt resumed, and on the task's own span.

The span is the current span while the inner call runs, so what the call does (the Task SDK's
request to its supervisor carries the current context) belongs to it. The counter each call bumps
(and a retry's decision counter) keeps the span's context when the span is sampled, as the
exemplar of the ``otel`` backend's next collection (``store_metrics.backends.otel.observed``).
Nothing here is imported unless a wrapper is traced: with traces off, a call runs the counting
wrapper's methods unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from ..catalogue import Store
from ..contracts import Emitter
from .reads import _ABSENT, FirstRead

if TYPE_CHECKING:
    from pydantic import JsonValue

    from .accessors import Bump, InstrumentedAsyncStore, InstrumentedStore

    class _Traced(InstrumentedStore):
        """A traced wrapper, as its methods see it (for type checkers only: ``accessors`` makes the
        class, a subclass of the counting one with these methods)."""

        _trace: Tracing

    class _TracedAsync(InstrumentedAsyncStore):
        """A traced wrapper of an accessor with the async methods, as ``_Traced``."""

        _trace: Tracing


DB_SYSTEM_NAME: Final = "db.system.name"
DB_COLLECTION_NAME: Final = "db.collection.name"
DB_OPERATION_NAME: Final = "db.operation.name"
ERROR_TYPE: Final = "error.type"
OUTCOME: Final = "store_metrics.outcome"
KEY: Final = "store_metrics.key"
RETRY: Final = "store_metrics.retry"
#: ``db.system.name`` of every span: the state store, whatever backend Airflow keeps it in.
SYSTEM: Final = "airflow.state_store"
RESUMED: Final = "resumed"
STARTED_OVER: Final = "started_over"
#: The instrumentation scope the spans are made under.
SCOPE: Final = "store_metrics"

_CLIENT = SpanKind.CLIENT
_attach = otel_context.attach
_detach = otel_context.detach
_in_context = trace.set_span_in_context


def tracer_from(provider: TracerProvider | None = None) -> Tracer:
    """This package's tracer, from ``provider`` or the global tracer provider (Airflow's)."""
    from .. import __version__

    source = provider if provider is not None else trace.get_tracer_provider()
    return source.get_tracer(SCOPE, __version__)


def has_provider() -> bool:
    """Whether a real tracer provider is set globally (not OpenTelemetry's no-op proxy)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


class Tracing:
    """What one wrapper's spans share: the tracer, each operation's name and fixed attributes."""

    __slots__ = ("attributes", "keys", "names", "tracer")

    def __init__(self, tracer: Tracer, store: Store, keys: bool = False) -> None:
        self.tracer = tracer
        self.keys = keys
        collection = store.value
        self.names: dict[str, str] = {}
        self.attributes: dict[str, dict[str, str]] = {}
        for operation in ("get", "set", "delete", "clear"):
            self.names[operation] = f"{operation} {collection}"
            self.attributes[operation] = {
                DB_SYSTEM_NAME: SYSTEM,
                DB_COLLECTION_NAME: collection,
                DB_OPERATION_NAME: operation,
            }

    def start(self, operation: str, key: str | None = None) -> Span:
        span = self.tracer.start_span(
            self.names[operation], kind=_CLIENT, attributes=self.attributes[operation]
        )
        if self.keys and key is not None:
            span.set_attribute(KEY, str(key))
        return span


def _exemplar(add: Bump, span: Span) -> None:
    """Leave ``span``'s context on the counter series ``add`` belongs to, when the span is sampled
    (the counter's exemplar: what OpenTelemetry's ``trace_based`` filter would keep)."""
    span_context = span.get_span_context()
    if span_context.trace_flags.sampled:
        # A counter of another kind (a test's stand-in) has no exemplar to keep.
        with suppress(AttributeError):
            add.__self__.exemplar = span_context  # type: ignore[attr-defined]  # a series' bound add


class TracedFirstRead(FirstRead):
    """A retried attempt's decision that also marks the task's span (current when it was made)."""

    __slots__ = ("_task_span",)

    def __init__(self, emitter: Emitter, tags: Mapping[str, str], task_span: Span | None) -> None:
        super().__init__(emitter, tags)
        self._task_span = task_span

    def decide_on(self, found: bool, span: Span) -> None:
        """Decide (once), and put the decision on the read's span and the task's span."""
        try:
            resumed, not_resumed = self._pending.pop()
        except IndexError:
            return
        bump = resumed if found else not_resumed
        bump()
        _exemplar(bump, span)
        decision = RESUMED if found else STARTED_OVER
        span.set_attribute(RETRY, decision)
        if self._task_span is not None:
            self._task_span.set_attribute(RETRY, decision)


def error_type(exc: BaseException) -> str:
    """``error.type``: the exception's fully qualified class name (a builtin's name alone)."""
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _failed(span: Span, exc: BaseException) -> None:
    span.set_attribute(OUTCOME, "error")
    span.set_attribute(ERROR_TYPE, error_type(exc))
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))


def _read(self: _Traced | _TracedAsync, span: Span, value: JsonValue, default: JsonValue) -> JsonValue:
    found = value is not _ABSENT
    if found:
        self._found()
        _exemplar(self._found, span)
        span.set_attribute(OUTCOME, "found")
    else:
        self._absent()
        _exemplar(self._absent, span)
        span.set_attribute(OUTCOME, "absent")
    retry = self._retry
    if retry is not None:
        retry.decide_on(found, span) if isinstance(retry, TracedFirstRead) else retry.decide(found)
    return value if found else default


def get(self: _Traced, key: str, default: JsonValue = None) -> JsonValue:
    span = self._trace.start("get", key)
    token = _attach(_in_context(span))
    try:
        try:
            value = self._inner.get(key, _ABSENT)
        except Exception as exc:
            self._err_get()
            _exemplar(self._err_get, span)
            _failed(span, exc)
            raise
        return _read(self, span, value, default)
    finally:
        _detach(token)
        span.end()


def set(self: _Traced, key: str, value: JsonValue, **kwargs: object) -> object:
    span = self._trace.start("set", key)
    token = _attach(_in_context(span))
    try:
        try:
            result = self._inner.set(key, value, **kwargs) if kwargs else self._inner.set(key, value)
        except Exception as exc:
            self._err_set()
            _exemplar(self._err_set, span)
            _failed(span, exc)
            raise
        self._write()
        _exemplar(self._write, span)
        span.set_attribute(OUTCOME, "written")
        return result
    finally:
        _detach(token)
        span.end()


def delete(self: _Traced, key: str) -> object:
    span = self._trace.start("delete", key)
    token = _attach(_in_context(span))
    try:
        try:
            result = self._inner.delete(key)
        except Exception as exc:
            self._err_delete()
            _exemplar(self._err_delete, span)
            _failed(span, exc)
            raise
        self._delete()
        _exemplar(self._delete, span)
        span.set_attribute(OUTCOME, "deleted")
        return result
    finally:
        _detach(token)
        span.end()


def clear(self: _Traced) -> object:
    span = self._trace.start("clear")
    token = _attach(_in_context(span))
    try:
        try:
            result = self._inner.clear()
        except Exception as exc:
            self._err_clear()
            _exemplar(self._err_clear, span)
            _failed(span, exc)
            raise
        self._clear()
        _exemplar(self._clear, span)
        span.set_attribute(OUTCOME, "cleared")
        return result
    finally:
        _detach(token)
        span.end()


async def aget(self: _TracedAsync, key: str, default: JsonValue = None) -> JsonValue:
    span = self._trace.start("get", key)
    token = _attach(_in_context(span))
    try:
        try:
            value = await self._inner.aget(key, _ABSENT)
        except Exception as exc:
            self._err_get()
            _exemplar(self._err_get, span)
            _failed(span, exc)
            raise
        return _read(self, span, value, default)
    finally:
        _detach(token)
        span.end()


async def aset(self: _TracedAsync, key: str, value: JsonValue, **kwargs: object) -> object:
    span = self._trace.start("set", key)
    token = _attach(_in_context(span))
    try:
        try:
            result = await (
                self._inner.aset(key, value, **kwargs) if kwargs else self._inner.aset(key, value)
            )
        except Exception as exc:
            self._err_set()
            _exemplar(self._err_set, span)
            _failed(span, exc)
            raise
        self._write()
        _exemplar(self._write, span)
        span.set_attribute(OUTCOME, "written")
        return result
    finally:
        _detach(token)
        span.end()


async def adelete(self: _TracedAsync, key: str) -> object:
    span = self._trace.start("delete", key)
    token = _attach(_in_context(span))
    try:
        try:
            result = await self._inner.adelete(key)
        except Exception as exc:
            self._err_delete()
            _exemplar(self._err_delete, span)
            _failed(span, exc)
            raise
        self._delete()
        _exemplar(self._delete, span)
        span.set_attribute(OUTCOME, "deleted")
        return result
    finally:
        _detach(token)
        span.end()


async def aclear(self: _TracedAsync) -> object:
    span = self._trace.start("clear")
    token = _attach(_in_context(span))
    try:
        try:
            result = await self._inner.aclear()
        except Exception as exc:
            self._err_clear()
            _exemplar(self._err_clear, span)
            _failed(span, exc)
            raise
        self._clear()
        _exemplar(self._clear, span)
        span.set_attribute(OUTCOME, "cleared")
        return result
    finally:
        _detach(token)
        span.end()


#: The traced methods, by the accessor method they replace.
METHODS: Final[dict[str, Callable[..., object]]] = {
    "get": get,
    "set": set,
    "delete": delete,
    "clear": clear,
    "aget": aget,
    "aset": aset,
    "adelete": adelete,
    "aclear": aclear,
}
