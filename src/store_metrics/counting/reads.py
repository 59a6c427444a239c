"""What a wrapped read shares with the traced wrappers (``tracing``): the private default
handed to the inner ``get``, and a retried attempt's one decision (``FirstRead``). Below both
``accessors`` and ``tracing``, so neither imports the other's module to get them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, cast

from ..catalogue import retry_metric
from ..contracts import Emitter

if TYPE_CHECKING:
    from pydantic import JsonValue


class _Absent:
    """The private default handed to the inner ``get``: never equal to a stored value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<store_metrics absent>"


#: Typed as a value, since it goes where the caller's ``default`` would; it never leaves the wrappers.
_ABSENT: Final = cast("JsonValue", _Absent())


class FirstRead:
    """A retried attempt's one decision: the counter its first answered read bumps, taken once.

    ``list.pop`` is atomic, so when threads or coroutines read at once exactly one of them takes it.
    """

    __slots__ = ("_pending",)

    def __init__(self, emitter: Emitter, tags: Mapping[str, str]) -> None:
        resumed = emitter.counter(retry_metric(True), tags).add
        not_resumed = emitter.counter(retry_metric(False), tags).add
        self._pending = [(resumed, not_resumed)]

    def decide(self, found: bool) -> None:
        try:
            resumed, not_resumed = self._pending.pop()
        except IndexError:
            return  # decided by an earlier read
        (resumed if found else not_resumed)()

    @property
    def decided(self) -> bool:
        return not self._pending
