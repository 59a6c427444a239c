"""One tag set's counters on the task side, as the API server counts a task's calls for it."""

from __future__ import annotations

from collections.abc import Callable

from ..catalogue import OPERATION, Operation, Outcome, Store, metric_for
from ..counting.contracts import Emitter
from .attribution import Tags
from .routes import Route


class Caller:
    """One tag set (shared by every task instance of a task) and its counters, made on first use."""

    __slots__ = ("_adds", "_emitter", "tags")

    def __init__(self, emitter: Emitter, tags: Tags) -> None:
        self._emitter = emitter
        self.tags = dict(tags)
        self._adds: dict[tuple[str, str, str], Callable[[int], None]] = {}

    def count(self, route: Route, outcome: str) -> None:
        key = (route[0], route[1], outcome)
        add = self._adds.get(key)
        if add is None:
            add = self._adds[key] = self._make(*key)
        add(1)

    def _make(self, store: str, operation: str, outcome: str) -> Callable[[int], None]:
        kind = Outcome(outcome)
        tags = {**self.tags, OPERATION: Operation(operation).value} if kind is Outcome.ERROR else self.tags
        return self._emitter.counter(metric_for(Store.of_tag(store), kind), tags).add
