"""What the observable counters of one (provider, prefix) report: the sum over the emitters using it.

No OpenTelemetry call happens on a state store call: each catalogue counter is an
``ObservableCounter`` whose callback reads the emitters' in-memory totals (through
``TotalsSource``) when the SDK collects.

Exemplars: a series a traced call counted since the last collection carries that call's span
context (``take_exemplars``); its observation is made in a context holding that span, so the
SDK's exemplar filter (``trace_based`` by default, ``OTEL_METRICS_EXEMPLAR_FILTER``) attaches the
span's trace and span ids to the point, once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, Observation

from ... import catalogue
from ...catalogue import Metric
from ...contracts import TotalsSource
from ...deltas import TagTuple


class Observed:
    """The totals behind one (provider, prefix)'s observable counters.

    Callbacks run on the SDK's collection thread. A closed emitter's totals are kept in
    ``retired`` so the cumulative value never goes down; in a forked child the parent's counts
    are dropped (the child counts from zero, like its emitter).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.sources: list[TotalsSource] = []
        self.retired: dict[str, dict[TagTuple, int]] = {}

    def _adopt_process(self) -> None:
        # Caller holds self.lock.
        if self.pid != os.getpid():
            self.pid = os.getpid()
            self.sources = []
            self.retired = {}

    def attach(self, source: TotalsSource) -> None:
        with self.lock:
            self._adopt_process()
            if not any(s is source for s in self.sources):
                self.sources.append(source)

    def detach(self, source: TotalsSource) -> None:
        with self.lock:
            if self.pid != os.getpid() or not any(s is source for s in self.sources):
                return
            self.sources = [s for s in self.sources if s is not source]
            for metric in catalogue.all_counters():
                for tags, total in source.totals(metric):
                    bucket = self.retired.setdefault(metric.name, {})
                    bucket[tags] = bucket.get(tags, 0) + total

    def observe(self, metric: Metric) -> list[Observation]:
        with self.lock:
            # Inherited through fork() and not (yet) attached in this process: report nothing,
            # the parent's counts are the parent's.
            if self.pid != os.getpid():
                return []
            sources = list(self.sources)
            totals = dict(self.retired.get(metric.name, {}))
        contexts: dict[TagTuple, Context] = {}
        for source in sources:
            for tags, total in source.totals(metric):
                totals[tags] = totals.get(tags, 0) + total
            take = getattr(source, "take_exemplars", None)
            if take is not None:
                for tags, span_context in take(metric):
                    contexts[tags] = trace.set_span_in_context(trace.NonRecordingSpan(span_context))
        return [Observation(total, dict(tags), contexts.get(tags)) for tags, total in totals.items() if total]


def callback(observed: Observed, metric: Metric) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """The ``ObservableCounter`` callback of ``metric``: its totals, read at collection time."""

    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return observed.observe(metric)

    return observe
