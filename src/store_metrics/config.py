"""Reading the ``[store_metrics]`` configuration, the Airflow way.

Options come from section ``[store_metrics]`` of ``airflow.cfg`` or from
``AIRFLOW__STORE_METRICS__<OPTION>`` environment variables (Airflow's own precedence applies
when Airflow is installed; without Airflow only the environment is read). Defaults follow
Airflow's ``[metrics]`` section, so with no ``[store_metrics]`` section at all metrics go where
Airflow's own metrics go.

Every bad value raises :class:`~store_metrics.errors.ConfigError` naming the option and the
accepted values; the plugin logs that once and leaves tasks uninstrumented.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from . import validate
from .aggregator import DEFAULT_FLUSH_INTERVAL, DEFAULT_FLUSH_TIMEOUT
from .backends import BACKENDS
from .catalogue import DEFAULT_PREFIX
from .errors import ConfigError

SECTION = "store_metrics"
ENV_PREFIX = "AIRFLOW__STORE_METRICS__"
OTEL_EXPORTERS = ("otlp", "prometheus", "console")
OTEL_TEMPORALITIES = ("delta", "cumulative")
#: API server side (store_metrics.server): stall monitor tick and long-stall threshold, in ms.
DEFAULT_STALL_TICK_MS = 10.0
DEFAULT_STALL_THRESHOLD_MS = 100.0
DEFAULT_SERVER_PROMETHEUS_PORT = 9465
#: How many ports from server_prometheus_port up the API server's workers may take, one each.
SERVER_PROMETHEUS_PORTS = 16

#: option -> (accepted values, default), as the README's configuration table shows them.
OPTIONS: dict[str, tuple[str, str]] = {
    "enabled": ("true / false", "true"),
    "backend": (", ".join(BACKENDS), "airflow (follow [metrics])"),
    "host": ("StatsD / DogStatsD host", "[metrics] statsd_host, else localhost"),
    "port": ("StatsD / DogStatsD UDP port", "[metrics] statsd_port, else 8125"),
    "prefix": ("metric name prefix", "[metrics] statsd_prefix / otel_prefix, else airflow"),
    "otel_exporter": (
        ", ".join(OTEL_EXPORTERS),
        "otlp (endpoint, protocol, headers from OTEL_EXPORTER_OTLP_*)",
    ),
    "otel_temporality": (", ".join(OTEL_TEMPORALITIES), "delta"),
    "prometheus_host": ("address for otel_exporter = prometheus", "0.0.0.0"),
    "prometheus_port": ("port for otel_exporter = prometheus", "9464"),
    "flush_interval": ("seconds > 0", "10"),
    "flush_timeout": ("seconds >= 0 a task waits for a flush at its end", "2"),
    "server_metrics": (
        "true / false: the API server's state store route metrics and event-loop stall monitor",
        "true",
    ),
    "stall_tick_ms": ("milliseconds from 1 to 100 between the stall monitor's ticks", "10"),
    "stall_threshold_ms": ("milliseconds from 1 to 60000: a stall this long is a long stall", "100"),
    "server_prometheus_port": (
        "first port of the API server workers' scrape endpoints (otel_exporter = prometheus), "
        f"one per worker, up to {SERVER_PROMETHEUS_PORTS}",
        str(DEFAULT_SERVER_PROMETHEUS_PORT),
    ),
}

#: Reads one option: returns its raw text, or None when it is not set.
OptionReader = Callable[[str, str], "str | None"]


@dataclass(frozen=True)
class Settings:
    """The configuration the plugin and the ``store-metrics`` command act on."""

    enabled: bool = True
    backend: str = "airflow"
    host: str = "localhost"
    port: int = 8125
    prefix: str = DEFAULT_PREFIX
    otel_exporter: str = "otlp"
    otel_temporality: str = "delta"
    prometheus_host: str = "0.0.0.0"
    prometheus_port: int = 9464
    flush_interval: float = DEFAULT_FLUSH_INTERVAL
    flush_timeout: float = DEFAULT_FLUSH_TIMEOUT
    server_metrics: bool = True
    stall_tick_ms: float = DEFAULT_STALL_TICK_MS
    stall_threshold_ms: float = DEFAULT_STALL_THRESHOLD_MS
    server_prometheus_port: int = DEFAULT_SERVER_PROMETHEUS_PORT
    #: Where each value came from, for ``store-metrics check``.
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def backend_options(self) -> dict[str, Any]:
        """The backend's own options (what :func:`store_metrics.backends.create_backend` takes)."""
        return {
            "host": self.host,
            "port": self.port,
            "prefix": self.prefix,
            "exporter": self.otel_exporter,
            "temporality": self.otel_temporality,
            "prometheus_host": self.prometheus_host,
            "prometheus_port": self.prometheus_port,
        }

    def configure_kwargs(self) -> dict[str, Any]:
        """Arguments for :func:`store_metrics.configure`."""
        return {
            "backend": self.backend,
            **self.backend_options(),
            "flush_interval": self.flush_interval,
            "flush_timeout": self.flush_timeout,
        }

    def server_configure_kwargs(self, worker: str) -> dict[str, Any]:
        """Arguments for the API server worker's emitter: long-lived, so cumulative, with its identity."""
        return {
            **self.configure_kwargs(),
            "temporality": "cumulative",
            "instance_id": worker,
            "prometheus_port": self.server_prometheus_port,
            "prometheus_port_tries": SERVER_PROMETHEUS_PORTS,
        }

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values.pop("sources")
        return values


def environment_reader(environ: Mapping[str, str] | None = None) -> OptionReader:
    """Read options from ``AIRFLOW__<SECTION>__<OPTION>`` variables only."""
    env = os.environ if environ is None else environ

    def read(section: str, option: str) -> str | None:
        return env.get(f"AIRFLOW__{section.upper()}__{option.upper()}")

    return read


def airflow_reader() -> OptionReader:
    """Read options through Airflow's configuration (airflow.cfg, then environment, then defaults)."""
    from airflow.sdk.configuration import conf

    def read(section: str, option: str) -> str | None:
        if not conf.has_option(section, option):
            return None
        value = conf.get(section, option, fallback=None)
        return None if value is None else str(value)

    return read


def default_reader() -> OptionReader:
    """Airflow's configuration when Airflow is installed, else the environment."""
    try:
        return airflow_reader()
    except ImportError:
        return environment_reader()


def _present_options(read: OptionReader, environ: Mapping[str, str]) -> Iterable[str]:
    names = {k[len(ENV_PREFIX) :].lower() for k in environ if k.startswith(ENV_PREFIX)}
    try:
        from airflow.sdk.configuration import conf

        section = conf.getsection(SECTION) or {}
        names |= {str(k).lower() for k in section}
    except Exception:  # no Airflow, or no such section
        pass
    return sorted(names)


def load_settings(read: OptionReader | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read and check ``[store_metrics]``; raise :class:`ConfigError` on the first bad value."""
    read = read or default_reader()
    env = os.environ if environ is None else environ
    for name in _present_options(read, env):
        if name not in OPTIONS:
            raise ConfigError(name, "(unknown option)", ", ".join(OPTIONS))

    sources: dict[str, str] = {}

    def option(name: str, fallback: tuple[str, str] | None = None, default: str = "") -> str:
        raw = read(SECTION, name)
        if raw is not None and raw.strip() != "":
            sources[name] = f"[{SECTION}] {name}"
            return raw.strip()
        if fallback is not None:
            section, key = fallback
            value = read(section, key)
            if value is not None and value.strip() != "":
                sources[name] = f"[{section}] {key}"
                return value.strip()
        sources[name] = "default"
        return default

    enabled = validate.boolean("enabled", option("enabled", default="true"))
    backend = validate.choice("backend", option("backend", default="airflow"), BACKENDS)
    host = validate.host("host", option("host", ("metrics", "statsd_host"), "localhost"))
    port = validate.port("port", option("port", ("metrics", "statsd_port"), "8125"))
    prefix_source = ("metrics", "otel_prefix") if backend == "otel" else ("metrics", "statsd_prefix")
    prefix = validate.prefix("prefix", option("prefix", prefix_source, DEFAULT_PREFIX))
    otel_exporter = validate.choice("otel_exporter", option("otel_exporter", default="otlp"), OTEL_EXPORTERS)
    otel_temporality = validate.choice(
        "otel_temporality", option("otel_temporality", default="delta"), OTEL_TEMPORALITIES
    )
    prometheus_host = validate.host("prometheus_host", option("prometheus_host", default="0.0.0.0"))
    prometheus_port = validate.port("prometheus_port", option("prometheus_port", default="9464"))
    flush_interval = validate.positive_seconds(
        "flush_interval", option("flush_interval", default=str(DEFAULT_FLUSH_INTERVAL))
    )
    flush_timeout = validate.positive_seconds(
        "flush_timeout", option("flush_timeout", default=str(DEFAULT_FLUSH_TIMEOUT)), allow_zero=True
    )
    server_metrics = validate.boolean("server_metrics", option("server_metrics", default="true"))
    stall_tick_ms = validate.number_between(
        "stall_tick_ms", option("stall_tick_ms", default=str(DEFAULT_STALL_TICK_MS)), 1, 100, "milliseconds"
    )
    stall_threshold_ms = validate.number_between(
        "stall_threshold_ms",
        option("stall_threshold_ms", default=str(DEFAULT_STALL_THRESHOLD_MS)),
        1,
        60_000,
        "milliseconds",
    )
    server_prometheus_port = validate.port(
        "server_prometheus_port",
        option("server_prometheus_port", default=str(DEFAULT_SERVER_PROMETHEUS_PORT)),
    )
    return Settings(
        enabled=enabled,
        backend=backend,
        host=host,
        port=port,
        prefix=prefix,
        otel_exporter=otel_exporter,
        otel_temporality=otel_temporality,
        prometheus_host=prometheus_host,
        prometheus_port=prometheus_port,
        flush_interval=flush_interval,
        flush_timeout=flush_timeout,
        server_metrics=server_metrics,
        stall_tick_ms=stall_tick_ms,
        stall_threshold_ms=stall_threshold_ms,
        server_prometheus_port=server_prometheus_port,
        sources=sources,
    )
