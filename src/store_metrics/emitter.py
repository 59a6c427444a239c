"""The typed contracts between the accessors, the emitter and the backends.

* :class:`Counter` and :class:`Emitter` are all the accessor wrappers know: they ask the emitter
  once for a counter per (metric, tag set) and then only call ``add()``.
* :class:`Histogram` and :class:`Gauge` are what the API server side records
  (:mod:`store_metrics.server`): ``record()`` counts an observation into the metric's fixed
  buckets, ``observe()`` keeps the largest value of the export interval. Both are in-memory only.
* :class:`Backend` is what an adapter (OpenTelemetry, DogStatsD, StatsD, Airflow, none)
  implements; :class:`~store_metrics.aggregator.AggregatingEmitter` drives it off the hot path.
  Counters reach it as :class:`SeriesDelta` (or, for pull backends, through
  :class:`TotalsSource`), histograms as :class:`HistogramDelta` and gauges as :class:`GaugeValue`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from .catalogue import Metric
from .wire import TagTuple


class Counter(Protocol):
    """One series of one counter. ``add`` never raises and never blocks on I/O."""

    def add(self, amount: int = 1) -> None: ...


class Histogram(Protocol):
    """One series of one histogram. ``record`` never raises and never blocks on I/O."""

    def record(self, value: float) -> None: ...


class Gauge(Protocol):
    """One series of a max-per-interval gauge. ``observe`` never raises and never blocks on I/O."""

    def observe(self, value: float) -> None: ...


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

    def histogram(self, metric: Metric, tags: Mapping[str, str]) -> Histogram:
        """Return the histogram series for ``metric`` with this tag set (created on first use)."""
        ...

    def gauge(self, metric: Metric, tags: Mapping[str, str]) -> Gauge:
        """Return the max-per-interval gauge series for ``metric`` with this tag set."""
        ...


class SeriesDelta(NamedTuple):
    """What one counter series counted since the last push."""

    metric: Metric
    tags: TagTuple
    value: int


class Buckets(NamedTuple):
    """Observations per bucket: ``counts[i]``/``sums[i]`` for values in ``(bounds[i-1], bounds[i]]``.

    The last entry of ``counts`` and ``sums`` is the overflow bucket (above the last bound).
    Keeping each bucket's sum lets a backend hand the observations on exactly: every bucket's
    mean lies inside that bucket, so ``counts[i]`` observations of it land in the same bucket
    downstream and add up to the same sum.
    """

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    sums: tuple[float, ...]

    @property
    def observations(self) -> int:
        return sum(self.counts)

    @property
    def total(self) -> float:
        return sum(self.sums)


class HistogramDelta(NamedTuple):
    """What one histogram series observed since the last push."""

    metric: Metric
    tags: TagTuple
    buckets: Buckets


class GaugeValue(NamedTuple):
    """The largest value one gauge series observed since the last push."""

    metric: Metric
    tags: TagTuple
    value: float


#: What :meth:`Backend.export` receives.
Delta = SeriesDelta | HistogramDelta | GaugeValue


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

    #: ``True``: the backend reads counters through :meth:`TotalsSource.totals` when its system
    #: collects (OpenTelemetry observable counters). ``False``: the emitter pushes counter deltas
    #: to :meth:`export`. Histograms and gauges are always pushed, once per flush.
    pull: bool
    # Optional: a backend whose open() does no network I/O may set ``opens_without_io = True``;
    # the emitter then opens it inside configure() instead of on its worker thread.

    def describe(self) -> str:
        """Human-readable target, e.g. ``statsd udp://localhost:8125 prefix=airflow``."""
        ...

    def open(self, source: TotalsSource) -> None:
        """Create sockets, clients or providers. May raise; the emitter logs and retries later."""
        ...

    def export(self, deltas: Sequence[Delta]) -> None:
        """Send the deltas. Raising means nothing was sent; they will be retried."""
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


class _NullObserver:
    __slots__ = ()

    def record(self, value: float) -> None:
        return None

    def observe(self, value: float) -> None:
        return None


NULL_OBSERVER = _NullObserver()


class NullEmitter:
    """The emitter used before anything is configured: counts nothing, costs nothing."""

    def counter(self, metric: Metric, tags: Mapping[str, str]) -> Counter:
        return NULL_COUNTER

    def histogram(self, metric: Metric, tags: Mapping[str, str]) -> Histogram:
        return NULL_OBSERVER

    def gauge(self, metric: Metric, tags: Mapping[str, str]) -> Gauge:
        return NULL_OBSERVER

    def flush(self, timeout: float | None = None) -> bool:
        return True
