"""One tag set's counters on the task side, as the API server counts a task's calls for it, and one
attempt: its tag set's caller and its try."""

from __future__ import annotations

from collections.abc import Callable

from ..catalogue import OPERATION, Operation, Outcome, Store, metric_for, retry_metric
from ..contracts import Emitter
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

    def count_retry(self, found: bool) -> None:
        """One retried attempt whose first read ``found`` a value (``retry_resumed``) or not."""
        key = ("retry", "", "resumed" if found else "not_resumed")
        add = self._adds.get(key)
        if add is None:
            add = self._adds[key] = self._emitter.counter(retry_metric(found), self.tags).add
        add(1)

    def _make(self, store: str, operation: str, outcome: str) -> Callable[[int], None]:
        kind = Outcome(outcome)
        tags = {**self.tags, OPERATION: Operation(operation).value} if kind is Outcome.ERROR else self.tags
        return self._emitter.counter(metric_for(Store.of_tag(store), kind), tags).add


class Attempt:
    """One task instance id as a worker knows it: its tag set's ``Caller`` and its try."""

    __slots__ = ("caller", "try_number")

    def __init__(self, caller: Caller, try_number: int = 0) -> None:
        self.caller = caller
        #: 0: not known (the lookup failed, or told no try).
        self.try_number = try_number

    @property
    def retried(self) -> bool:
        return self.try_number >= 2
