"""The typed contracts between the accessors, the emitter and the backends.

* :class:`Counter` and :class:`Emitter` are all the accessor wrappers know: they ask the emitter
  once for a counter per (metric, tag set) and then only call ``add()``.
* :class:`Backend` is what an adapter (OpenTelemetry, DogStatsD, StatsD, Airflow, none)
  implements; :class:`~store_metrics.aggregator.AggregatingEmitter` drives it off the hot path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from .catalogue import Metric
from .wire import TagTuple


class Counter(Protocol):
    """One series of one counter. ``add`` never raises and never blocks on I/O."""

    def add(self, amount: int = 1) -> None: ...


@runtime_checkable
class Emitter(Protocol):
    """What the accessor wrappers need: counters to bump, and a way to hand them on."""

    def counter(self, metric: Metric, tags: Mapping[str, str]) -> Counter:
        """Return the counter for ``metric`` with this tag set (created on first use)."""
        ...

    def flush(self, timeout: float | None = None) -> bool:
        """Hand what was counted to the backend; wait at most ``timeout`` s.

        Returns ``True`` if the counts reached the backend in time. Never raises.
        """
        ...


class SeriesDelta(NamedTuple):
    """What one series counted since the last push."""

    metric: Metric
    tags: TagTuple
    value: int


class TotalsSource(Protocol):
    """Read access to cumulative totals, for backends that pull at collection time."""

    def totals(self, metric: Metric) -> list[tuple[TagTuple, int]]:
        """Every series of ``metric`` with its cumulative count in this process (non-zero only)."""
        ...


class Backend(Protocol):
    """An adapter that takes the emitter's counts to a metrics system.

    Every method is called on the emitter's worker thread, never on a task's thread, so
    sockets, DNS and exporters may block here without costing the task anything.
    """

    #: ``True``: the backend reads :meth:`TotalsSource.totals` when its system collects
    #: (OpenTelemetry observable counters). ``False``: the emitter pushes deltas to :meth:`export`.
    pull: bool

    def describe(self) -> str:
        """Human-readable target, e.g. ``statsd udp://localhost:8125 prefix=airflow``."""
        ...

    def open(self, source: TotalsSource) -> None:
        """Create sockets, clients or providers. May raise; the emitter logs and retries later."""
        ...

    def export(self, deltas: Sequence[SeriesDelta]) -> None:
        """Send the deltas (push backends). Raising means nothing was sent; they will be retried."""
        ...

    def force_flush(self, timeout: float) -> None:
        """Push out anything the backend itself still buffers."""
        ...

    def close(self, timeout: float) -> None:
        """Release what :meth:`open` created."""
        ...

    def after_fork_in_child(self) -> None:
        """Drop what was inherited from the parent; :meth:`open` is called again in the child."""
        ...


class _NullCounter:
    __slots__ = ()

    def add(self, amount: int = 1) -> None:
        return None


NULL_COUNTER: Counter = _NullCounter()


class NullEmitter:
    """The emitter used before anything is configured: counts nothing, costs nothing."""

    def counter(self, metric: Metric, tags: Mapping[str, str]) -> Counter:
        return NULL_COUNTER

    def flush(self, timeout: float | None = None) -> bool:
        return True
