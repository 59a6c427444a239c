"""The aggregating emitter and its parts, one job per module.

* ``series``: one series per (metric, tag set) of each kind, behind one small interface;
* ``registry``: finds and creates series, caps their number, drains and takes back deltas;
* ``delivery``: opens the backend, pushes, keeps exactly what was not sent;
* ``worker``: the one thread that pushes on an interval, on request and at close;
* ``process``: what every emitter must hear of ``fork()`` and exit;
* ``aggregating``: ``AggregatingEmitter``, the facade the rest of the package uses.
"""

from __future__ import annotations

from .aggregating import (
    DEFAULT_EXIT_TIMEOUT,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_FLUSH_TIMEOUT,
    DEFAULT_MAX_SERIES,
    AggregatingEmitter,
)
from .registry import OVERFLOW_TAG_VALUE
from .series import CounterSeries, GaugeSeries, HistogramSeries

__all__ = [
    "DEFAULT_EXIT_TIMEOUT",
    "DEFAULT_FLUSH_INTERVAL",
    "DEFAULT_FLUSH_TIMEOUT",
    "DEFAULT_MAX_SERIES",
    "OVERFLOW_TAG_VALUE",
    "AggregatingEmitter",
    "CounterSeries",
    "GaugeSeries",
    "HistogramSeries",
]
