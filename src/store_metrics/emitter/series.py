"""One series per (metric, tag set): what it counted, and what of that is not yet pushed.

The three kinds share one small interface, which is all the registry and the delivery use:

* ``take()`` returns what was counted since the last push as a ``deltas``
  value (``None`` when nothing was) and marks it pushed;
* ``give_back(delta)`` returns a delta (or the part of it) that could not be sent, to go out
  with the next push;
* ``pending`` is how much is waiting to be pushed (0 when nothing);
* ``count`` is how often the series was counted in this process (a counter's total, a
  histogram's observations; gauges keep a value, not a count, and report 0);
* ``reset_after_fork()`` starts the series again from zero in a forked child (the parent still
  pushes what it counted) with a fresh lock.

Each series has its own lock: the hot path (``add``, ``record``, ``observe``) takes only that.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from typing import Protocol

from .. import logs
from ..catalogue import Metric
from ..contracts import LiveHistograms
from ..deltas import Buckets, CounterDelta, Delta, GaugeValue, HistogramDelta, TagTuple


class Series(Protocol):
    """What the registry and the delivery need of a series, whatever its kind."""

    metric: Metric
    tags: TagTuple

    @property
    def pending(self) -> int: ...

    @property
    def count(self) -> int: ...

    def take(self) -> Delta | None: ...

    def give_back(self, delta: Delta) -> None: ...

    def reset_after_fork(self) -> None: ...


class CounterSeries:
    """A cumulative count, and how much of it was already pushed.

    ``exemplar`` is the OpenTelemetry span context of the latest count made inside a sampled span
    (set by the traced wrappers only, after their add; ``None`` otherwise), taken by the ``otel``
    backend's next collection as that point's exemplar. The hot path never touches it.
    """

    __slots__ = ("_lock", "exemplar", "metric", "place", "sent", "tags", "total", "watch")

    def __init__(self, metric: Metric, tags: TagTuple, watch: list[CounterSeries] | None = None) -> None:
        self.metric = metric
        self.tags = tags
        self.total = 0
        self.sent = 0
        self.exemplar: object | None = None
        self._lock = threading.Lock()
        #: The series' index among its metric's series (the registry sets it).
        self.place = 0
        #: While a reader of totals watches (the native scrape endpoint), the list this series puts
        #: itself on at its next add, once: the reader takes it off, puts ``watch`` back, then reads
        #: ``total``. So a scrape reads only what moved, not every series (``None``: nobody watches,
        #: or the series is already on the list).
        self.watch = watch

    def add(self, amount: int = 1) -> None:
        # The hot path: one locked add. Explicit acquire/try/finally costs about 2/3 of a
        # `with` block on CPython 3.11 and still releases the lock if a signal interrupts it.
        lock = self._lock
        lock.acquire()
        try:
            self.total += amount
            # After the add: a reader that put `watch` back before reading `total` sees this add,
            # or hears of it again at its next read.
            watch = self.watch
            if watch is not None:
                self.watch = None
                watch.append(self)
        finally:
            lock.release()

    @property
    def pending(self) -> int:
        return self.total - self.sent

    @property
    def count(self) -> int:
        return self.total

    def take(self) -> CounterDelta | None:
        with self._lock:
            value = self.total - self.sent
            self.sent = self.total
        return CounterDelta(self.metric, self.tags, value) if value else None

    def give_back(self, delta: Delta) -> None:
        assert isinstance(delta, CounterDelta)
        with self._lock:
            self.sent -= delta.value

    def reset_after_fork(self) -> None:
        # The old lock may have been held by a thread that does not exist in the child.
        self._lock = threading.Lock()
        self.total = 0
        self.sent = 0
        self.exemplar = None


class LiveTarget:
    """Where histogram observations go as they happen, when the open backend takes them live.

    Shared by every histogram series of one emitter; ``backend`` is set while a backend with
    ``live_histograms`` is open in this process, and ``None`` otherwise (observations are then
    kept as buckets and pushed as a delta).
    """

    __slots__ = ("backend",)

    def __init__(self) -> None:
        self.backend: LiveHistograms | None = None


class HistogramSeries:
    """Observations per bucket, cumulative and not yet pushed.

    Memory is fixed per series (lists of ``len(buckets) + 1``), however many observations arrive
    and however long the backend is down.
    """

    __slots__ = (
        "_live",
        "_lock",
        "_pending",
        "bounds",
        "counts",
        "metric",
        "sums",
        "tags",
        "total_counts",
        "total_sums",
    )

    def __init__(self, metric: Metric, tags: TagTuple, live: LiveTarget | None = None) -> None:
        self.metric = metric
        self.tags = tags
        self.bounds = metric.buckets
        self._live = live or LiveTarget()
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        size = len(self.bounds) + 1
        self.counts = [0] * size
        self.sums = [0.0] * size
        self.total_counts = [0] * size
        self.total_sums = [0.0] * size
        self._pending = 0

    def record(self, value: float) -> None:
        # bisect_left: the first bound >= value, so a value equal to a bound is in that bucket (le).
        i = bisect_left(self.bounds, value)
        live = self._live.backend
        if live is not None:
            try:
                live.record_histogram(self.metric, self.tags, value)
            except Exception as exc:
                logs.once(
                    f"live:{type(exc).__name__}",
                    logging.ERROR,
                    "store-metrics could not record %s live: %s; its observations are kept and pushed",
                    self.metric.name,
                    exc,
                )
            else:
                with self._lock:
                    self.total_counts[i] += 1
                    self.total_sums[i] += value
                return
        with self._lock:
            self.counts[i] += 1
            self.sums[i] += value
            self.total_counts[i] += 1
            self.total_sums[i] += value
            self._pending += 1

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def count(self) -> int:
        return sum(self.total_counts)

    def cumulative(self) -> Buckets:
        """Every observation of this process so far, per bucket."""
        with self._lock:
            return Buckets(self.bounds, tuple(self.total_counts), tuple(self.total_sums))

    def take(self) -> HistogramDelta | None:
        with self._lock:
            if not self._pending:
                return None
            buckets = Buckets(self.bounds, tuple(self.counts), tuple(self.sums))
            size = len(self.counts)
            self.counts = [0] * size
            self.sums = [0.0] * size
            self._pending = 0
        return HistogramDelta(self.metric, self.tags, buckets)

    def give_back(self, delta: Delta) -> None:
        assert isinstance(delta, HistogramDelta)
        buckets = delta.buckets
        with self._lock:
            for i, (count, total) in enumerate(zip(buckets.counts, buckets.sums, strict=True)):
                self.counts[i] += count
                self.sums[i] += total
            self._pending += buckets.observations

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._reset()


class GaugeSeries:
    """The largest value observed since the last push."""

    __slots__ = ("_lock", "_pending", "metric", "tags", "value")

    def __init__(self, metric: Metric, tags: TagTuple) -> None:
        self.metric = metric
        self.tags = tags
        self._lock = threading.Lock()
        self.value = 0.0
        self._pending = False

    def observe(self, value: float) -> None:
        with self._lock:
            if not self._pending or value > self.value:
                self.value = value
                self._pending = True

    @property
    def pending(self) -> int:
        return int(self._pending)

    @property
    def count(self) -> int:
        return 0

    def take(self) -> GaugeValue | None:
        with self._lock:
            if not self._pending:
                return None
            self._pending = False
            return GaugeValue(self.metric, self.tags, self.value)

    def give_back(self, delta: Delta) -> None:
        assert isinstance(delta, GaugeValue)
        self.observe(delta.value)

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self.value = 0.0
        self._pending = False
