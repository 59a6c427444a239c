"""The one table of options: every ``[store_metrics]`` option and every ``configure()`` argument.

Each option is written here once: its name, how its value is checked, what it accepts, its
default, where Airflow's own configuration supplies it, which backends take it, and one line of
documentation. Everything else derives from this table:

* ``store_metrics.config.reader.read_options`` reads and checks the ``[store_metrics]`` options;
* ``store-metrics check`` prints them with where each value came from;
* ``store_metrics.configure`` / ``create_emitter`` reject an argument that is not here, and
  hand each backend only the arguments it declares here;
* the docs' configuration table (docs/configure.md) is ``markdown_table`` (a test keeps them
  equal);
* Airflow's own view of the section (``airflow config list``, ``airflow config get-value``) is
  ``store_metrics.integration.provider_info``, built from this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from ..errors import ConfigError
from . import validate

#: The backends, by name: ``store_metrics.backends.<module>``, and the extra that brings its library.
BACKENDS: Final[dict[str, tuple[str, str]]] = {
    "airflow": ("store_metrics.backends.airflow_stats", "airflow"),
    "otel": ("store_metrics.backends.otel", "otel"),
    "dogstatsd": ("store_metrics.backends.dogstatsd", ""),
    "statsd": ("store_metrics.backends.statsd", ""),
    "none": ("store_metrics.backends.none", ""),
}
#: ``backend = auto`` (the default): a backend chosen from Airflow's ``[metrics]`` so the counts keep
#: their tags (``store_metrics.config.auto_backend``).
AUTO: Final = "auto"
BACKEND_CHOICES: Final = (AUTO, *BACKENDS)
OTEL_EXPORTERS: Final = ("otlp", "prometheus", "console")
OTEL_TEMPORALITIES: Final = ("delta", "cumulative")
#: Where state store calls are counted: in each task process, or by the API server's workers.
COUNT_AT_TASKS: Final = "tasks"
COUNT_AT_API_SERVER: Final = "api_server"
COUNT_AT: Final = (COUNT_AT_TASKS, COUNT_AT_API_SERVER)
#: How many ports from server_prometheus_port up the API server's workers may take, one each.
SERVER_PROMETHEUS_PORTS: Final = 16
#: What an API server worker's ``worker`` label holds: ``<short host>-<slot>``, the slot alone, or
#: (``auto``) the slot alone where each worker is scraped on its own endpoint, else host and slot.
WORKER_LABEL_AUTO: Final = "auto"
WORKER_LABEL_HOST_SLOT: Final = "host_slot"
WORKER_LABEL_SLOT: Final = "slot"
WORKER_LABELS: Final = (WORKER_LABEL_AUTO, WORKER_LABEL_HOST_SLOT, WORKER_LABEL_SLOT)
#: Whether each state store call is also an OpenTelemetry span: ``auto`` follows Airflow's
#: ``[traces] otel_on``.
TRACES_AUTO: Final = "auto"
TRACES_ON: Final = "on"
TRACES_OFF: Final = "off"
TRACES: Final = (TRACES_AUTO, TRACES_ON, TRACES_OFF)
#: How a scrape endpoint of ``otel_exporter = prometheus`` is served: the plugin's own incremental
#: rendering of the same text, or the OpenTelemetry SDK's Prometheus exporter.
SERVER_EXPOSITION_NATIVE: Final = "native"
SERVER_EXPOSITION_OTEL: Final = "otel"
SERVER_EXPOSITIONS: Final = (SERVER_EXPOSITION_NATIVE, SERVER_EXPOSITION_OTEL)
#: Where ``store-metrics inventory --serve`` reports the footprint.
INVENTORY_EXPORTS: Final = ("prometheus", "backend")

Check = Callable[[str, object], Any]


@dataclass(frozen=True)
class Option:
    """One option. ``check(name, raw)`` returns the typed value or raises ``ConfigError``."""

    name: str
    check: Check
    default: Any
    #: What a user may write, for the docs and error messages.
    accepted: str
    doc: str
    #: The default as the docs state it, when they say more than ``default``.
    default_doc: str = ""
    #: ``[section] key`` pairs of Airflow's own configuration that supply the value when the
    #: option is not set, by backend (``"*"``: any backend).
    airflow: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: The backends that take it, and under which keyword (default: the argument's own name).
    backends: Mapping[str, str] = field(default_factory=dict)
    #: ``False``: a Python argument of ``configure()`` only, not read from ``[store_metrics]``.
    in_config: bool = True
    #: Taken by the emitter itself (``flush_interval``, ...), not only by backends.
    emitter: bool = False
    #: The keyword ``configure()`` takes it as, when not ``name``.
    argument: str = ""

    @property
    def keyword(self) -> str:
        return self.argument or self.name

    @property
    def airflow_default(self) -> str:
        """The default as Airflow's configuration holds it (provider info): text, empty where
        ``[metrics]`` decides."""
        if self.airflow:
            return ""
        if isinstance(self.default, bool):
            return str(self.default)
        if isinstance(self.default, float) and self.default.is_integer():
            return str(int(self.default))
        return str(self.default)

    def fallback(self, backend: str) -> tuple[str, str] | None:
        return self.airflow.get(backend) or self.airflow.get("*")


def _choice(accepted: tuple[str, ...]) -> Check:
    return partial(validate.choice, accepted=accepted)


def _between(low: float, high: float, unit: str) -> Check:
    return partial(validate.number_between, low=low, high=high, unit=unit)


def _seconds(allow_zero: bool) -> Check:
    return partial(validate.positive_seconds, allow_zero=allow_zero)


def _anything(option: str, value: object) -> object:
    return value


def _text(option: str, value: object) -> str:
    return str(value)


_OTEL = "otel"

OPTIONS: Final[tuple[Option, ...]] = (
    Option(
        "enabled",
        validate.boolean,
        True,
        "`true` / `false`",
        "store-metrics on or off: `false` instruments no task and no trigger, and the API server then "
        "neither counts (`count_at = api_server`) nor serves its route metrics and stall monitor; "
        "`store-metrics inventory` is not affected",
    ),
    Option(
        "count_at",
        _choice(COUNT_AT),
        COUNT_AT_TASKS,
        ", ".join(f"`{name}`" for name in COUNT_AT),
        "where state store calls are counted: in each task process (`tasks`; the only one that works "
        "under `dag.test()`), or by the API server's workers as the Execution API requests arrive "
        "(`api_server`: tasks then count nothing; [Counting at the API server](count-at-api-server.md))",
    ),
    Option(
        "backend",
        _choice(BACKEND_CHOICES),
        AUTO,
        ", ".join(f"`{name}`" for name in BACKEND_CHOICES),
        "where the counts go; `airflow` hands them to Airflow's own metrics module (`[metrics]`), and is "
        "refused where that would drop their tags",
        default_doc="`auto`: where Airflow's `[metrics]` sends its own metrics, always with the tags: "
        "through Airflow where its sender keeps them, else store-metrics' own `statsd` (InfluxDB tags) "
        "or `dogstatsd` lines to `statsd_host`:`statsd_port`; nothing, said once, where `[metrics]` "
        "enables no backend",
    ),
    Option(
        "host",
        validate.host,
        "localhost",
        "host name or IP address",
        "StatsD / DogStatsD UDP target",
        default_doc="Airflow's `[metrics] statsd_host`, else `localhost`",
        airflow={"*": ("metrics", "statsd_host")},
        backends={"statsd": "host", "dogstatsd": "host"},
    ),
    Option(
        "port",
        validate.port,
        8125,
        "1 to 65535",
        "StatsD / DogStatsD UDP port",
        default_doc="Airflow's `[metrics] statsd_port`, else `8125`",
        airflow={"*": ("metrics", "statsd_port")},
        backends={"statsd": "port", "dogstatsd": "port"},
    ),
    Option(
        "prefix",
        validate.prefix,
        "airflow",
        "dot-separated words",
        "metric name prefix",
        default_doc="Airflow's `[metrics] statsd_prefix` (`otel_prefix` for `otel`), else `airflow`",
        airflow={"*": ("metrics", "statsd_prefix"), "otel": ("metrics", "otel_prefix")},
        backends={"statsd": "prefix", "dogstatsd": "prefix", "otel": "prefix"},
    ),
    Option(
        "otel_exporter",
        _choice(OTEL_EXPORTERS),
        "otlp",
        ", ".join(f"`{name}`" for name in OTEL_EXPORTERS),
        "what the `otel` backend exports with",
        default_doc="`otlp`: endpoint, protocol (`http/protobuf` or `grpc`), headers and timeout from "
        "the standard `OTEL_EXPORTER_OTLP_*` variables",
        backends={_OTEL: "exporter"},
        argument="exporter",
    ),
    Option(
        "otel_temporality",
        _choice(OTEL_TEMPORALITIES),
        "delta",
        ", ".join(f"`{name}`" for name in OTEL_TEMPORALITIES),
        "counter temporality of the `otel` backend",
        default_doc="`delta` (task processes are short-lived; see "
        "[Topologies](how-it-works.md#which-topology-for-short-lived-task-processes))",
        backends={_OTEL: "temporality"},
        argument="temporality",
    ),
    Option(
        "prometheus_host",
        validate.host,
        "0.0.0.0",
        "address",
        "address of the scrape endpoint for `otel_exporter = prometheus`",
        backends={_OTEL: "prometheus_host"},
    ),
    Option(
        "prometheus_port",
        validate.port,
        9464,
        "1 to 65535",
        "port of that endpoint",
        backends={_OTEL: "prometheus_port"},
    ),
    Option(
        "max_udp_rate",
        validate.nonnegative_int,
        4_194_304,
        "bytes per second, an integer >= 0",
        "the pace of the `statsd` and `dogstatsd` backends: bytes a second a flush sends at most "
        "after its first 64 KiB (`0`: as fast as the socket takes them). A UDP receiver drops what "
        "its socket cannot hold and no sender hears of it; the default, with statsd_exporter's "
        "`--statsd.read-buffer=4194304`, takes one flush of 150,000 series whole in about 5 s. What "
        "the pace holds back when a flush's wait is over (`flush_timeout` at task end, "
        "`flush_interval` in the background) is kept for the next flush",
        backends={"statsd": "max_udp_rate", "dogstatsd": "max_udp_rate"},
    ),
    Option(
        "flush_interval",
        _seconds(False),
        10.0,
        "seconds > 0",
        "seconds between background flushes",
        backends={_OTEL: "export_interval"},
        emitter=True,
    ),
    Option(
        "flush_timeout",
        _seconds(True),
        2.0,
        "seconds >= 0",
        "seconds a task waits, at its end, for its counts to be handed over",
        emitter=True,
    ),
    Option(
        "server_metrics",
        validate.boolean,
        True,
        "`true` / `false`",
        "the API server's state store route metrics and event-loop stall monitor "
        "([API server health](api-server-health.md))",
    ),
    Option(
        "stall_tick_ms",
        _between(1, 100, "milliseconds"),
        10.0,
        "1 to 100",
        "milliseconds between the stall monitor's ticks on each API server worker's event loop: "
        "a stall is measured to within one tick",
    ),
    Option(
        "stall_threshold_ms",
        _between(1, 60_000, "milliseconds"),
        100.0,
        "1 to 60000",
        "a stall at least this long (ms) counts as a long stall and is logged",
    ),
    Option(
        "server_prometheus_port",
        validate.port,
        9465,
        "1 to 65535",
        "with `otel_exporter = prometheus`: the first port of the API server workers' scrape "
        f"endpoints, one per worker, up to {SERVER_PROMETHEUS_PORTS}",
    ),
    Option(
        "server_exposition",
        _choice(SERVER_EXPOSITIONS),
        SERVER_EXPOSITION_NATIVE,
        ", ".join(f"`{name}`" for name in SERVER_EXPOSITIONS),
        "how a scrape endpoint of `otel_exporter = prometheus` (each API server worker's) is served: "
        "`native` writes the OpenTelemetry exporter's text itself, reading only the series counted "
        "since the last scrape and making again only their lines, on the endpoint's own thread with a "
        "pause every few milliseconds of work (150,000 series: 0.16 s a scrape on 2 cores under a load "
        "of 15, the worker's event loop not held beyond its idle floor); `otel` is the "
        "OpenTelemetry SDK's Prometheus exporter (OpenMetrics and gzip on request; at 50,000 series 2 s a "
        "scrape on a quiet machine, 11 s under that load, the loop held 0.2 s and 1.5 s). A "
        "`MeterProvider` that is not the "
        "plugin's own is always "
        "read by the SDK ([Count at the API server](count-at-api-server.md#the-scrape-endpoint))",
        backends={_OTEL: "exposition"},
    ),
    Option(
        "worker_label",
        _choice(WORKER_LABELS),
        WORKER_LABEL_AUTO,
        ", ".join(f"`{name}`" for name in WORKER_LABELS),
        "what each API server worker's `worker` label holds: `host_slot` is `<short host>-<slot>`, "
        "distinct across hosts and pods (needed where every pod sends to one statsd_exporter or "
        "Collector, which keeps one series per label set), but a rollout brings new values; `slot` "
        "is the slot alone (`0`, `1`, ...), the same in every pod, so a rollout adds no values: "
        "only where each worker is scraped on its own endpoint, whose `instance` keeps pods apart",
        default_doc="`auto`: `slot` with `backend = otel` and `otel_exporter = prometheus` (each "
        "worker scraped), else `host_slot`",
    ),
    # -- traces: each state store call as an OpenTelemetry span (docs/traces.md) -------------------
    Option(
        "traces",
        _choice(TRACES),
        TRACES_AUTO,
        ", ".join(f"`{name}`" for name in TRACES),
        "each state store call a task makes as an OpenTelemetry CLIENT span under the task's "
        "`worker.<task_id>` span, through the tracer provider Airflow's traces use (with `count_at = "
        "api_server`: each state store request the API server serves, as a SERVER span there) "
        "([Traces](traces.md)); `on` also where `[traces] otel_on` is off (a provider set up by other "
        "means, such as `opentelemetry-instrument`)",
        default_doc="`auto`: on where Airflow's `[traces] otel_on` is on",
    ),
    Option(
        "traces_keys",
        validate.boolean,
        False,
        "`true` / `false`",
        "put each call's key on its span (`store_metrics.key`); off by default, since keys can be "
        "unbounded and can say more than the people who read traces should see",
    ),
    # -- store-metrics inventory (the state store footprint) ---------------------------------------
    Option(
        "inventory_interval",
        _seconds(False),
        300.0,
        "seconds > 0",
        "seconds between two readings of the state store tables by `store-metrics inventory --serve` "
        "(one aggregate query per table; [State store footprint](footprint.md))",
    ),
    Option(
        "inventory_timeout",
        _seconds(False),
        30.0,
        "seconds > 0",
        "statement timeout of each inventory query; a slower or unreachable database costs one log "
        "line and the last footprint read is kept",
    ),
    Option(
        "inventory_top",
        validate.positive_int,
        20,
        "an integer >= 1",
        "DAGs (and tasks per DAG) and assets the inventory reports by name, largest by bytes first; "
        "the rest are summed under `<other>`",
    ),
    Option(
        "inventory_export",
        _choice(INVENTORY_EXPORTS),
        "prometheus",
        ", ".join(f"`{name}`" for name in INVENTORY_EXPORTS),
        "where `store-metrics inventory --serve` reports the footprint",
        default_doc="`prometheus`: its own scrape endpoint on `inventory_port`; `backend`: through "
        "`backend` above, like the tasks' counters",
    ),
    Option(
        "inventory_port",
        validate.port,
        9490,
        "1 to 65535",
        "port of the `store-metrics inventory --serve` scrape endpoint (also of the `otel` backend's "
        "Prometheus exporter there, with `inventory_export = backend`)",
    ),
    # -- the State store tab and page in Airflow's UI (store_metrics.ui) --------------------------
    Option(
        "ui",
        validate.boolean,
        True,
        "`true` / `false`",
        "the *State store* tab on each DAG's page and the *State store* page in Airflow's UI, served "
        "by the API server ([State store in the UI](https://store-metrics.github.io/airflow-store-metrics/ui/));"
        " `false` removes both. `enabled` and `server_metrics` do not affect them",
    ),
    Option(
        "ui_cache_ttl",
        _seconds(False),
        30.0,
        "seconds > 0",
        "seconds each API server worker keeps what it read for the UI (a DAG's footprint, the "
        "deployment page, the calls) before it asks the database or Prometheus again",
    ),
    Option(
        "ui_timeout",
        _seconds(False),
        5.0,
        "seconds > 0",
        "statement timeout of the UI's aggregate queries, and timeout of its Prometheus queries",
    ),
    Option(
        "ui_prometheus_url",
        validate.http_url,
        "",
        "an `http(s)://` URL, or empty",
        "a Prometheus (or compatible) server the API server queries for the tab's calls per task, "
        "operation and found ratio (the dashboards' series); empty: the tab says how to get them",
        default_doc="empty (no calls shown)",
    ),
    Option(
        "ui_prometheus_selector",
        validate.label_matchers,
        "",
        'PromQL label matchers, comma-separated (`cluster="east"`), or empty',
        "the label matchers that pick this deployment's series where `ui_prometheus_url` holds "
        "several (a Thanos Querier or VictoriaMetrics over several clusters, or one Prometheus "
        "scraping several deployments): added to every query the tab sends, so a DAG's calls are "
        "this deployment's only, never those of a DAG of the same id elsewhere",
        default_doc="empty (every series of the DAG's id)",
    ),
    Option(
        "ui_prometheus_bearer_token_file",
        validate.file_path,
        "",
        "an absolute path, or empty",
        "a file holding the bearer token the API server sends to `ui_prometheus_url` "
        "(`Authorization: Bearer`), read at each query so a rotated token is picked up; as "
        "Prometheus's `authorization.credentials_file`",
        default_doc="empty (no token)",
    ),
    Option(
        "ui_prometheus_basic_auth_user",
        _text,
        "",
        "a user name, or empty",
        "the user of HTTP basic authentication to `ui_prometheus_url` (Grafana's `basicAuthUser`); "
        "needs `ui_prometheus_basic_auth_password_file`",
        default_doc="empty (no basic authentication)",
    ),
    Option(
        "ui_prometheus_basic_auth_password_file",
        validate.file_path,
        "",
        "an absolute path, or empty",
        "a file holding the password of `ui_prometheus_basic_auth_user`, read at each query; as "
        "Prometheus's `basic_auth.password_file`",
        default_doc="empty",
    ),
    Option(
        "ui_prometheus_ca_file",
        validate.file_path,
        "",
        "an absolute path, or empty",
        "the CA certificates (PEM) an `https://` `ui_prometheus_url`'s certificate is checked "
        "against, instead of the system's (Grafana's `tlsCACert`, Prometheus's `tls_config.ca_file`)",
        default_doc="empty (the system's CAs)",
    ),
    Option(
        "ui_prometheus_tls_skip_verify",
        validate.boolean,
        False,
        "`true` / `false`",
        "`true`: no check of an `https://` `ui_prometheus_url`'s certificate (Grafana's "
        "`tlsSkipVerify`): anyone on the path can then read the queries and the token; for a test "
        "setup only",
    ),
    Option(
        "ui_grafana_url",
        validate.http_url,
        "",
        "an `http(s)://` URL, or empty",
        "Grafana's base URL: the tab links to the store-metrics dashboard filtered on the DAG",
        default_doc="empty (no link)",
    ),
    # -- arguments of configure() only -----------------------------------------------------------
    Option(
        "exit_timeout",
        _seconds(True),
        0.05,
        "seconds >= 0",
        "seconds the exit flush waits",
        in_config=False,
        emitter=True,
    ),
    Option(
        "max_series",
        validate.positive_int,
        160_000,
        "an integer >= 1",
        "series kept before new tag sets are counted as `<overflow>`",
        in_config=False,
        emitter=True,
        backends={_OTEL: "max_series"},
    ),
    Option(
        "max_udp_size",
        validate.positive_int,
        512,
        "bytes",
        "largest StatsD datagram",
        in_config=False,
        backends={"statsd": "max_udp_size"},
    ),
    Option(
        "meter_provider",
        _anything,
        None,
        "an OpenTelemetry `MeterProvider`",
        "report through this provider instead of the global or an own one",
        in_config=False,
        backends={_OTEL: "meter_provider"},
    ),
    Option(
        "service_name",
        _text,
        "airflow",
        "text",
        "`service.name` of an own provider (unless `OTEL_SERVICE_NAME` says otherwise)",
        in_config=False,
        backends={_OTEL: "service_name"},
    ),
    Option(
        "instance_id",
        _text,
        "",
        "text",
        "`service.instance.id` of an own provider (default: one per process)",
        in_config=False,
        backends={_OTEL: "instance_id"},
    ),
    Option(
        "prometheus_port_tries",
        validate.positive_int,
        1,
        "an integer >= 1",
        "how many ports from `prometheus_port` up to try",
        in_config=False,
        backends={_OTEL: "prometheus_port_tries"},
    ),
)

BY_NAME: Final[dict[str, Option]] = {option.name: option for option in OPTIONS}
BY_KEYWORD: Final[dict[str, Option]] = {option.keyword: option for option in OPTIONS}
#: The emitter's own options (``AggregatingEmitter``'s keyword arguments).
EMITTER_OPTIONS: Final[tuple[Option, ...]] = tuple(o for o in OPTIONS if o.emitter)
#: The ``[store_metrics]`` options, in table order.
CONFIG_OPTIONS: Final[tuple[Option, ...]] = tuple(o for o in OPTIONS if o.in_config)
#: An example value of each ``[store_metrics]`` option, for Airflow's configuration reference
#: (``airflow config list``; ``store_metrics.integration.provider_info``).
EXAMPLES: Final[dict[str, str]] = {
    "enabled": "false",
    "count_at": "api_server",
    "backend": "statsd",
    "host": "statsd-exporter.monitoring",
    "port": "9125",
    "prefix": "myco.airflow",
    "otel_exporter": "prometheus",
    "otel_temporality": "cumulative",
    "prometheus_host": "127.0.0.1",
    "prometheus_port": "9464",
    "max_udp_rate": "16777216",
    "flush_interval": "30",
    "flush_timeout": "5",
    "server_metrics": "false",
    "stall_tick_ms": "20",
    "stall_threshold_ms": "250",
    "server_prometheus_port": "9465",
    "server_exposition": "otel",
    "worker_label": "slot",
    "traces": "on",
    "traces_keys": "true",
    "inventory_interval": "600",
    "inventory_timeout": "60",
    "inventory_top": "50",
    "inventory_export": "backend",
    "inventory_port": "9491",
    "ui": "false",
    "ui_cache_ttl": "60",
    "ui_timeout": "5",
    "ui_prometheus_url": "http://prometheus-operated.monitoring:9090",
    "ui_prometheus_selector": 'cluster="east"',
    "ui_prometheus_bearer_token_file": "/var/run/secrets/prometheus/token",
    "ui_prometheus_basic_auth_user": "airflow-ui",
    "ui_prometheus_basic_auth_password_file": "/var/run/secrets/prometheus/password",
    "ui_prometheus_ca_file": "/etc/ssl/prometheus/ca.pem",
    "ui_prometheus_tls_skip_verify": "false",
    "ui_grafana_url": "https://grafana.example.com",
}


def default(name: str) -> Any:
    return BY_NAME[name].default


def split_arguments(backend: str, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check ``configure()`` keyword arguments; return (emitter's, backend's own keywords).

    An argument the table does not know is a ``ConfigError`` naming it and the known ones.
    Known ones that ``backend`` does not take are dropped, so one set of settings serves every
    backend.
    """
    emitter: dict[str, Any] = {}
    backend_kwargs: dict[str, Any] = {}
    for keyword, value in arguments.items():
        option = BY_KEYWORD.get(keyword)
        if option is None or keyword in ("backend", "enabled") or not (option.emitter or option.backends):
            known = sorted(o.keyword for o in OPTIONS if o.emitter or o.backends)
            raise ConfigError(keyword, value, f"(unknown argument) one of {', '.join(known)}")
        if option.emitter:
            emitter[option.name] = value
        if backend in option.backends:
            backend_kwargs[option.backends[backend]] = value
    return emitter, backend_kwargs


def backend_options(backend: str) -> dict[str, Option]:
    """The keyword arguments ``backend``'s ``create()`` takes, according to the table."""
    return {option.backends[backend]: option for option in OPTIONS if backend in option.backends}


def markdown_table() -> str:
    """The docs' configuration table (the ``[store_metrics]`` options), for docs/configure.md."""
    rows = ["| option | values | default | what it does |", "|---|---|---|---|"]
    for option in CONFIG_OPTIONS:
        shown = option.default_doc or f"`{_shown(option.default)}`"
        rows.append(f"| `{option.name}` | {option.accepted} | {shown} | {option.doc} |")
    return "\n".join(rows) + "\n"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
