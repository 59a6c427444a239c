"""Reading the ``[store_metrics]`` configuration, the Airflow way.

Options come from section ``[store_metrics]`` of ``airflow.cfg`` or from
``AIRFLOW__STORE_METRICS__<OPTION>`` environment variables (Airflow's own precedence applies
when Airflow is installed; without Airflow only the environment is read). Defaults follow
Airflow's ``[metrics]`` section, so with no ``[store_metrics]`` section at all metrics go where
Airflow's own metrics go, always with their tags (``backend = auto``:
``store_metrics.config.auto_backend``).

Every bad value raises ``ConfigError`` naming the option and the
accepted values; the plugin logs that once and leaves tasks uninstrumented. ``backend = airflow``
where Airflow's sender would drop the tags raises ``TagsLostError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigError, TagsLostError
from . import auto_backend, options
from .options import AUTO, CONFIG_OPTIONS, COUNT_AT_API_SERVER, SERVER_PROMETHEUS_PORTS, default

SECTION = "store_metrics"
ENV_PREFIX = "AIRFLOW__STORE_METRICS__"
#: The ``[store_metrics]`` option names, in the table's order.
OPTIONS: tuple[str, ...] = tuple(option.name for option in CONFIG_OPTIONS)

#: Reads one option: returns its raw text, or None when it is not set.
OptionReader = Callable[[str, str], "str | None"]


@dataclass(frozen=True)
class OptionValues:
    """The configuration the plugin and the ``store-metrics`` command act on."""

    enabled: bool = default("enabled")
    count_at: str = default("count_at")
    backend: str = default("backend")
    host: str = default("host")
    port: int = default("port")
    prefix: str = default("prefix")
    otel_exporter: str = default("otel_exporter")
    otel_temporality: str = default("otel_temporality")
    prometheus_host: str = default("prometheus_host")
    prometheus_port: int = default("prometheus_port")
    max_udp_rate: int = default("max_udp_rate")
    flush_interval: float = default("flush_interval")
    flush_timeout: float = default("flush_timeout")
    server_metrics: bool = default("server_metrics")
    stall_tick_ms: float = default("stall_tick_ms")
    stall_threshold_ms: float = default("stall_threshold_ms")
    server_prometheus_port: int = default("server_prometheus_port")
    server_exposition: str = default("server_exposition")
    worker_label: str = default("worker_label")
    traces: str = default("traces")
    traces_keys: bool = default("traces_keys")
    inventory_interval: float = default("inventory_interval")
    inventory_timeout: float = default("inventory_timeout")
    inventory_top: int = default("inventory_top")
    inventory_export: str = default("inventory_export")
    inventory_port: int = default("inventory_port")
    ui: bool = default("ui")
    ui_cache_ttl: float = default("ui_cache_ttl")
    ui_timeout: float = default("ui_timeout")
    ui_prometheus_url: str = default("ui_prometheus_url")
    ui_prometheus_selector: str = default("ui_prometheus_selector")
    ui_prometheus_bearer_token_file: str = default("ui_prometheus_bearer_token_file")
    ui_prometheus_basic_auth_user: str = default("ui_prometheus_basic_auth_user")
    ui_prometheus_basic_auth_password_file: str = default("ui_prometheus_basic_auth_password_file")
    ui_prometheus_ca_file: str = default("ui_prometheus_ca_file")
    ui_prometheus_tls_skip_verify: bool = default("ui_prometheus_tls_skip_verify")
    ui_grafana_url: str = default("ui_grafana_url")
    #: Where each value came from, for ``store-metrics check``.
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: Why ``backend = auto`` stands for ``backend`` here ('' when the backend was set).
    backend_reason: str = field(default="", compare=False)

    @property
    def sends_nowhere(self) -> bool:
        """``auto`` found no ``[metrics]`` backend: the plugin counts, nobody receives (said once)."""
        return self.backend == "none" and bool(self.backend_reason)

    @property
    def counts_at_api_server(self) -> bool:
        """``count_at = api_server``: the API server's workers count the calls, task processes nothing."""
        return self.count_at == COUNT_AT_API_SERVER

    def configure_kwargs(self) -> dict[str, Any]:
        """Arguments for ``store_metrics.configure``: the backend, and every option it takes."""
        values = self.as_dict()
        kwargs: dict[str, Any] = {"backend": self.backend}
        for option in CONFIG_OPTIONS:
            if option.emitter or option.backends:
                kwargs[option.keyword] = values[option.name]
        return kwargs

    @property
    def worker_label_style(self) -> str:
        """``worker_label`` with ``auto`` decided: ``slot`` where each API server worker is scraped on
        its own endpoint (``otel`` with the ``prometheus`` exporter), else ``host_slot``."""
        if self.worker_label != options.WORKER_LABEL_AUTO:
            return self.worker_label
        scraped = self.backend == "otel" and self.otel_exporter == "prometheus"
        return options.WORKER_LABEL_SLOT if scraped else options.WORKER_LABEL_HOST_SLOT

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
        values.pop("backend_reason")
        return values


def environment_reader(environ: Mapping[str, str] | None = None) -> OptionReader:
    """Read options from ``AIRFLOW__<SECTION>__<OPTION>`` variables only."""
    env = os.environ if environ is None else environ

    def read(section: str, option: str) -> str | None:
        return env.get(f"AIRFLOW__{section.upper()}__{option.upper()}")

    return read


def airflow_reader() -> OptionReader:
    """Read options through Airflow's configuration (airflow.cfg, then environment, then defaults).

    Airflow also knows ``[store_metrics]``'s defaults, from this package's provider info
    (``store_metrics.integration.provider_info``): a value equal to that default reads as not set, so that
    ``store-metrics check`` says "default" and the ``[metrics]`` fallbacks still apply.
    """
    from airflow.sdk.configuration import conf

    def read(section: str, option: str) -> str | None:
        if not conf.has_option(section, option):
            return None
        value = conf.get(section, option, fallback=None)
        if value is None:
            return None
        known = options.BY_NAME.get(option) if section == SECTION else None
        if known is not None and str(value) == known.airflow_default:
            return None
        return str(value)

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


def read_options(read: OptionReader | None = None, environ: Mapping[str, str] | None = None) -> OptionValues:
    """Read and check ``[store_metrics]``; raise ``ConfigError`` on the first bad value."""
    read = read or default_reader()
    env = os.environ if environ is None else environ
    for name in _present_options(read, env):
        if name not in OPTIONS:
            raise ConfigError(name, "(unknown option)", ", ".join(OPTIONS))

    sources: dict[str, str] = {}

    def raw(option: options.Option, backend: str) -> str:
        value = read(SECTION, option.name)
        if value is not None and value.strip() != "":
            sources[option.name] = f"[{SECTION}] {option.name}"
            return value.strip()
        fallback = option.fallback(backend)
        if fallback is not None:
            value = read(*fallback)
            if value is not None and value.strip() != "":
                sources[option.name] = f"[{fallback[0]}] {fallback[1]}"
                return value.strip()
        sources[option.name] = "default"
        return str(option.default)

    values: dict[str, Any] = {}
    backend = reason = ""
    # Table order: `backend` comes before the options whose Airflow fallback depends on it.
    for option in CONFIG_OPTIONS:
        values[option.name] = option.check(option.name, raw(option, backend))
        if option.name == "backend":
            backend, reason = _concrete_backend(values["backend"], read)
            values["backend"] = backend
    _check_prometheus_auth(values)
    return OptionValues(**values, sources=sources, backend_reason=reason)


def _check_prometheus_auth(values: Mapping[str, Any]) -> None:
    """One way to authenticate to the UI's Prometheus, and basic authentication whole."""
    token, user = values["ui_prometheus_bearer_token_file"], values["ui_prometheus_basic_auth_user"]
    password = values["ui_prometheus_basic_auth_password_file"]
    if token and (user or password):
        raise ConfigError(
            "ui_prometheus_bearer_token_file",
            token,
            "empty when ui_prometheus_basic_auth_user is set (one way to authenticate to Prometheus)",
        )
    if user and not password:
        raise ConfigError(
            "ui_prometheus_basic_auth_password_file",
            password,
            "an absolute path to the password's file when ui_prometheus_basic_auth_user is set",
        )
    if password and not user:
        raise ConfigError(
            "ui_prometheus_basic_auth_user",
            user,
            "a user name when ui_prometheus_basic_auth_password_file is set",
        )


def _concrete_backend(backend: str, read: OptionReader) -> tuple[str, str]:
    """``auto`` resolved against ``[metrics]`` (and why); ``airflow`` refused where it drops tags."""
    if backend == AUTO:
        return auto_backend.choose_backend(auto_backend.read_airflow_metrics(read))
    if backend == "airflow":
        loses = auto_backend.read_airflow_metrics(read).loses
        if loses:
            raise TagsLostError(loses)
    return backend, ""
