"""Helpers for users' own tests: see which store-metrics counters a task emitted.

::

    from store_metrics.testing import capture_metrics

    def test_my_dag_resumes():
        with capture_metrics() as metrics:
            my_dag.test()
        assert metrics.value("task_state_store.read_absent", task_id="submit") == 1
        assert metrics.counts(dag_id="my_dag") == {"task_state_store.read_absent": 1,
                                                   "task_state_store.write": 1}

While the block runs, the recorder is the active emitter: the plugin (and any wrapper made
with ``store_metrics.instrument_task_store``) counts into it and nothing is sent anywhere.
Wrappers made before the block keep counting into the emitter they were made with.

Tag values are compared after the tag value rule the backends apply
(``store_metrics.naming.tag_value``): pass them as your code passes them, ``dag_id="my dag"``
(whose series is tagged ``my%20dag``) or ``dag_id="données"`` (tagged ``données``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from .catalogue import Metric
from .contracts import Counter
from .counting.runtime import set_emitter
from .deltas import TagTuple
from .emitter.series import CounterSeries, GaugeSeries, HistogramSeries
from .naming import normalize_tags, tag_value


class MetricsRecorder:
    """An emitter that keeps every count in memory and sends nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[tuple[str, TagTuple], CounterSeries] = {}
        self._observers: dict[tuple[str, TagTuple], HistogramSeries | GaugeSeries] = {}
        self.flushes = 0

    def counter(self, metric: Metric, tags: Mapping[str, str]) -> Counter:
        key = (metric.name, normalize_tags(tags))
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = CounterSeries(metric, key[1])
        return series

    def histogram(self, metric: Metric, tags: Mapping[str, str]) -> HistogramSeries:
        series = self._observer(metric, tags, HistogramSeries)
        assert isinstance(series, HistogramSeries)
        return series

    def gauge(self, metric: Metric, tags: Mapping[str, str]) -> GaugeSeries:
        series = self._observer(metric, tags, GaugeSeries)
        assert isinstance(series, GaugeSeries)
        return series

    def _observer(
        self, metric: Metric, tags: Mapping[str, str], cls: type[HistogramSeries] | type[GaugeSeries]
    ) -> HistogramSeries | GaugeSeries:
        key = (metric.name, normalize_tags(tags))
        with self._lock:
            series = self._observers.get(key)
            if series is None:
                series = self._observers[key] = cls(metric, key[1])
        return series

    def observations(self, name: str, **tags: str) -> list[tuple[TagTuple, HistogramSeries | GaugeSeries]]:
        """The histogram and gauge series of metric ``name`` whose tags include ``tags``."""
        with self._lock:
            items = list(self._observers.items())
        return [(key[1], s) for key, s in items if key[0] == name and _matches(key[1], tags)]

    def flush(self, timeout: float | None = None) -> bool:
        with self._lock:
            self.flushes += 1
        return True

    def series(self) -> dict[tuple[str, TagTuple], int]:
        """Every series that counted something: ``{(name, ((tag, value), ...)): total}``."""
        with self._lock:
            items = list(self._series.items())
        return {key: s.total for key, s in items if s.total}

    def counts(self, **tags: str) -> dict[str, int]:
        """Totals by metric name (unprefixed) over the series whose tags include ``tags``."""
        result: dict[str, int] = {}
        for (name, series_tags), total in self.series().items():
            if _matches(series_tags, tags):
                result[name] = result.get(name, 0) + total
        return result

    def value(self, name: str, **tags: str) -> int:
        """Total of metric ``name`` over the series whose tags include ``tags`` (0 if none)."""
        return self.counts(**tags).get(name, 0)

    def reset(self) -> None:
        with self._lock:
            self._series.clear()
            self._observers.clear()


def _matches(series_tags: TagTuple, wanted: Mapping[str, str]) -> bool:
    have = dict(series_tags)
    return all(have.get(k) == tag_value(v) for k, v in wanted.items())


@contextmanager
def capture_metrics() -> Iterator[MetricsRecorder]:
    """Make a ``MetricsRecorder`` the active emitter for the duration of the block."""
    recorder = MetricsRecorder()
    previous = set_emitter(recorder)
    try:
        yield recorder
    finally:
        set_emitter(previous)
