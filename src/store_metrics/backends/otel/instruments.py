"""The instruments of one (provider, prefix), created once per process, and the registry that finds them.

* one ``ObservableCounter`` per catalogue counter, whose callback reads the totals of every
  emitter using this provider (``Observed``);
* one synchronous ``Histogram`` per histogram metric (the catalogue's bucket bounds as the
  advisory boundaries) and one ``Gauge`` per gauge metric, made at first use.

Configuring again with the same provider (for example the global one) finds the same
instruments: they keep counting, and no duplicate is registered with the SDK.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from opentelemetry.metrics import Histogram, Meter
from opentelemetry.metrics import _Gauge as Gauge

from ... import __version__, catalogue
from ...catalogue import Metric, full_name
from .observed import Observed, callback

METER_NAME = "store_metrics"


class Instruments:
    """What store-metrics registered on one provider under one prefix."""

    def __init__(self, provider: Any, prefix: str) -> None:
        # Holds no reference to the provider: the registry below is keyed on it weakly.
        self.prefix = prefix
        self.observed = Observed()
        self._meter: Meter = provider.get_meter(METER_NAME, __version__)
        self._lock = threading.Lock()
        self._histograms: dict[str, Histogram] = {}
        self._gauges: dict[str, Gauge] = {}
        for metric in catalogue.all_counters():
            self._meter.create_observable_counter(
                full_name(prefix, metric.name),
                callbacks=[callback(self.observed, metric)],
                unit=metric.unit,
                description=metric.description,
            )

    def histogram(self, metric: Metric) -> Histogram:
        """The SDK histogram of ``metric`` (a dict lookup once it exists)."""
        instrument = self._histograms.get(metric.name)
        if instrument is None:
            with self._lock:
                instrument = self._histograms.get(metric.name)
                if instrument is None:
                    instrument = self._histograms[metric.name] = self._meter.create_histogram(
                        full_name(self.prefix, metric.name),
                        unit=metric.unit,
                        description=metric.description,
                        explicit_bucket_boundaries_advisory=list(metric.buckets),
                    )
        return instrument

    def gauge(self, metric: Metric) -> Gauge:
        """The SDK gauge of ``metric``."""
        instrument = self._gauges.get(metric.name)
        if instrument is None:
            with self._lock:
                instrument = self._gauges.get(metric.name)
                if instrument is None:
                    instrument = self._gauges[metric.name] = self._meter.create_gauge(
                        full_name(self.prefix, metric.name), unit=metric.unit, description=metric.description
                    )
        return instrument


# provider -> prefix -> its instruments. Weak: a provider that is dropped takes its entry.
_registry: weakref.WeakKeyDictionary[Any, dict[str, Instruments]] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def instruments_for(provider: Any, prefix: str) -> Instruments:
    """The instruments of ``provider`` under ``prefix``, registered with it on first use."""
    with _registry_lock:
        by_prefix = _registry.setdefault(provider, {})
        instruments = by_prefix.get(prefix)
        if instruments is None:
            instruments = by_prefix[prefix] = Instruments(provider, prefix)
        return instruments


def forget(provider: Any) -> None:
    """Drop the entry of a provider that was shut down."""
    with _registry_lock:
        _registry.pop(provider, None)
