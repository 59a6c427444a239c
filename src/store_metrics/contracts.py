"""The typed contracts between the accessors, the emitter and the backends (Protocols only).

* ``Counter`` and ``Emitter`` are all the accessor wrappers know: they ask the emitter
  once for a counter per (metric, tag set) and then only call ``add()``.
* ``Histogram`` and ``Gauge`` are what the API server side records
  (``store_metrics.api_server``): ``record()`` counts an observation into the metric's fixed
  buckets, ``observe()`` keeps the largest value of the export interval. Both are in-memory only.
* ``Backend`` is what an adapter (OpenTelemetry, DogStatsD, StatsD, Airflow, none)
  implements; ``AggregatingEmitter`` drives it off the hot path.
  Counters reach it as ``CounterDelta`` (or, for pull backends,
  through ``TotalsSource``), histograms as ``HistogramDelta`` and gauges as ``GaugeValue``.

Below the counting core, the emitter and the backends, which all import it: it imports only the
catalogue and the deltas (``store_metrics.deltas``), so none of them reach another through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from .catalogue import Metric
from .deltas import Delta, TagTuple


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

    #: ``True``: the backend reads counters through ``TotalsSource.totals`` when its system
    #: collects (OpenTelemetry observable counters). ``False``: the emitter pushes counter deltas
    #: to ``export``. Histograms and gauges are always pushed, once per flush.
    pull: bool
    #: ``True`` when ``open`` does no network I/O (OpenTelemetry: instruments on a provider):
    #: the emitter then opens it inside ``configure()``, so a collection or a scrape right after
    #: configuring sees the counters. ``False``: opened on the worker thread.
    opens_without_io: bool
    #: ``True`` when the backend takes every histogram observation as it happens, through
    #: ``LiveHistograms.record_histogram`` (OpenTelemetry: straight into the SDK instrument,
    #: whose own aggregation is cheap), instead of as a ``HistogramDelta``
    #: per flush. Export then costs O(series), not O(observations).
    live_histograms: bool
    #: The metric name prefix it sends under (``""``: the target adds its own, as Airflow's does).
    prefix: str

    @property
    def sends_nowhere(self) -> bool:
        """``True`` when whatever is exported reaches nobody (``none``, or Airflow with no
        ``[metrics]`` backend): counting still works, and the plugin and ``check`` say so."""
        ...

    def describe(self) -> str:
        """Human-readable target, e.g. ``statsd udp://localhost:8125 prefix=airflow``."""
        ...

    def open(self, source: TotalsSource) -> None:
        """Create sockets, clients or providers. May raise; the emitter logs and retries later."""
        ...

    def export(self, deltas: Sequence[Delta]) -> None:
        """Send the deltas, each exactly once.

        Returning means every delta was sent. When only some were, raise
        ``PartialExport`` with the ones that were not: the emitter
        keeps those for the next flush and never sends the others again. Any other exception
        means nothing was sent, and the emitter keeps every delta.
        """
        ...

    def force_flush(self, timeout: float) -> None:
        """Push out anything the backend itself still buffers."""
        ...

    def close(self, timeout: float) -> None:
        """Release what ``open`` created."""
        ...

    def after_fork_in_child(self) -> None:
        """Drop what was inherited from the parent; ``open`` is called again in the child."""
        ...


@runtime_checkable
class Paced(Protocol):
    """What a backend that paces its sends (the StatsD ones) implements besides ``Backend``."""

    def pace_until(self, deadline: Callable[[], float]) -> None:
        """Make the next ``Backend.export`` wait no later than ``deadline()`` (``time.monotonic()``
        seconds; it may move sooner while the export runs, when a flush is asked for with a shorter
        wait): what its pace has not let out by then is raised as
        ``Deferred`` and kept for the next flush."""
        ...


class LiveHistograms(Protocol):
    """What a backend with ``live_histograms = True`` implements besides ``Backend``."""

    def record_histogram(self, metric: Metric, tags: TagTuple, value: float) -> None:
        """Record one observation now, on the caller's thread: in memory only, never blocking.

        May raise (the emitter logs that once and carries on); called only after ``Backend.open``.
        """
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
