"""The export settings: every threshold, ``for`` duration, scope and link of the shipped files, in one table.

What the monitoring mixins call ``_config``: ``store-metrics export --set NAME=VALUE`` changes one
(``--set error_ratio=0.1``), and every file that uses it (rules, promtool tests, Alertmanager
snippet, Grafana and Datadog dashboards and monitors) follows, since each is a template whose
``@NAME@`` tokens are filled in from here. docs/alerts.md holds this table (generated from it).

Each value is text, checked against its kind; a few derived values (``<duration>_seconds``,
``<ratio>_percent`` and the ones ``values`` lists) spare the templates any arithmetic.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from store_metrics import catalogue

__all__ = [
    "DERIVED_FROM",
    "RESOLVERS",
    "SETTINGS",
    "Setting",
    "ValueType",
    "collector_resolver_block",
    "defaults",
    "parse",
    "resolve",
    "seconds",
    "values",
]


class ValueType(str, enum.Enum):
    """What a setting's value is, and so how it is checked."""

    DURATION = "duration"  # Prometheus duration: 30s, 5m, 1h, 1d
    RATIO = "ratio"  # 0 < x <= 1
    COUNT = "count"  # a whole number >= 0
    NUMBER = "number"  # a number >= 0
    MATCHERS = "matchers"  # PromQL label matchers: job!="", job=~"airflow-.*"
    LABEL = "label"  # a Prometheus label (or Datadog tag) name
    URL = "url"  # http(s)://...
    TIME = "time"  # a Grafana relative time: now-24h
    CHOICE = "choice"  # one of the setting's choices
    ENDPOINTS = "endpoints"  # host[:port], comma-separated


@dataclass(frozen=True)
class Setting:
    """One export setting. ``low`` and ``high`` (in the setting's own syntax) are its documented
    range, both included: ``export`` refuses a value outside it, and the exported promtool tests
    are checked to pass at both ends (tests/shipped/test_rule_tests.py)."""

    name: str
    default: str
    kind: ValueType
    description: str
    low: str = ""
    high: str = ""
    choices: tuple[str, ...] = ()

    def number(self, value: str) -> float:
        """``value`` as a number: seconds for a duration."""
        return seconds(value) if self.kind is ValueType.DURATION else float(value)

    @property
    def range(self) -> str:
        """The documented range, as the docs say it (empty when the kind alone bounds it)."""
        return f"{self.low} to {self.high}" if self.low else ""


_DURATION = re.compile(r"^(?:[0-9]+(?:ms|s|m|h|d|w|y))+$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=|!=|=~|!~)\s*"(?:[^"\\\n]|\\.)*"\s*'
_MATCHERS = re.compile(rf"^{_MATCHER}(?:,{_MATCHER})*$")
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_URL = re.compile(r'^https?://[^\s"\\]+$')
_TIME = re.compile(r"^now(?:-[0-9]+[smhdwMy])?$")
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?"
_ENDPOINTS = re.compile(rf"^{_HOST}(?:,{_HOST})*$")
#: The loadbalancing exporter's resolvers the scaled-out Collector tier's front may use.
RESOLVERS = ("static", "dns", "k8s")
#: The port the backend Collectors receive OTLP gRPC on (the loadbalancing exporter's default too).
_OTLP_GRPC_PORT = "4317"
#: The Grafana trace data source types the provisioning can add.
TRACE_DATASOURCES = ("jaeger", "tempo")

SETTINGS: tuple[Setting, ...] = (
    # -- scope ----------------------------------------------------------------------------------------
    Setting(
        "selector",
        'job!=""',
        ValueType.MATCHERS,
        "Label matchers every rule adds to the raw store-metrics series, to pick the jobs that carry "
        'them (e.g. job=~"airflow-statsd|store-metrics-.*"). The default matches every scraped series.',
    ),
    Setting(
        "cluster_label",
        "cluster",
        ValueType.LABEL,
        "The label that tells Airflow deployments apart. Every rule keeps it (and job), every alert "
        "carries it, the dashboard has a $cluster variable: two deployments (or two topologies "
        "scraped at once) never merge or double.",
    ),
    Setting(
        "rule_interval",
        "1m",
        ValueType.DURATION,
        "Evaluation interval of the call-recording rules: each recorded sample holds the calls of one "
        "interval. Not shorter than your scrape interval (a shorter one records nothing in most "
        "intervals). Below 15s, only the short windows get promtool tests (the file says which).",
        low="1s",
        high="5m",
    ),
    Setting(
        "rule_offset",
        "30s",
        ValueType.DURATION,
        "How far behind each evaluation the call-recording rules read the counters, so a scrape still "
        "being written is never half seen (Prometheus' rule query_offset, for any version).",
        low="1s",
        high="5m",
    ),
    Setting(
        "counter_lookback",
        "1h",
        ValueType.DURATION,
        "How far back the call-recording rules look for a counter's previous value (only its growth "
        "counts) and for its target's last successful scrape: a counter first seen on a target "
        "scraped within it (a task's first run), or on a new target of a job scraped within it (a "
        "rollout's new pod), counts in full; after a longer gap, on a job never scraped before, or "
        "on a fresh Prometheus, what it already held never counts.",
        low="5m",
        high="1d",
    ),
    # -- alerts ---------------------------------------------------------------------------------------
    Setting(
        "error_ratio",
        "0.05",
        ValueType.RATIO,
        "StateStoreErrorRateHigh, StateStoreWatcherErrorRateHigh: share of a DAG's (a watcher's) "
        "calls that raised, above which they fire.",
        low="0.001",
        high="0.9",
    ),
    Setting(
        "error_min_calls",
        "10",
        ValueType.COUNT,
        "StateStoreErrorRateHigh, StateStoreWatcherErrorRateHigh: the fewest calls in the window for "
        "them to fire (one failed call of three is noise).",
        low="1",
        high="1000",
    ),
    Setting(
        "error_window",
        "1h",
        ValueType.DURATION,
        "StateStoreErrorRateHigh, StateStoreWatcherErrorRateHigh: the window the ratio is taken over, "
        "long enough to hold a whole short run (a 4-minute run of an hourly DAG failing on every call "
        "fires, once).",
        low="5m",
        high="1d",
    ),
    Setting(
        "error_for",
        "5m",
        ValueType.DURATION,
        "StateStoreErrorRateHigh, StateStoreWatcherErrorRateHigh: how long the condition holds before "
        "they fire.",
        low="1s",
        high="1d",
    ),
    Setting(
        "failing_ratio",
        "0.2",
        ValueType.RATIO,
        "StateStoreFailingAcrossDags (critical): share of all state store calls of a deployment "
        "(every DAG and watcher) that raised, above which the store itself is failing.",
        low="0.01",
        high="0.9",
    ),
    Setting(
        "failing_min_calls",
        "20",
        ValueType.COUNT,
        "StateStoreFailingAcrossDags: the fewest calls in its window to fire.",
        low="1",
        high="10000",
    ),
    Setting(
        "failing_window",
        "15m",
        ValueType.DURATION,
        "StateStoreFailingAcrossDags: the window its ratio is taken over.",
        low="5m",
        high="6h",
    ),
    Setting(
        "failing_for",
        "5m",
        ValueType.DURATION,
        "StateStoreFailingAcrossDags: how long the condition holds before it fires.",
        low="1s",
        high="6h",
    ),
    Setting(
        "never_read_window",
        "1d",
        ValueType.DURATION,
        "StateStoreTaskStateNeverRead (info): a task that wrote task state in this window without one "
        "read; it resolves once the task has not written for this long (deleted, fixed).",
        low="1h",
        high="7d",
    ),
    Setting(
        "never_read_for",
        "1h",
        ValueType.DURATION,
        "StateStoreTaskStateNeverRead: how long the condition holds before it fires.",
        low="15m",
        high="1d",
    ),
    Setting(
        "retry_start_over_ratio",
        "0.5",
        ValueType.RATIO,
        "StateStoreRetriesStartOver (warning): share of a task's retried attempts whose first read "
        "found nothing (retry_not_resumed), above which it fires.",
        low="0.1",
        high="0.99",
    ),
    Setting(
        "retry_min_attempts",
        "3",
        ValueType.COUNT,
        "StateStoreRetriesStartOver: the fewest retried attempts that read the task store in the window "
        "for it to fire (one retry that started over is no pattern).",
        low="1",
        high="100",
    ),
    Setting(
        "retry_window",
        "1d",
        ValueType.DURATION,
        "StateStoreRetriesStartOver: the window its share is taken over (retries are rare: a day holds "
        "enough of them).",
        low="1h",
        high="7d",
    ),
    Setting(
        "hygiene_interval",
        "15m",
        ValueType.DURATION,
        "Evaluation interval of the hygiene alert (StateStoreTaskStateNeverRead), which reads a day.",
        low="1s",
        high="1h",
    ),
    Setting(
        "loop_stalled_ratio",
        "0.05",
        ValueType.RATIO,
        "StateStoreApiServerLoopStalled: share of time an API server worker's event loop was stalled.",
        low="0.001",
        high="0.9",
    ),
    Setting(
        "loop_stalled_for",
        "10m",
        ValueType.DURATION,
        "StateStoreApiServerLoopStalled: how long the condition holds before it fires.",
        low="1m",
        high="1h",
    ),
    Setting(
        "long_stall_ms",
        "100",
        ValueType.NUMBER,
        "StateStoreApiServerLongStalls: a stall at least this long (ms, one of the catalogue's stall "
        "bucket bounds) is a long stall.",
        low="2.5",
        high="10000",
    ),
    Setting(
        "long_stalls_per_minute",
        "1",
        ValueType.NUMBER,
        "StateStoreApiServerLongStalls: more long stalls a minute than this, per worker, fire it.",
        low="0",
        high="600",
    ),
    Setting(
        "long_stalls_for",
        "15m",
        ValueType.DURATION,
        "StateStoreApiServerLongStalls: how long the condition holds before it fires.",
        low="1m",
        high="1h",
    ),
    Setting(
        "retention_window",
        "25h",
        ValueType.DURATION,
        "StateStoreRetentionNotApplied: expired entries present and not one removed for this long. "
        "Longer than the interval of your `airflow state-store clean` (daily: 25h).",
        low="1h",
        high="7d",
    ),
    Setting(
        "retention_for",
        "1h",
        ValueType.DURATION,
        "StateStoreRetentionNotApplied: how long the condition holds before it fires.",
        low="1m",
        high="1d",
    ),
    Setting(
        "inventory_down_for",
        "15m",
        ValueType.DURATION,
        "StateStoreInventoryDown: how long the inventory may fail (or be missing) before it fires.",
        low="1m",
        high="1d",
    ),
    Setting(
        "inventory_stale_after",
        "15m",
        ValueType.DURATION,
        "StateStoreInventoryStale: a footprint older than this (three default inventory_interval) is stale. "
        "At least 10m: a healthy footprint gets as old as the inventory's inventory_interval and "
        "inventory_timeout together (300 s and 30 s by default) before it is read again.",
        low="10m",
        high="1d",
    ),
    Setting(
        "inventory_stale_for",
        "5m",
        ValueType.DURATION,
        "StateStoreInventoryStale: how long the condition holds before it fires.",
        low="1m",
        high="1d",
    ),
    Setting(
        "missing_window",
        "1d",
        ValueType.DURATION,
        "StateStoreMetricsMissing: a deployment and job (or a target) whose store-metrics counters "
        "were there within this window and are gone (a target down, a renamed metric) fire it; it "
        "resolves this long after they went. StateStoreInventoryDown likewise, per deployment, for "
        "the inventory's series.",
        low="1h",
        high="7d",
    ),
    Setting(
        "missing_for",
        "15m",
        ValueType.DURATION,
        "StateStoreMetricsMissing: how long the counts (or the target) may be gone before it fires.",
        low="5m",
        high="1d",
    ),
    # -- series ---------------------------------------------------------------------------------------
    Setting(
        "statsd_ttl",
        "25h",
        ValueType.DURATION,
        "statsd_exporter: a counter or histogram series nothing updated for this long is dropped (the "
        "next update starts it again; the rules count it in full). Longer than a day keeps a daily "
        "DAG's series.",
        low="1h",
        high="7d",
    ),
    Setting(
        "statsd_gauge_ttl",
        "10m",
        ValueType.DURATION,
        "statsd_exporter: a gauge (the inventory's, an API server worker's stall maximum) nothing "
        "updated for this long is dropped, so a stopped sender shows no last value forever.",
        low="1m",
        high="1d",
    ),
    # -- the scaled-out Collector tier (collector/otel-collector-front.yaml) ---------------------------
    Setting(
        "collector_resolver",
        "static",
        ValueType.CHOICE,
        "The scaled-out Collector tier: how the front Collectors find the backend Collectors (the "
        "loadbalancing exporter's resolver): static (a fixed list), dns (every address a name "
        "resolves to: a headless Service) or k8s (a Service's endpoints, through the Kubernetes API).",
        choices=RESOLVERS,
    ),
    Setting(
        "collector_backends",
        "otel-collector-backend-0:4317,otel-collector-backend-1:4317",
        ValueType.ENDPOINTS,
        "The scaled-out Collector tier's backend Collectors (OTLP gRPC): with static, each host:port, "
        "comma-separated; with dns, one hostname[:port]; with k8s, one service[.namespace][:port]. The "
        "port defaults to 4317.",
    ),
    # -- links and dashboards -------------------------------------------------------------------------
    Setting(
        "runbook_url_base",
        "https://store-metrics.github.io/airflow-store-metrics/runbooks/",
        ValueType.URL,
        "Every alert's runbook_url is this followed by the alert's name in lower case and a slash.",
    ),
    Setting(
        "grafana_url",
        "http://localhost:3000",
        ValueType.URL,
        "Your Grafana: each alert's dashboard_url opens the dashboard there, filtered to the alert's labels.",
    ),
    Setting(
        "trace_datasource",
        "jaeger",
        ValueType.CHOICE,
        "Grafana: the type of the trace data source the provisioning adds (jaeger or tempo); the "
        "Prometheus data source links each exemplar's trace_id to it.",
        choices=TRACE_DATASOURCES,
    ),
    Setting(
        "trace_url",
        "http://jaeger:16686",
        ValueType.URL,
        "Grafana: where that trace data source reads traces (Jaeger's query service, or Tempo's "
        "HTTP API, such as http://tempo:3200).",
    ),
    Setting("dashboard_from", "now-24h", ValueType.TIME, "The Grafana dashboard's default time range start."),
    Setting(
        "dashboard_refresh",
        "5m",
        ValueType.DURATION,
        "The Grafana dashboard's default refresh interval.",
        low="10s",
        high="1h",
    ),
    Setting(
        "datadog_env_tag",
        "env",
        ValueType.LABEL,
        "Datadog: the tag that tells environments apart. Every monitor alerts per value of it, the "
        "dashboard has it as a template variable.",
    ),
    Setting(
        "datadog_renotify_minutes",
        "240",
        ValueType.COUNT,
        "Datadog: a monitor still alerting notifies again after this many minutes (0: never).",
        low="0",
        high="10080",
    ),
    Setting(
        "datadog_dashboard_url",
        "https://app.datadoghq.com/dashboard/lists?q=store-metrics",
        ValueType.URL,
        "Datadog: the imported dashboard's URL; monitor messages link to it with the alert's "
        "environment and DAG as template variables.",
    ),
)
_BY_NAME = {s.name: s for s in SETTINGS}


#: The derived values the templates use, and the settings each is computed from (beyond the
#: generic ``<duration>_seconds``, ``<duration>_minutes``, ``<ratio>_percent``, ``<count>_minus_one``).
DERIVED_FROM: dict[str, tuple[str, ...]] = {
    "rule_previous_offset": ("rule_offset", "rule_interval"),
    "rule_job_offset": ("rule_offset", "rule_interval"),
    "rule_lookback_offset": ("rule_offset", "rule_interval", "counter_lookback"),
    "long_stalls_per_second": ("long_stalls_per_minute",),
    "long_stall_le": ("long_stall_ms",),
    "datadog_dashboard_link": ("datadog_dashboard_url",),
    "grafana_dashboard_url": ("grafana_url",),
    "collector_resolver_block": ("collector_resolver", "collector_backends"),
}


def seconds(duration: str) -> float:
    """A Prometheus duration in seconds: ``1h30m`` -> 5400."""
    return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in re.findall(r"([0-9]+)(ms|s|m|h|d|w|y)", duration))


def _number(value: float) -> str:
    return f"{value:g}"


def _check(setting: Setting, value: str) -> None:
    kind = setting.kind
    patterns = {
        ValueType.MATCHERS: _MATCHERS,
        ValueType.LABEL: _LABEL,
        ValueType.URL: _URL,
        ValueType.TIME: _TIME,
        ValueType.ENDPOINTS: _ENDPOINTS,
    }
    if kind is ValueType.CHOICE and value not in setting.choices:
        raise ValueError(
            f"setting {setting.name}: {value!r} is not a choice (one of {', '.join(setting.choices)})"
        )
    try:
        if kind is ValueType.CHOICE:
            valid = True
        elif kind in patterns:
            valid = bool(patterns[kind].match(value))
        elif kind is ValueType.DURATION:
            valid = bool(_DURATION.match(value)) and seconds(value) > 0
        elif kind is ValueType.RATIO:
            valid = 0 < float(value) <= 1
        elif kind is ValueType.COUNT:
            valid = value.isdigit()
        else:
            valid = float(value) >= 0
    except ValueError:
        valid = False
    if not valid:
        raise ValueError(f"setting {setting.name}: {value!r} is not a {kind.value} ({_EXPECTED[kind]})")
    if setting.low and not setting.number(setting.low) <= setting.number(value) <= setting.number(
        setting.high
    ):
        raise ValueError(f"setting {setting.name}: {value} is outside its range, {setting.range}")


_EXPECTED = {
    ValueType.DURATION: "a Prometheus duration such as 30s, 5m, 1h, 1d",
    ValueType.RATIO: "a number above 0 and at most 1, such as 0.05",
    ValueType.COUNT: "a whole number, 0 or more",
    ValueType.NUMBER: "a number, 0 or more",
    ValueType.MATCHERS: 'PromQL label matchers such as job!="" or job=~"airflow-.*",env="prod"',
    ValueType.LABEL: "a label name: letters, digits and _, not starting with a digit",
    ValueType.URL: "an http:// or https:// URL",
    ValueType.TIME: "now, or now- and a duration such as now-24h",
    ValueType.CHOICE: "one of its choices",
    ValueType.ENDPOINTS: "host:port names, comma-separated, such as otel-collector-backend-0:4317",
}


#: Pairs that contradict each other: (setting, the one it may not exceed, what would happen).
_NOT_LONGER = (
    ("error_for", "error_window", "a run's failed calls leave the window before the alert can fire"),
    ("failing_for", "failing_window", "the failed calls leave the window before the alert can fire"),
    ("missing_for", "missing_window", "the counts age out of the window before the alert can fire"),
    ("hygiene_interval", "never_read_for", "the hygiene alert would fire on its first evaluation"),
)


#: How long Prometheus still finds a series after its last sample (its default lookback delta).
_LOOKBACK_SECONDS = 300


def _check_together(given: Mapping[str, str]) -> None:
    for name, limit, why in _NOT_LONGER:
        if seconds(given[name]) > seconds(given[limit]):
            raise ValueError(
                f"setting {name}: {given[name]} is longer than setting {limit} ({given[limit]}): {why}"
            )
    # StateStoreInventoryDown names a deployment whose inventory went away only while its last sample
    # is within missing_window: gone for the lookback (5m), then inventory_down_for, then evaluated.
    needed = (
        seconds(given["inventory_down_for"]) + _LOOKBACK_SECONDS + max(60, seconds(given["rule_interval"]))
    )
    if needed >= seconds(given["missing_window"]):
        raise ValueError(
            f"setting inventory_down_for: {given['inventory_down_for']} is too long for setting "
            f"missing_window ({given['missing_window']}): a deployment's inventory gone is forgotten "
            "before StateStoreInventoryDown can fire for it (inventory_down_for + 5m of lookback + a "
            "rule_interval of at least 1m must be shorter than missing_window)"
        )
    stall = float(given["long_stall_ms"])
    if stall not in catalogue.STALL_BUCKETS_MS:
        bounds = ", ".join(_number(b) for b in catalogue.STALL_BUCKETS_MS)
        raise ValueError(
            f"setting long_stall_ms: {given['long_stall_ms']} is not a stall bucket bound ({bounds})"
        )
    backends = given["collector_backends"].split(",")
    if given["collector_resolver"] != "static" and len(backends) > 1:
        raise ValueError(
            f"setting collector_backends: {given['collector_backends']!r} names several hosts, but "
            f"setting collector_resolver {given['collector_resolver']} takes one name (static takes a list)"
        )
    interval = seconds(given["rule_interval"])
    for name in (
        "error_window",
        "failing_window",
        "never_read_window",
        "retry_window",
        "counter_lookback",
        "missing_window",
    ):
        if seconds(given[name]) < interval:
            raise ValueError(
                f"setting {name}: {given[name]} is shorter than setting rule_interval "
                f"{given['rule_interval']}"
            )


def _host_port(endpoint: str) -> tuple[str, str]:
    host, _, port = endpoint.partition(":")
    return host, port or _OTLP_GRPC_PORT


def collector_resolver_block(resolver: str, backends: str) -> str:
    """The loadbalancing exporter's ``resolver:`` body for ``resolver`` and ``backends`` (the
    settings), as YAML lines indented for collector/otel-collector-front.yaml (keys of the pinned
    Collectors' loadbalancing exporter: static.hostnames, dns.hostname/port, k8s.service/ports)."""
    pad = " " * 6
    if resolver == "static":
        hosts = [":".join(_host_port(endpoint)) for endpoint in backends.split(",")]
        return f"{pad}static:\n{pad}  hostnames:\n" + "".join(
            f"{pad}    - {host}\n" for host in hosts
        ).rstrip("\n")
    host, port = _host_port(backends)
    if resolver == "dns":
        return f'{pad}dns:\n{pad}  hostname: {host}\n{pad}  port: "{port}"'
    return f"{pad}k8s:\n{pad}  service: {host}\n{pad}  ports:\n{pad}    - {port}"


def defaults() -> dict[str, str]:
    """Every setting at its default."""
    return {s.name: s.default for s in SETTINGS}


def resolve(changes: Mapping[str, str] | None = None) -> dict[str, str]:
    """The defaults with ``changes`` applied, every value checked."""
    result = defaults()
    for name, value in (changes or {}).items():
        if name not in _BY_NAME:
            raise ValueError(f"unknown setting {name!r}: one of {', '.join(sorted(_BY_NAME))}")
        result[name] = value.strip()
    for setting in SETTINGS:
        _check(setting, result[setting.name])
    _check_together(result)
    return result


def parse(assignments: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` strings (``--set``) as a mapping."""
    changes: dict[str, str] = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep:
            raise ValueError(f"--set {assignment!r}: expected NAME=VALUE")
        changes[name.strip()] = value
    return changes


def values(changes: Mapping[str, str] | None = None) -> dict[str, str]:
    """The templates' values: every setting, and what is derived from them."""
    given = resolve(changes)
    derived: dict[str, str] = {}
    for setting in SETTINGS:
        value = given[setting.name]
        if setting.kind is ValueType.DURATION:
            derived[f"{setting.name}_seconds"] = _number(seconds(value))
            derived[f"{setting.name}_minutes"] = str(max(1, math.ceil(seconds(value) / 60)))
        if setting.kind is ValueType.COUNT:
            derived[f"{setting.name}_minus_one"] = str(int(value) - 1)
        if setting.kind is ValueType.RATIO:
            derived[f"{setting.name}_percent"] = f"{_number(float(value) * 100)}%"
    offset, interval = seconds(given["rule_offset"]), seconds(given["rule_interval"])
    derived["rule_previous_offset"] = f"{_number(offset + interval)}s"
    # The read before the previous one: a job scraped by then was watched for at least a rule
    # interval, longer than a scrape interval (rule_interval is not shorter than it), so every target
    # a fresh Prometheus first scrapes in its first scrape interval is as new as the job.
    derived["rule_job_offset"] = f"{_number(offset + 2 * interval)}s"
    # Where the lookback before the previous read starts: a target scraped then (even failing) is
    # not new; one Prometheus first scrapes after it is (a new pod, failing while it starts or not).
    derived["rule_lookback_offset"] = f"{_number(offset + interval + seconds(given['counter_lookback']))}s"
    derived["long_stalls_per_second"] = repr(float(given["long_stalls_per_minute"]) / 60)
    stall = _number(float(given["long_stall_ms"]))
    # A bucket bound as the paths spell it: le="100" (Go exporters) or le="100.0" (Python's).
    derived["long_stall_le"] = stall.replace(".", "\\\\.") if "." in stall else f"{stall}(\\\\.0)?"
    link = given["datadog_dashboard_url"]
    derived["datadog_dashboard_link"] = link + ("&" if "?" in link else "?")
    derived["grafana_dashboard_url"] = given["grafana_url"].rstrip("/") + "/d/store-metrics-state-store/"
    derived["collector_resolver_block"] = collector_resolver_block(
        given["collector_resolver"], given["collector_backends"]
    )
    return {**given, **derived}
