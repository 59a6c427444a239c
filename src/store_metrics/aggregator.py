"""The aggregating emitter: counts in memory, hands sums to a backend off the hot path.

A state store call costs one locked integer add. A single worker thread owned by the emitter
does everything that can block: it opens the backend (sockets, DNS, exporters), pushes deltas
every ``flush_interval`` seconds, serves explicit :meth:`AggregatingEmitter.flush` calls, and
makes the last flush at process exit. Callers of ``flush`` wait at most their timeout, so a
backend that is down or hangs costs a task a bounded wait and one log line, never an error.

Fork safety: in a forked child every series starts again from zero (the parent still sends
what it counted), locks are renewed, the worker is restarted, the backend reopened and the
exit flush re-registered (Airflow's task runner clears inherited ``atexit`` handlers). The
restarted worker opens the backend only at its first export, not inside the fork hook: other
libraries' own after-fork hooks (which renew *their* locks) may not have run yet at that point.
A ``fork()`` waits (at most :data:`FORK_WAIT` seconds) for the worker to finish the open,
export or close it is in: a fork in the middle of one (for example while the first DNS lookup
imports the ``idna`` codec) would leave the child with a half-imported module and a backend it
can never open.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing.util
import os
import threading
import time
import weakref
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

from . import logs
from .catalogue import Kind, Metric
from .emitter import (
    Backend,
    Buckets,
    Counter,
    Delta,
    GaugeValue,
    HistogramDelta,
    SeriesDelta,
)
from .wire import TagTuple, normalize_tags

DEFAULT_FLUSH_INTERVAL: Final = 10.0
DEFAULT_FLUSH_TIMEOUT: Final = 2.0
DEFAULT_EXIT_TIMEOUT: Final = 0.05
DEFAULT_MAX_SERIES: Final = 50_000
OVERFLOW_TAG_VALUE: Final = "overflow"
#: The longest a ``fork()`` waits for the worker to finish the backend I/O it is in.
FORK_WAIT: Final = 0.25


class Series:
    """One (metric, tag set): a cumulative total, and how much of it was already pushed."""

    __slots__ = ("_lock", "metric", "sent", "tags", "total")

    def __init__(self, metric: Metric, tags: TagTuple) -> None:
        self.metric = metric
        self.tags = tags
        self.total = 0
        self.sent = 0
        self._lock = threading.Lock()

    def add(self, amount: int = 1) -> None:
        # The hot path: one locked add. Explicit acquire/try/finally costs about 2/3 of a
        # `with` block on CPython 3.11 and still releases the lock if a signal interrupts it.
        lock = self._lock
        lock.acquire()
        try:
            self.total += amount
        finally:
            lock.release()

    @property
    def pending(self) -> int:
        """Counted but not yet pushed."""
        return self.total - self.sent

    def take_pending(self) -> int:
        with self._lock:
            value = self.total - self.sent
            self.sent = self.total
            return value

    def give_back(self, value: int) -> None:
        with self._lock:
            self.sent -= value

    def reset_after_fork(self) -> None:
        # The old lock may have been held by a thread that does not exist in the child.
        self._lock = threading.Lock()
        self.total = 0
        self.sent = 0

    def take(self) -> SeriesDelta | None:
        value = self.take_pending()
        return SeriesDelta(self.metric, self.tags, value) if value else None


class HistogramSeries:
    """One (histogram, tag set): observations per bucket, cumulative and not yet pushed.

    Memory is fixed per series (two lists of ``len(buckets) + 1``), however many observations
    arrive and however long the backend is down.
    """

    __slots__ = (
        "_lock",
        "bounds",
        "counts",
        "metric",
        "pending",
        "sums",
        "tags",
        "total_counts",
        "total_sums",
    )

    def __init__(self, metric: Metric, tags: TagTuple) -> None:
        self.metric = metric
        self.tags = tags
        self.bounds = metric.buckets
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        size = len(self.bounds) + 1
        self.counts = [0] * size
        self.sums = [0.0] * size
        self.total_counts = [0] * size
        self.total_sums = [0.0] * size
        self.pending = 0

    def record(self, value: float) -> None:
        # bisect_left: the first bound >= value, so a value equal to a bound is in that bucket (le).
        i = bisect_left(self.bounds, value)
        with self._lock:
            self.counts[i] += 1
            self.sums[i] += value
            self.total_counts[i] += 1
            self.total_sums[i] += value
            self.pending += 1

    @property
    def total(self) -> int:
        """Observations so far in this process."""
        return sum(self.total_counts)

    def cumulative(self) -> Buckets:
        with self._lock:
            return Buckets(self.bounds, tuple(self.total_counts), tuple(self.total_sums))

    def take(self) -> HistogramDelta | None:
        with self._lock:
            if not self.pending:
                return None
            buckets = Buckets(self.bounds, tuple(self.counts), tuple(self.sums))
            size = len(self.counts)
            self.counts = [0] * size
            self.sums = [0.0] * size
            self.pending = 0
        return HistogramDelta(self.metric, self.tags, buckets)

    def give_back(self, buckets: Buckets) -> None:
        with self._lock:
            for i, (count, total) in enumerate(zip(buckets.counts, buckets.sums, strict=True)):
                self.counts[i] += count
                self.sums[i] += total
            self.pending += buckets.observations

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._reset()


class GaugeSeries:
    """One (gauge, tag set): the largest value observed since the last push."""

    __slots__ = ("_lock", "metric", "pending", "tags", "value")

    #: Gauges are not counts: :meth:`AggregatingEmitter.snapshot` leaves them out.
    total = 0

    def __init__(self, metric: Metric, tags: TagTuple) -> None:
        self.metric = metric
        self.tags = tags
        self._lock = threading.Lock()
        self.value = 0.0
        self.pending = False

    def observe(self, value: float) -> None:
        with self._lock:
            if not self.pending or value > self.value:
                self.value = value
                self.pending = True

    def take(self) -> GaugeValue | None:
        with self._lock:
            if not self.pending:
                return None
            self.pending = False
            return GaugeValue(self.metric, self.tags, self.value)

    def give_back(self, value: float) -> None:
        self.observe(value)

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self.value = 0.0
        self.pending = False


AnySeries = Series | HistogramSeries | GaugeSeries
_S = TypeVar("_S", Series, HistogramSeries, GaugeSeries)
_FACTORIES: dict[Kind, Callable[[Metric, TagTuple], AnySeries]] = {
    Kind.COUNTER: Series,
    Kind.HISTOGRAM: HistogramSeries,
    Kind.GAUGE: GaugeSeries,
}


_live: weakref.WeakSet[AggregatingEmitter] = weakref.WeakSet()
_fork_hook_installed = False
_fork_hook_lock = threading.Lock()


def _before_fork() -> None:
    for emitter in list(_live):
        emitter._hold_io_for_fork()


def _after_fork_in_parent() -> None:
    for emitter in list(_live):
        emitter._release_io_after_fork()


def _after_fork_in_child() -> None:
    logs.renew_after_fork()
    for emitter in list(_live):
        emitter._after_fork_in_child()


def _install_fork_hook() -> None:
    global _fork_hook_installed
    with _fork_hook_lock:
        if not _fork_hook_installed and hasattr(os, "register_at_fork"):
            os.register_at_fork(
                before=_before_fork,
                after_in_parent=_after_fork_in_parent,
                after_in_child=_after_fork_in_child,
            )
            _fork_hook_installed = True


class AggregatingEmitter:
    """Counts per (metric, tag set) in memory and hands the sums to ``backend``.

    Creating one starts its worker thread and registers its exit flush; nothing happens before.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        flush_timeout: float = DEFAULT_FLUSH_TIMEOUT,
        exit_timeout: float = DEFAULT_EXIT_TIMEOUT,
        max_series: int = DEFAULT_MAX_SERIES,
    ) -> None:
        if flush_interval <= 0:
            raise ValueError("flush_interval must be > 0")
        self.backend = backend
        self.flush_interval = float(flush_interval)
        self.flush_timeout = float(flush_timeout)
        self.exit_timeout = float(exit_timeout)
        self.max_series = int(max_series)
        self._series: dict[tuple[str, TagTuple], AnySeries] = {}
        self._by_metric: dict[str, list[AnySeries]] = {}
        self._registry_lock = threading.Lock()
        self._init_process_state()
        _live.add(self)
        _install_fork_hook()
        if getattr(backend, "opens_without_io", False):
            # Opening this backend does no network I/O (OpenTelemetry: instruments on a provider),
            # so do it now: a collection or a scrape right after configure() sees the counters.
            with self._io_lock:
                self._ensure_open()
        self._start()

    # -- per-process state -------------------------------------------------------------------

    def _init_process_state(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition(threading.Lock())
        self._requested = 0
        self._served = 0
        self._closing = False
        self._closed = False
        self._exited = False
        self._opened = False
        self._last_open_attempt = -1e9
        # Whether the worker's last export reached the backend (what a served flush reports).
        self._last_ok = False
        # Set when a blocking flush ran out of time: later blocking flushes in this process
        # do not wait again until the worker gets through an export.
        self._slow = False
        self._thread: threading.Thread | None = None
        # Held by the worker while it opens, exports to or closes the backend.
        self._io_lock = threading.Lock()
        self._io_held_for_fork = False

    def _start(self, *, open_now: bool = True) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(open_now,), name="store-metrics-emitter", daemon=True
        )
        self._thread.start()
        atexit.register(self._at_exit)
        # multiprocessing's forked children leave through os._exit(), skipping atexit; they do
        # run multiprocessing's own finalizers, which we join once the child has started.
        multiprocessing.util.register_after_fork(self, AggregatingEmitter._in_multiprocessing_child)

    def _in_multiprocessing_child(self) -> None:
        multiprocessing.util.Finalize(self, self._at_exit, exitpriority=100)

    def _hold_io_for_fork(self) -> None:
        if self._pid == os.getpid():
            self._io_held_for_fork = self._io_lock.acquire(timeout=FORK_WAIT)

    def _release_io_after_fork(self) -> None:
        if self._io_held_for_fork:
            self._io_held_for_fork = False
            self._io_lock.release()

    def _after_fork_in_child(self) -> None:
        self._registry_lock = threading.Lock()
        for series in self._series.values():
            series.reset_after_fork()
        was_closed = self._closed or self._closing
        self._init_process_state()
        if was_closed:
            self._closed = True
            return
        try:
            self.backend.after_fork_in_child()
        except Exception:
            logs.logger.debug("backend after-fork hook failed", exc_info=True)
        self._start(open_now=False)

    # -- the hot path's side -----------------------------------------------------------------

    def counter(self, metric: Metric, tags: Mapping[str, str]) -> Counter:
        """Return the series for ``metric`` and ``tags``; tags are sanitised here, once."""
        return self._get(metric, tags, Kind.COUNTER, Series)

    def histogram(self, metric: Metric, tags: Mapping[str, str]) -> HistogramSeries:
        """Return the histogram series for ``metric`` and ``tags`` (counted into ``metric.buckets``)."""
        return self._get(metric, tags, Kind.HISTOGRAM, HistogramSeries)

    def gauge(self, metric: Metric, tags: Mapping[str, str]) -> GaugeSeries:
        """Return the max-per-interval gauge series for ``metric`` and ``tags``."""
        return self._get(metric, tags, Kind.GAUGE, GaugeSeries)

    def _get(self, metric: Metric, tags: Mapping[str, str], kind: Kind, cls: type[_S]) -> _S:
        if metric.kind is not kind:
            raise ValueError(f"{metric.name} is a {metric.kind.value}, not a {kind.value}")
        key_tags = normalize_tags(tags)
        key = (metric.name, key_tags)
        series = self._series.get(key)
        if series is not None:
            assert isinstance(series, cls)
            return series
        with self._registry_lock:
            series = self._series.get(key)
            if series is None:
                if len(self._series) >= self.max_series:
                    logs.once(
                        "max_series",
                        logging.WARNING,
                        "store-metrics holds %d series, its limit; further new tag sets are counted "
                        "under tag value %r",
                        self.max_series,
                        OVERFLOW_TAG_VALUE,
                    )
                    key_tags = tuple((k, OVERFLOW_TAG_VALUE) for k, _ in key_tags)
                    key = (metric.name, key_tags)
                    series = self._series.get(key)
                if series is None:
                    series = _FACTORIES[kind](metric, key_tags)
                    self._series[key] = series
                    self._by_metric.setdefault(metric.name, []).append(series)
        assert isinstance(series, cls)
        return series

    # -- reading -----------------------------------------------------------------------------

    def totals(self, metric: Metric) -> list[tuple[TagTuple, int]]:
        """Cumulative non-zero totals of every series of ``metric`` in this process.

        For a histogram, the number of observations.
        """
        with self._registry_lock:
            series = list(self._by_metric.get(metric.name, ()))
        return [(s.tags, s.total) for s in series if s.total]

    def snapshot(self) -> dict[tuple[str, TagTuple], int]:
        """Every non-zero series' cumulative total, keyed by (unprefixed name, tags)."""
        with self._registry_lock:
            series = list(self._series.values())
        return {(s.metric.name, s.tags): s.total for s in series if s.total}

    @property
    def series_count(self) -> int:
        return len(self._series)

    def _drain(self, counters: bool = True) -> list[Delta]:
        """What every series counted since the last push (counters only if ``counters``)."""
        with self._registry_lock:
            series = list(self._series.values())
        deltas: list[Delta] = []
        for s in series:
            if s.pending and (counters or s.metric.kind is not Kind.COUNTER):
                delta = s.take()
                if delta is not None:
                    deltas.append(delta)
        return deltas

    def _give_back(self, deltas: Sequence[Delta]) -> None:
        for delta in deltas:
            series = self._series.get((delta.metric.name, delta.tags))
            if isinstance(series, HistogramSeries) and isinstance(delta, HistogramDelta):
                series.give_back(delta.buckets)
            elif isinstance(series, Series) and isinstance(delta, SeriesDelta):  # noqa: SIM114 (types)
                series.give_back(delta.value)
            elif isinstance(series, GaugeSeries) and isinstance(delta, GaugeValue):
                series.give_back(delta.value)

    # -- flushing ----------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Ask the worker to export now; wait at most ``timeout`` s (default ``flush_timeout``).

        Returns whether the export finished in time and reached the backend (``False`` when it
        timed out, or when the backend could not be opened or raised). Never raises.
        """
        wait = self.flush_timeout if timeout is None else max(0.0, timeout)
        if self._pid != os.getpid():
            return False
        with self._cond:
            if self._closed or self._closing:
                return False
            if self._slow:
                wait = 0.0
            self._requested += 1
            ticket = self._requested
            self._cond.notify_all()
            done = self._wait_served(ticket, wait)
            ok = done and self._last_ok
        if not done and wait > 0:
            self._slow = True
            logs.once(
                "flush_timeout",
                logging.WARNING,
                "store-metrics: backend %s did not take the counts within %.2f s; tasks in this "
                "process do not wait for it again until it answers (counting goes on)",
                self.backend.describe(),
                wait,
            )
        return ok

    def _wait_served(self, ticket: int, wait: float) -> bool:
        # Caller holds self._cond.
        deadline = time.monotonic() + wait
        while self._served < ticket:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._cond.wait(remaining)
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Make a last export, release the backend and stop the worker. Idempotent.

        Waits at most ``timeout`` s; returns whether the last export reached the backend in time.
        """
        wait = self.flush_timeout if timeout is None else max(0.0, timeout)
        if self._pid != os.getpid():
            return False
        with self._cond:
            if self._closed:
                return self._last_ok
            if self._slow:
                wait = 0.0
            self._closing = True
            self._requested += 1
            ticket = self._requested
            self._cond.notify_all()
            done = self._wait_served(ticket, wait)
            ok = done and self._last_ok
        _live.discard(self)
        if not self._exited:
            # A closed emitter needs no exit flush: do not keep it (and its series) alive until exit.
            atexit.unregister(self._at_exit)
        return ok

    def _at_exit(self) -> None:
        if self._pid != os.getpid() or self._exited:
            return
        self._exited = True
        try:
            self.close(self.exit_timeout)
        except Exception:  # an exit hook must never raise
            logs.logger.debug("store-metrics exit flush failed", exc_info=True)

    # -- the worker --------------------------------------------------------------------------

    def _run(self, open_now: bool) -> None:
        if open_now:
            with self._io_lock:
                self._ensure_open()
        next_due = time.monotonic() + self.flush_interval
        while True:
            with self._cond:
                while (
                    not self._closing
                    and self._requested <= self._served
                    and (remaining := next_due - time.monotonic()) > 0
                ):
                    self._cond.wait(remaining)
                ticket = self._requested
                explicit = ticket > self._served
                closing = self._closing
            with self._io_lock:
                ok = self._export_once(explicit)
                if closing:
                    # Not under self._cond: a flush() or close() arriving meanwhile must still
                    # get its answer within its own timeout.
                    self._close_backend()
            next_due = time.monotonic() + self.flush_interval
            with self._cond:
                self._served = max(self._served, ticket)
                self._last_ok = ok
                if ok:
                    self._slow = False
                if closing:
                    self._closed = True
                self._cond.notify_all()
            if closing:
                return

    def _ensure_open(self) -> bool:
        if self._opened:
            return True
        now = time.monotonic()
        # Opening may block (DNS); do not retry more than every few intervals.
        if now - self._last_open_attempt < min(60.0, 3 * self.flush_interval):
            return False
        self._last_open_attempt = now
        try:
            self.backend.open(self)
        except Exception as exc:
            logs.once(
                f"open:{type(exc).__name__}",
                logging.ERROR,
                "store-metrics could not open backend %s: %s; counts are kept and retried",
                self.backend.describe(),
                exc,
            )
            return False
        self._opened = True
        logs.forget("open:")
        return True

    def _export_once(self, explicit: bool) -> bool:
        if not self._ensure_open():
            return False
        try:
            # Pull backends read counters at collection; histograms and gauges are always pushed.
            deltas = self._drain(counters=not self.backend.pull)
            if deltas:
                try:
                    self.backend.export(deltas)
                except Exception:
                    self._give_back(deltas)
                    raise
            if explicit:
                self.backend.force_flush(self.flush_timeout)
        except Exception as exc:
            logs.once(
                f"export:{type(exc).__name__}",
                logging.ERROR,
                "store-metrics could not send to %s: %s; tried again at the next flush "
                "(further failures like this one are not logged)",
                self.backend.describe(),
                exc,
            )
            return False
        return True

    def _close_backend(self) -> None:
        if not self._opened:
            return
        try:
            self.backend.close(self.flush_timeout)
        except Exception:
            logs.logger.debug("closing backend %s failed", self.backend.describe(), exc_info=True)
        self._opened = False
