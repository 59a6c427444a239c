"""The ``airflow`` backend: hand the sums to Airflow's own metrics module.

Metrics then go wherever Airflow's ``[metrics]`` section already sends them (StatsD,
DogStatsD or OpenTelemetry), with Airflow's prefix, allow/block lists and name handler.
One ``stats.incr(name, count=N, tags=...)`` per series per flush, instead of one per call.
Histograms (API server side) go through ``stats.timing``, one call per observation (each
bucket's observations as its mean, so counts and sums are exact), gauges through ``stats.gauge``.
Airflow's StatsD loggers send timings as ``ms`` timers, which statsd_exporter divides by 1000.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk.observability import stats

from ..emitter import Delta, GaugeValue, HistogramDelta, SeriesDelta, TotalsSource
from ..wire import sampled_observations

_NOWHERE = "none: [metrics] enables no backend"


def _airflow_target() -> str:
    try:
        from airflow.sdk.configuration import conf

        if conf.getboolean("metrics", "statsd_datadog_enabled", fallback=False):
            return "dogstatsd"
        if conf.getboolean("metrics", "statsd_on", fallback=False):
            return "statsd"
        if conf.getboolean("metrics", "otel_on", fallback=False):
            return "otel"
    except Exception:
        return "unknown"
    return _NOWHERE


class AirflowStatsBackend:
    """Pushes deltas through ``airflow.sdk.observability.stats.incr``."""

    pull = False

    def describe(self) -> str:
        return f"airflow (Airflow's [metrics] backend: {_airflow_target()})"

    @property
    def sends_nowhere(self) -> bool:
        """Whether Airflow's ``[metrics]`` enables no backend, so the sums would go nowhere."""
        return _airflow_target() == _NOWHERE

    def open(self, source: TotalsSource) -> None:
        from airflow.sdk._shared.observability.metrics import stats as shared_stats

        # A task process has initialised Airflow's stats already; other processes (dag.test(),
        # the `check` command) may not have, and would silently drop everything.
        if getattr(shared_stats, "_factory", True) is None:
            from airflow.sdk.configuration import conf
            from airflow.sdk.observability.metrics import stats_utils

            stats.initialize(
                factory=stats_utils.get_stats_factory(),
                export_legacy_names=conf.getboolean("metrics", "legacy_names_on", fallback=True),
            )

    def export(self, deltas: Sequence[Delta]) -> None:
        for delta in deltas:
            if isinstance(delta, SeriesDelta):
                stats.incr(delta.metric.name, count=delta.value, tags=dict(delta.tags))
            elif isinstance(delta, HistogramDelta):
                tags = dict(delta.tags)
                for value, n in sampled_observations(delta.buckets):
                    for _ in range(n):
                        stats.timing(delta.metric.name, value, tags=tags)
            elif isinstance(delta, GaugeValue):
                stats.gauge(delta.metric.name, delta.value, tags=dict(delta.tags))

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


def create(**_: Any) -> AirflowStatsBackend:
    return AirflowStatsBackend()
