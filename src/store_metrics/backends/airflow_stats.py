"""The ``airflow`` backend: hand the sums to Airflow's own metrics module.

Metrics then go wherever Airflow's ``[metrics]`` section already sends them (StatsD,
DogStatsD or OpenTelemetry), with Airflow's prefix, allow/block lists and name handler.
Counters: one ``stats.incr(name, count=N, tags=...)`` per series per flush, instead of one per
call. Gauges (API server side): one ``stats.gauge`` per series per flush. Airflow's StatsD
loggers send timings as ``ms`` timers, which statsd_exporter divides by 1000.

Histograms (API server side) are **live**: each observation is one ``stats.timing`` call on the
caller's thread, as it happens, with its exact value. Airflow's ``timing`` takes one value and
no count or sample rate, so a histogram cannot leave in O(series) calls: ``N`` observations cost
``N`` calls whichever thread makes them. Made at flush on the emitter's worker (as before), they
come as one burst that holds the GIL against the API server's event loop. Measured on 2 cores
(``python -m benchmarks.histogram_export``, Airflow 3.3's StatsD logger to a UDP sink): one
``stats.timing`` costs about 16 µs; replaying 100,000 observations took 1.5 s on a worker
thread, during which a 1 ms ticker on an event loop woke up to 42 ms late; with Airflow's OTel
logger, 9 µs a call, 0.9 s, up to 15 ms late and 5 ms late at the median. Live, the same calls
add those microseconds to the request that observed the value, the flush has nothing left to
do (4 µs instead of 1.5 s), the values are exact rather than bucket means, and a StatsD receiver
gets them spread over the interval instead of all at once. What an Airflow logger does per call
is what Airflow does on its own request paths: the StatsD loggers send one UDP datagram (the
address resolved when the client is built, in ``AirflowStatsBackend.open`` on the worker),
the OTel logger records in memory.

Observations made before the backend is open in this process still arrive as a
``HistogramDelta`` in ``AirflowStatsBackend.export``: one ``stats.timing`` per observation,
each bucket's observations as its mean, so counts and sums are exact.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from airflow.sdk.observability import stats

from .. import logs
from ..catalogue import Metric
from ..config.auto_backend import NONE, STATSD, AirflowMetrics, read_airflow_metrics
from ..contracts import TotalsSource
from ..deltas import Buckets, CounterDelta, Delta, GaugeValue, HistogramDelta, TagTuple, bucket_mean
from ..errors import PartialExport


def _airflow_metrics() -> AirflowMetrics:
    from ..config.reader import airflow_reader

    return read_airflow_metrics(airflow_reader())


def _build_client_now(shared_stats: Any) -> None:
    """Make Airflow build its stats client here, on the emitter's worker, not at the first call.

    Airflow builds it at its first ``stats`` call (again in a forked child); with live histograms
    that would be on the API server's event loop, and building a StatsD client resolves its host.
    DogStatsD resolves only when it first sends: its socket is opened here too.
    """
    build = getattr(shared_stats, "_get_backend", None)  # Airflow's own, private: may change
    if not callable(build):
        return
    client = getattr(build(), "dogstatsd", None)
    if client is not None and callable(getattr(client, "get_socket", None)):
        try:
            client.get_socket()
        except Exception:  # it resolves again at its next send, as it would have anyway
            logs.logger.debug("DogStatsD socket not opened in advance", exc_info=True)


class _Unsent(Exception):
    """Raised inside ``AirflowStatsBackend.export`` with what of one delta was not sent."""

    def __init__(self, unsent: Delta) -> None:
        super().__init__()
        self.unsent = unsent


def _rest_of(delta: HistogramDelta, bucket: int, sent: int) -> HistogramDelta:
    """What is left of ``delta`` once ``sent`` observations of ``bucket`` (and every bucket before) went."""
    buckets = delta.buckets
    n = buckets.counts[bucket]
    counts = tuple(0 if i < bucket else n - sent if i == bucket else c for i, c in enumerate(buckets.counts))
    sums = tuple(
        0.0 if i < bucket else s * (n - sent) / n if i == bucket else s for i, s in enumerate(buckets.sums)
    )
    return delta._replace(buckets=Buckets(buckets.bounds, counts, sums))


#: What Airflow's StatsD client takes in a stat once it has appended the InfluxDB tags (its
#: ``stat_name_default_handler`` with ``statsd_influxdb_enabled``: ASCII letters, digits, ``_ . - /``
#: and the tags' ``,`` and ``=``); it drops the whole stat, with an error, over anything else.
_REFUSED_BY_AIRFLOW_STATSD = re.compile(r"[^A-Za-z0-9_.\-]")
#: The value length the earlier tag rule kept (Airflow also refuses a stat over 250 characters).
_AIRFLOW_STATSD_VALUE_LENGTH = 200


def _plain_dict(tags: TagTuple) -> dict[str, str]:
    # A fresh dict each time: Airflow's loggers are handed it and may keep or change it.
    return dict(tags)


def _airflow_statsd_dict(tags: TagTuple) -> dict[str, str]:
    """The tags as Airflow's StatsD client with InfluxDB tags takes them: every other character
    ``_`` (the earlier tag rule), so the count arrives rather than being dropped by Airflow."""
    out = {}
    for key, value in tags:
        safe = _REFUSED_BY_AIRFLOW_STATSD.sub("_", value)[:_AIRFLOW_STATSD_VALUE_LENGTH]
        if safe != value:
            logs.once(
                "airflow-statsd-tag-values",
                logging.WARNING,
                "store-metrics: backend = airflow sends through Airflow's StatsD client, which drops "
                "any stat whose tags hold more than ASCII letters, digits, '_', '.' and '-': such tag "
                "values (e.g. %s=%r) are sent with '_' in place of the rest, so two ids can share a "
                "series on this path; backend = statsd sends every id as it is (said once)",
                key,
                value,
            )
        out[key] = safe
    return out


class AirflowStatsBackend:
    """Pushes deltas through ``airflow.sdk.observability.stats``; histograms live through ``stats.timing``."""

    pull = False
    #: open() may build Airflow's stats client (a socket, a DNS lookup): done on the worker.
    opens_without_io = False
    #: Each histogram observation is one stats.timing call as it happens (see the module docstring).
    live_histograms = True
    #: Airflow adds its own ([metrics] statsd_prefix / otel_prefix).
    prefix = ""

    def describe(self) -> str:
        return f"airflow: {_airflow_metrics().describe()}"

    @property
    def sends_nowhere(self) -> bool:
        """Whether Airflow's ``[metrics]`` enables no backend, so the sums would go nowhere."""
        return _airflow_metrics().sender == NONE

    #: How a series' tags are handed to Airflow (see ``_airflow_statsd_dict``), set at open().
    _tag_dict = staticmethod(_plain_dict)

    def open(self, source: TotalsSource) -> None:
        from airflow.sdk._shared.observability.metrics import stats as shared_stats

        airflow = _airflow_metrics()
        if airflow.sender == STATSD and not airflow.drops_all_tags:
            self._tag_dict = _airflow_statsd_dict

        # A task process has initialised Airflow's stats already; other processes (dag.test(),
        # the `check` command) may not have, and would silently drop everything.
        if getattr(shared_stats, "_factory", True) is None:
            from airflow.sdk.configuration import conf
            from airflow.sdk.observability.metrics import stats_utils

            stats.initialize(
                factory=stats_utils.get_stats_factory(),
                export_legacy_names=conf.getboolean("metrics", "legacy_names_on", fallback=True),
            )
        _build_client_now(shared_stats)

    def record_histogram(self, metric: Metric, tags: TagTuple, value: float) -> None:
        stats.timing(metric.name, value, tags=self._tag_dict(tags))

    def export(self, deltas: Sequence[Delta]) -> None:
        for done, delta in enumerate(deltas):
            try:
                self._send(delta)
            except _Unsent as unsent:
                cause = unsent.__cause__
                reason = f"{type(cause).__name__}: {cause}"
                raise PartialExport([unsent.unsent, *deltas[done + 1 :]], reason) from cause
            except Exception as exc:
                if not done:
                    raise
                raise PartialExport(deltas[done:], f"{type(exc).__name__}: {exc}") from exc

    def _send(self, delta: Delta) -> None:
        name = delta.metric.name
        if isinstance(delta, CounterDelta):
            stats.incr(name, count=delta.value, tags=self._tag_dict(delta.tags))
        elif isinstance(delta, GaugeValue):
            stats.gauge(name, delta.value, tags=self._tag_dict(delta.tags))
        else:
            # Observed before the backend was open in this process: one call per observation.
            buckets = delta.buckets
            for i, n in enumerate(buckets.counts):
                if not n:
                    continue
                value = bucket_mean(buckets, i)
                for sent in range(n):
                    try:
                        stats.timing(name, value, tags=self._tag_dict(delta.tags))
                    except Exception as exc:
                        if not sent and not any(buckets.counts[:i]):
                            raise  # nothing of this delta went
                        raise _Unsent(_rest_of(delta, i, sent)) from exc

    def force_flush(self, timeout: float) -> None:
        # Airflow's OTel logger exports on a 60 s period; a task process can end before that.
        from airflow.sdk._shared.observability.metrics import stats as shared_stats

        backend = getattr(shared_stats, "_backend", None)
        if backend is not None and type(backend).__name__ == "SafeOtelLogger":
            from opentelemetry import metrics

            provider: Any = metrics.get_meter_provider()
            if hasattr(provider, "force_flush"):
                provider.force_flush(timeout_millis=int(timeout * 1000))

    def close(self, timeout: float) -> None:
        return None  # Airflow owns its client

    def after_fork_in_child(self) -> None:
        return None  # Airflow resets its own backend after fork


def create() -> AirflowStatsBackend:
    return AirflowStatsBackend()
