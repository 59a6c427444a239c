"""Shared pieces of the benchmarks: stores, sinks, timing helpers, backend set-up.

Nothing here fakes a backend: StatsD and DogStatsD lines go to a real UDP socket on
127.0.0.1, OpenTelemetry goes through the real SDK (an ``InMemoryMetricReader``), and Airflow's
per-call path is Airflow's own ``airflow.sdk.observability.stats`` module.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent

#: The four tags every state store counter carries, as under ``dag.test()`` for a ``@task``.
TAGS: dict[str, str] = {
    "dag_id": "bench_dag",
    "task_id": "bench_task",
    "run_type": "manual",
    "operator": "_PythonDecoratedOperator",
}

BACKENDS: tuple[str, ...] = ("otel", "dogstatsd", "statsd", "airflow", "none")


def prepare_airflow_home() -> str:
    """Point Airflow at a throw-away home, so importing it never touches ``~/airflow``."""
    home = os.environ.get("STORE_METRICS_BENCH_AIRFLOW_HOME")
    if not home:
        home = tempfile.mkdtemp(prefix="store-metrics-bench-airflow-")
        os.environ["STORE_METRICS_BENCH_AIRFLOW_HOME"] = home
    os.environ["AIRFLOW_HOME"] = home
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    return home


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for a benchmark child process: the repo on the path, Airflow at home."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def median(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.median(data) if data else float("nan")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def rss_bytes() -> int:
    """Resident set size of this process, from /proc (Linux)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


# -- stores ----------------------------------------------------------------------------------

_MISSING: Any = object()


class MemoryStore:
    """An in-memory store shaped like the Task SDK's ``TaskStateStoreAccessor`` (sync only)."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(data or {})

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clear(self) -> None:
        self._data.clear()


class AsyncMemoryStore(MemoryStore):
    """Adds ``aget/aset/adelete/aclear`` that complete without I/O (like the asset accessor's shape)."""

    async def aget(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    async def aset(self, key: str, value: Any, *, retention: Any = None) -> None:
        self._data[key] = value

    async def adelete(self, key: str) -> None:
        self._data.pop(key, None)

    async def aclear(self) -> None:
        self._data.clear()


class AirflowPerCallStore(AsyncMemoryStore):
    """The upstream proposal's way: the accessor itself calls Airflow's ``stats.incr`` on every call.

    The call is made inline in the accessor (no wrapper frame), so what it adds over
    ``MemoryStore`` is Airflow's per-call metrics path and nothing else.
    """

    def __init__(self, data: dict[str, Any] | None, stats_tags: dict[str, str]) -> None:
        super().__init__(data)
        from airflow.sdk.observability import stats

        self._stats = stats
        self._stats_tags = stats_tags

    def get(self, key: str, default: Any = None) -> Any:
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self._stats.incr("task_state_store.read_absent", tags=self._stats_tags)
            return default
        self._stats.incr("task_state_store.read_found", tags=self._stats_tags)
        return value

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        self._data[key] = value
        self._stats.incr("task_state_store.write", tags=self._stats_tags)

    def delete(self, key: str) -> None:
        self._data.pop(key, None)
        self._stats.incr("task_state_store.delete", tags=self._stats_tags)

    def clear(self) -> None:
        self._data.clear()
        self._stats.incr("task_state_store.clear", tags=self._stats_tags)

    async def aget(self, key: str, default: Any = None) -> Any:
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self._stats.incr("asset_state_store.read_absent", tags=self._stats_tags)
            return default
        self._stats.incr("asset_state_store.read_found", tags=self._stats_tags)
        return value

    async def aset(self, key: str, value: Any, *, retention: Any = None) -> None:
        self._data[key] = value
        self._stats.incr("asset_state_store.write", tags=self._stats_tags)


# -- sinks -----------------------------------------------------------------------------------


class UdpSink:
    """A real UDP socket on 127.0.0.1, read by another process (``benchmarks.udp_sink``).

    The reader lives in its own process so that receiving datagrams never takes the GIL from
    the process being measured.
    """

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.udp_sink"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            env=subprocess_env(),
        )
        assert self._proc.stdout is not None and self._proc.stdin is not None
        self.port = int(self._proc.stdout.readline())

    def _ask(self, command: str) -> str:
        assert self._proc.stdout is not None and self._proc.stdin is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        return self._proc.stdout.readline().strip()

    def counts(self) -> tuple[int, int]:
        """(datagrams, lines) received since the last reset."""
        datagrams, lines = self._ask("count").split()
        return int(datagrams), int(lines)

    def wait_for_lines(self, expected: int, timeout: float = 5.0) -> int:
        """Lines received, once ``expected`` arrived or nothing more came for a while."""
        deadline = time.monotonic() + timeout
        last, stable_since = -1, time.monotonic()
        while True:
            lines = self.counts()[1]
            now = time.monotonic()
            if lines >= expected or now > deadline or (lines == last and now - stable_since > 0.5):
                return lines
            if lines != last:
                last, stable_since = lines, now
            time.sleep(0.02)

    def reset(self) -> None:
        self._ask("reset")

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


# -- backends --------------------------------------------------------------------------------


def otel_in_memory_provider(max_series: int = 50_000) -> tuple[Any, Any]:
    """A ``MeterProvider`` with one ``InMemoryMetricReader`` (nothing leaves the process)."""
    from opentelemetry.sdk.metrics import Counter as SdkCounter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics import ObservableCounter as SdkObservableCounter
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    limits: dict[type, int] = {SdkObservableCounter: max_series + 1, SdkCounter: max_series + 1}
    reader = InMemoryMetricReader(cardinality_limits=limits)
    return MeterProvider(metric_readers=[reader], shutdown_on_exit=False), reader


def airflow_stats_factory(backend: str, sink_port: int) -> tuple[Callable[[], Any], str]:
    """A factory for Airflow's own stats logger that matches ``backend``, and its description.

    * otel: Airflow's ``SafeOtelLogger`` over an SDK provider with an in-memory reader;
    * dogstatsd: Airflow's ``get_dogstatsd_logger`` (its defaults) to the UDP sink;
    * statsd and airflow: Airflow's ``get_statsd_logger`` with InfluxDB tags to the UDP sink
      (our ``airflow`` backend hands its sums to exactly this logger);
    * none: Airflow's ``NoStatsLogger`` (Airflow with no ``[metrics]`` backend).
    """
    if backend == "otel":
        from airflow.sdk._shared.observability.metrics.otel_logger import SafeOtelLogger

        provider, _reader = otel_in_memory_provider()
        return (lambda: SafeOtelLogger(provider, "airflow")), "SafeOtelLogger (OTel SDK, in-memory reader)"
    if backend == "dogstatsd":
        from airflow.sdk._shared.observability.metrics.datadog_logger import get_dogstatsd_logger

        def dog() -> Any:
            return get_dogstatsd_logger(host="127.0.0.1", port=sink_port, namespace="airflow")

        return dog, "SafeDogStatsdLogger (datadog DogStatsd, Airflow's defaults) to UDP sink"
    if backend in ("statsd", "airflow"):
        from airflow.sdk._shared.observability.metrics.statsd_logger import get_statsd_logger
        from statsd import StatsClient

        def plain() -> Any:
            return get_statsd_logger(
                stats_class=StatsClient,
                host="127.0.0.1",
                port=sink_port,
                prefix="airflow",
                influxdb_tags_enabled=True,
                statsd_influxdb_enabled=True,  # [metrics] statsd_influxdb_enabled sets both
            )

        return plain, "SafeStatsdLogger (pystatsd, InfluxDB tags) to UDP sink"
    if backend == "none":
        from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger

        return NoStatsLogger, "NoStatsLogger (Airflow with no [metrics] backend: nothing counted)"
    raise ValueError(backend)


class BackendSetup:
    """Our emitter configured for one backend, with Airflow's stats set up to match."""

    def __init__(self, backend: str, sink: UdpSink, **emitter_options: Any) -> None:
        from airflow.sdk.observability import stats

        import store_metrics

        self.backend = backend
        factory, self.airflow_path = airflow_stats_factory(backend, sink.port)
        stats.initialize(factory=factory, export_legacy_names=True)
        self.reader: Any = None
        if backend == "otel":
            provider, self.reader = otel_in_memory_provider()
            self.emitter = store_metrics.configure("otel", meter_provider=provider, **emitter_options)
            self.ours = "observable counters on an OTel SDK provider (in-memory reader)"
        elif backend in ("statsd", "dogstatsd"):
            self.emitter = store_metrics.configure(
                backend, host="127.0.0.1", port=sink.port, **emitter_options
            )
            self.ours = f"{backend} to UDP sink"
        elif backend == "airflow":
            self.emitter = store_metrics.configure("airflow", **emitter_options)
            self.ours = "Airflow's stats (its StatsD logger, InfluxDB tags) to UDP sink"
        else:
            self.emitter = store_metrics.configure("none", **emitter_options)
            self.ours = "none (counted in memory, sent nowhere)"
        # Let the worker open the backend before anything is timed.
        self.emitter.flush(timeout=10.0)

    def close(self) -> None:
        import store_metrics

        store_metrics.shutdown(timeout=5.0)


def median_ci(values: list[float], resamples: int = 2000) -> tuple[float, float]:
    """95% bootstrap confidence interval of the median (a fixed seed: the same data, the same page)."""
    rng = random.Random(0)
    medians = sorted(median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]
