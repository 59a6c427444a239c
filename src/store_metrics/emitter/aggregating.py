"""The aggregating emitter: a thin facade over the series registry, the delivery and the worker.

A state store call costs one locked integer add into a series the caller already holds.
Everything that can block (opening the backend, DNS, sockets, exporters) happens on one worker
thread (``worker``), through ``delivery``; ``flush()`` and ``close()`` wait for it at
most their timeout and never raise.

Per process: creating an emitter starts its worker and registers its exit flush. In a forked
child the emitter starts from zero (the parent still pushes what it counted) and stays dormant:
no thread, no socket, no provider, no port, until the child asks for a series or flushes,
closes or exits with something counted. A child that counts nothing costs nothing.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Final, cast

from .. import logs
from ..catalogue import Kind, Metric
from ..config.options import default
from ..contracts import Backend
from ..deltas import TagTuple
from . import process
from .delivery import Delivery
from .registry import SeriesRegistry
from .series import CounterSeries, GaugeSeries, HistogramSeries, LiveTarget, Series
from .worker import FlushWorker

# The option table's defaults (store_metrics.config.options: each option is written once).
DEFAULT_FLUSH_INTERVAL: Final[float] = default("flush_interval")
DEFAULT_FLUSH_TIMEOUT: Final[float] = default("flush_timeout")
DEFAULT_EXIT_TIMEOUT: Final[float] = default("exit_timeout")
DEFAULT_MAX_SERIES: Final[int] = default("max_series")


class AggregatingEmitter:
    """Counts per (metric, tag set) in memory and hands the sums to ``backend``."""

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
        live = LiveTarget()
        self._registry = SeriesRegistry(self.max_series, live)
        self._delivery = Delivery(
            backend, self._registry, live, interval=self.flush_interval, timeout=self.flush_timeout
        )
        self._pid = os.getpid()
        self._exited = False
        self._fork_held = False
        self._wake_lock = threading.Lock()
        self._worker = self._new_worker()
        process.track(self)
        if backend.opens_without_io:
            # No network I/O: open now, so a collection or scrape right after configure() sees it.
            with self._worker.io_lock:
                self._delivery.ensure_open()
        self._worker.start(before_first_wait=self._delivery.ensure_open)
        process.run_at_exit(self)

    def _new_worker(self) -> FlushWorker:
        return FlushWorker(self._delivery.push, self._delivery.close, self.flush_interval)

    # -- the hot path's side -----------------------------------------------------------------

    def counter(self, metric: Metric, tags: Mapping[str, str]) -> CounterSeries:
        """The counter series for ``metric`` and ``tags``; tag values go through the tag value rule
        here, once."""
        return cast(CounterSeries, self._series(metric, tags, Kind.COUNTER))

    def histogram(self, metric: Metric, tags: Mapping[str, str]) -> HistogramSeries:
        """The histogram series for ``metric`` and ``tags`` (counted into ``metric.buckets``)."""
        return cast(HistogramSeries, self._series(metric, tags, Kind.HISTOGRAM))

    def gauge(self, metric: Metric, tags: Mapping[str, str]) -> GaugeSeries:
        """The max-per-interval gauge series for ``metric`` and ``tags``."""
        return cast(GaugeSeries, self._series(metric, tags, Kind.GAUGE))

    def _series(self, metric: Metric, tags: Mapping[str, str], kind: Kind) -> Series:
        if metric.kind is not kind:
            raise ValueError(f"{metric.name} is a {metric.kind.value}, not a {kind.value}")
        series = self._registry.get(metric, tags)
        if not self._worker.started:
            self._wake()
        return series

    # -- reading -----------------------------------------------------------------------------

    def totals(self, metric: Metric) -> list[tuple[TagTuple, int]]:
        """Cumulative non-zero totals of every series of ``metric`` in this process.

        For a histogram, the number of observations.
        """
        return self._registry.totals(metric)

    def take_exemplars(self, metric: Metric) -> list[tuple[TagTuple, object]]:
        """The span contexts ``metric``'s counters were last counted in (traced calls only), each
        taken once: the ``otel`` backend's exemplars."""
        return self._registry.take_exemplars(metric)

    def series_of(self, metric: Metric) -> list[Series]:
        """Every series of ``metric`` in this process, in the order they were made: what the native
        scrape endpoint reads (counters' ``total``, and its cached line on each counter series)."""
        return self._registry.series_of(metric)

    def watch_counters(self, moved: list[CounterSeries]) -> None:
        """Every counter series puts itself on ``moved`` when it moves (the native scrape endpoint
        then reads only those): see ``SeriesRegistry.watch_counters``."""
        self._registry.watch_counters(moved)

    def counted_series(self, metric: Metric) -> int:
        """How many series of ``metric`` exist in this process."""
        return self._registry.counted_series(metric)

    def snapshot(self) -> dict[tuple[str, TagTuple], int]:
        """Every non-zero counter and histogram count, keyed by (unprefixed name, tags)."""
        return self._registry.snapshot()

    @property
    def series_count(self) -> int:
        return len(self._registry)

    # -- flushing ----------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Ask the worker to push now; wait at most ``timeout`` s (default ``flush_timeout``).

        Returns whether the push finished in time and reached the backend (``False`` when it
        timed out, or when the backend could not be opened or failed). Never raises.
        """
        wait = self.flush_timeout if timeout is None else max(0.0, timeout)
        if self._pid != os.getpid() or self._worker.closed or self._worker.closing:
            return False
        if not self._worker.started:
            if not self._delivery.has_work():
                return True  # a forked child with nothing to send stays dormant
            self._wake()
        skip = self._worker.slow
        done, ok = self._worker.request(0.0 if skip else wait)
        if not done and not skip and wait > 0:
            self._worker.mark_slow()
            logs.once(
                "flush_timeout",
                logging.WARNING,
                "store-metrics: backend %s did not take the counts within %.2f s; tasks in this "
                "process do not wait for it again until it answers (counting goes on)",
                self.backend.describe(),
                wait,
            )
        return ok

    def close(self, timeout: float | None = None) -> bool:
        """Make a last push, release the backend and stop the worker. Idempotent.

        Waits at most ``timeout`` s; returns whether the last push reached the backend in time.
        """
        wait = self.flush_timeout if timeout is None else max(0.0, timeout)
        if self._pid != os.getpid():
            return False
        if self._worker.closed:
            return self._worker.last_ok
        if not self._worker.started:
            if not self._delivery.has_work():
                self._worker.closed = True
                self._forget()
                return True
            self._wake()
        _, ok = self._worker.request(0.0 if self._worker.slow else wait, close=True)
        self._forget()
        return ok

    def _forget(self) -> None:
        process.untrack(self)
        if not self._exited:
            # A closed emitter needs no exit flush: do not keep it (and its series) alive until exit.
            process.cancel_at_exit(self)

    def at_exit(self) -> None:
        """The exit flush (registered with ``process``): close within ``exit_timeout``."""
        if self._pid != os.getpid() or self._exited:
            return
        self._exited = True
        try:
            self.close(self.exit_timeout)
        except Exception:  # an exit hook must never raise
            logs.logger.debug("store-metrics exit flush failed", exc_info=True)

    # -- fork() ------------------------------------------------------------------------------

    def before_fork(self) -> None:
        if self._pid == os.getpid() and self._worker.started and not self._worker.closed:
            self._fork_held = self._worker.io_lock.acquire(timeout=process.FORK_WAIT)

    def after_fork_in_parent(self) -> None:
        if self._fork_held:
            self._fork_held = False
            self._worker.io_lock.release()

    def after_fork_in_child(self) -> None:
        was_closed = self._worker.closed or self._worker.closing
        self._pid = os.getpid()
        self._fork_held = False
        self._exited = False
        self._wake_lock = threading.Lock()
        self._registry.reset_after_fork()
        self._delivery.after_fork_in_child()
        self._worker = self._new_worker()
        self._worker.closed = was_closed

    def _wake(self) -> None:
        """In a forked child, start the worker (and the exit flush) at the first need."""
        with self._wake_lock:
            if self._worker.started or self._worker.closed or self._pid != os.getpid():
                return
            self._worker.start()
            process.run_at_exit(self)
