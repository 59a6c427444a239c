"""The series of one emitter, found by (metric, tag set), with a cap on how many there are.

Tag values go through the tag value rule (``store_metrics.naming``) once, when a series is first
asked for; after that the caller holds the series and counts into it directly. Past ``max_series``
a new tag set is counted under one overflow series per metric (every tag value
``OVERFLOW_TAG_VALUE``, ``<overflow>``), so memory stays bounded whatever a DAG author puts in a
tag, and the totals stay right.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from .. import logs
from ..catalogue import OVERFLOW, Kind, Metric
from ..deltas import Delta, TagTuple
from ..naming import normalize_tags
from .series import CounterSeries, GaugeSeries, HistogramSeries, LiveTarget, Series

OVERFLOW_TAG_VALUE: Final = OVERFLOW


class SeriesRegistry:
    """Creates, finds and drains the series of one emitter."""

    def __init__(self, max_series: int, live: LiveTarget) -> None:
        self.max_series = max_series
        self._live = live
        self._series: dict[tuple[str, TagTuple], Series] = {}
        self._by_metric: dict[str, list[Series]] = {}
        self._lock = threading.Lock()
        #: Where counter series report that they moved (``watch_counters``), or ``None``.
        self._watch: list[CounterSeries] | None = None
        self._factories: dict[Kind, Callable[[Metric, TagTuple], Series]] = {
            Kind.COUNTER: CounterSeries,
            Kind.HISTOGRAM: lambda metric, tags: HistogramSeries(metric, tags, self._live),
            Kind.GAUGE: GaugeSeries,
        }

    def __len__(self) -> int:
        return len(self._series)

    def get(self, metric: Metric, tags: Mapping[str, str]) -> Series:
        """The series of ``metric`` for ``tags``, created on first use."""
        key_tags = normalize_tags(tags)
        key = (metric.name, key_tags)
        series = self._series.get(key)
        if series is not None:
            return series
        with self._lock:
            series = self._series.get(key)
            if series is None and len(self._series) >= self.max_series:
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
                series = self._factories[metric.kind](metric, key_tags)
                self._series[key] = series
                same = self._by_metric.setdefault(metric.name, [])
                if isinstance(series, CounterSeries):
                    series.place = len(same)
                    series.watch = self._watch
                same.append(series)
        return series

    def _all(self) -> list[Series]:
        with self._lock:
            return list(self._series.values())

    def totals(self, metric: Metric) -> list[tuple[TagTuple, int]]:
        """Every series of ``metric`` with its non-zero count in this process."""
        with self._lock:
            series = list(self._by_metric.get(metric.name, ()))
        return [(s.tags, count) for s in series if (count := s.count)]

    def take_exemplars(self, metric: Metric) -> list[tuple[TagTuple, object]]:
        """The span context each counter series of ``metric`` was last counted in since the last
        take (see ``CounterSeries``), each taken once."""
        with self._lock:
            series = list(self._by_metric.get(metric.name, ()))
        taken: list[tuple[TagTuple, object]] = []
        for s in series:
            exemplar = getattr(s, "exemplar", None)
            if exemplar is not None:
                # Unlocked: a count in a span between the read and the reset loses its exemplar
                # to the next one, never its count.
                s.exemplar = None  # type: ignore[attr-defined]
                taken.append((s.tags, exemplar))
        return taken

    def watch_counters(self, moved: list[CounterSeries]) -> None:
        """From now on every counter series puts itself on ``moved`` at its next add after it was
        taken off (see ``CounterSeries.watch``); those that exist go on it at once."""
        with self._lock:
            self._watch = moved
            for series in self._series.values():
                if isinstance(series, CounterSeries):
                    series.watch = None
                    moved.append(series)

    def counted_series(self, metric: Metric) -> int:
        """How many series of ``metric`` exist (their ``place`` is below that)."""
        with self._lock:
            return len(self._by_metric.get(metric.name, ()))

    def series_of(self, metric: Metric) -> list[Series]:
        """Every series of ``metric``, in the order they were made (a copy of the list)."""
        with self._lock:
            return list(self._by_metric.get(metric.name, ()))

    def snapshot(self) -> dict[tuple[str, TagTuple], int]:
        """Every non-zero count, keyed by (unprefixed name, tags): counters and histograms."""
        return {(s.metric.name, s.tags): count for s in self._all() if (count := s.count)}

    def has_pending(self, kinds: Iterable[Kind]) -> bool:
        """Whether a series of one of ``kinds`` counted something not yet pushed."""
        wanted = set(kinds)
        return any(s.pending for s in self._all() if s.metric.kind in wanted)

    def has_counts(self) -> bool:
        """Whether anything at all was counted in this process."""
        return any(s.count or s.pending for s in self._all())

    def drain(self, kinds: Iterable[Kind]) -> list[Delta]:
        """Take what every series of ``kinds`` counted since the last push."""
        wanted = set(kinds)
        deltas: list[Delta] = []
        for series in self._all():
            if series.metric.kind in wanted and series.pending:
                delta = series.take()
                if delta is not None:
                    deltas.append(delta)
        return deltas

    def give_back(self, deltas: Sequence[Delta]) -> None:
        """Return deltas that were not sent to their series, to go out with the next push."""
        for delta in deltas:
            series = self._series.get((delta.metric.name, delta.tags))
            if series is not None:
                series.give_back(delta)

    def reset_after_fork(self) -> None:
        """Start every series again from zero, in a forked child."""
        self._lock = threading.Lock()
        for series in self._series.values():
            series.reset_after_fork()
