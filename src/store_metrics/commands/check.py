"""``store-metrics check``: read the configuration as the plugin would, and prove the target works.

It prints the options that apply to the process it checks with where each value came from, the
installed Airflow's release and whether it is a tested one (and whether the triggerer and, with
``[core] multi_team``, the API server count), whether the plugin stands down (Airflow counting
natively) and the series cap; builds and opens the backend in the foreground (so a failure is
reported here, not logged from a worker thread), sends one ``store_metrics.check`` increment,
flushes it, and says what "sent" proves for that backend and whether the counts keep their tags on
the way. When the scrape port is already taken it says by which process of this host, and whether
that is a store-metrics endpoint; with ``count_at = api_server`` it warns of an API server of this
host that serves the Execution API without the core app (``host_processes``). Exit codes:
``EXIT_CODES`` (0 sent, 1 bad configuration, the same message the plugin logs, 2 missing extra,
3 the backend failed, 4 the configuration sends nowhere, 5 the counts would lose their tags).
"""

from __future__ import annotations

import contextlib
import errno
import sys
from collections.abc import Callable
from typing import Any, TextIO

from ..backends import create_backend
from ..catalogue import CHECK
from ..config.options import BY_NAME, SERVER_PROMETHEUS_PORTS, default, split_arguments
from ..config.reader import OptionValues, read_options
from ..contracts import TotalsSource
from ..deltas import CounterDelta, TagTuple
from ..emitter.registry import OVERFLOW_TAG_VALUE
from ..errors import ConfigError, MissingExtraError, TagsLostError
from ..integration import compatibility
from . import host_processes

EXIT_OK = 0
EXIT_CONFIG = 1
EXIT_MISSING_EXTRA = 2
EXIT_BACKEND = 3
#: The configuration is valid but sends nowhere (backend ``none``, or ``airflow`` with no
#: ``[metrics]`` backend enabled): counting works, nobody will see it.
EXIT_NOWHERE = 4
#: ``backend = airflow`` where Airflow's sender would drop the tags: the plugin counts nothing.
EXIT_TAGS_LOST = 5

#: How each backend's lines carry the tags (``airflow``: Airflow's own sender, checked at load).
_TAGS_ON_THE_WIRE = {
    "statsd": "in every line, InfluxDB style (name,dag_id=...,task_id=...:1|c)",
    "dogstatsd": "in every line, DogStatsD style (name:1|c|#dag_id:...,task_id:...)",
    "otel": "as OpenTelemetry attributes",
    "airflow": "through Airflow's own sender, which keeps them",
}
#: What each exit code means: ``store-metrics check --help`` and the docs' CLI page show this.
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "sent (see what 'sent' means for the backend), or store-metrics is disabled, or the scrape "
    "port is already served by a store-metrics endpoint of this host (the triggerer's, say)",
    EXIT_CONFIG: "bad configuration: the message names the option and the accepted values",
    EXIT_MISSING_EXTRA: "the backend's extra is not installed",
    EXIT_BACKEND: "the backend failed (an OTLP endpoint that refuses, a scrape port held by another "
    "program: the message names it)",
    EXIT_NOWHERE: "the configuration sends the counts nowhere",
    EXIT_TAGS_LOST: "the counts would lose their tags (backend = airflow on a [metrics] sender that drops "
    "them): the plugin refuses to count",
}
#: The kinds of process ``check --process`` can check for; a triggerer reads what a task reads.
PROCESSES = ("task", "triggerer", "api-server", "inventory")
_SERVER_OPTIONS = frozenset(
    {"server_metrics", "stall_tick_ms", "stall_threshold_ms", "server_prometheus_port"}
)
_INVENTORY = "inventory_"
#: The UI's options (``ui``, ``ui_*``): only the API server serves the views.
_UI = "ui"


def applies(name: str, process: str, options: OptionValues) -> bool:
    """Whether option ``name`` changes what a ``process`` does, with these options."""
    if name.startswith(_INVENTORY):
        return process == "inventory"
    if process == "inventory":  # it sends through the backend only with inventory_export = backend
        option = BY_NAME[name]
        sends = name == "backend" or bool(option.backends) or option.emitter
        return options.inventory_export == "backend" and sends and option.name != "flush_timeout"
    if name in _SERVER_OPTIONS or name == _UI or name.startswith(f"{_UI}_"):
        return process == "api-server"
    return True


def what_sent_means(options: OptionValues, target: str) -> str:
    """What a successful send proves, for this backend (``target``: Airflow's, for ``airflow``)."""
    udp = "handed to the kernel as a UDP datagram: not proof that a receiver got it"
    if options.backend in ("statsd", "dogstatsd") or target in ("statsd", "dogstatsd"):
        return f"sent means {udp}"
    if options.backend == "otel" and options.otel_exporter == "prometheus":
        return "sent means counted here: nothing is pushed, a Prometheus scrape of the endpoint reads it"
    if options.backend == "otel" and options.otel_exporter == "otlp":
        return "sent means the OTLP endpoint answered the export"
    return "sent means handed to the backend"


def standing_down() -> str:
    """Whether the plugin stands down because this Airflow counts state store calls itself."""
    import importlib.util

    from ..native import airflow_emits_state_store_metrics

    if importlib.util.find_spec("airflow") is None:
        return "native counting: unknown (Airflow is not installed here)"
    if airflow_emits_state_store_metrics():
        return (
            "native counting: this Airflow counts state store calls itself, so the plugin counts nothing in "
            "tasks and triggerers (Airflow's own series carry the same names)"
        )
    return "native counting: none in this Airflow; the plugin counts"


class _OneIncrement:
    """Totals for the check counter, for pull backends."""

    def totals(self, metric: Any) -> list[tuple[TagTuple, int]]:
        return [((), 1)] if metric.name == CHECK.name else []


#: The scrape job of collector/prometheus.yml (VMs), and of the PodMonitor of kubernetes/api-server.
API_SERVER_JOB = "store-metrics-api-server"


def api_server_job() -> str:
    """The ``job`` label the API server workers' series get: the Operator names a PodMonitor's job
    ``<namespace>/<PodMonitor>``; collector/prometheus.yml names it ``store-metrics-api-server``."""
    namespace = host_processes.kubernetes_namespace()
    if namespace:
        return f"job {namespace}/{API_SERVER_JOB} (the PodMonitor {API_SERVER_JOB} of namespace {namespace})"
    return (
        f"job {API_SERVER_JOB} of collector/prometheus.yml; on Kubernetes the PodMonitor "
        f"{API_SERVER_JOB} makes it <namespace>/{API_SERVER_JOB}"
    )


def _api_port() -> int:
    """``[api] port`` of this Airflow (8080 where Airflow is not importable)."""
    try:
        from airflow.configuration import conf
    except ImportError:
        return 8080
    return conf.getint("api", "port", fallback=8080)


def where_counted(options: OptionValues) -> list[str]:
    """Where the state store calls are counted with these options, and what that needs."""
    if not options.counts_at_api_server:
        return [
            "counting: in each task process (count_at = tasks): install the plugin wherever tasks run; "
            "each task hands its counts to the backend when it ends"
        ]
    lines = [
        "counting: by the API server workers, as each task's Execution API requests arrive "
        "(count_at = api_server): task processes count nothing; install the plugin on the API server "
        "hosts, whose API servers must serve the core app (airflow api-server with --apps all or core: "
        "one started with --apps execution alone counts nothing); nothing is counted under dag.test(), "
        "and a call that fails before reaching the API server is not counted as an error"
    ]
    if options.backend == "otel" and options.otel_exporter == "prometheus":
        last = options.server_prometheus_port + SERVER_PROMETHEUS_PORTS - 1
        lines.append(
            f"scrape: each API server worker serves its counts on the first free port of "
            f"{options.prometheus_host}:{options.server_prometheus_port}-{last} (cumulative); "
            f"let Prometheus scrape every worker ({api_server_job()}) and sum across them"
        )
    lines += [
        f"warning: {server.describe()} serves the Execution API without the core app (it answers "
        "/execution/health and 404 on /api/v2: airflow api-server --apps execution). Airflow adds plugin "
        "middlewares to the core app only, so the state store calls it answers are NOT counted: run it "
        "with --apps all, or send the tasks' Execution API requests ([core] execution_api_server_url) "
        "to an API server that serves the core app"
        for server in host_processes.execution_only_api_servers(_api_port())
    ]
    return lines


def run_check(out: TextIO = sys.stdout, options: OptionValues | None = None, process: str = "task") -> int:
    def say(message: str) -> None:
        print(message, file=out, flush=True)

    try:
        options = options or read_options()
    except TagsLostError as exc:
        say(f"error: {exc}")
        say("tags: LOST on this path: the plugin refuses to count rather than send label-less series")
        return EXIT_TAGS_LOST
    except ConfigError as exc:
        say(f"error: {exc}")
        return EXIT_CONFIG
    _say_options(options, process, say)
    if process == "api-server":
        from ..ui.status import check_lines  # the views do not depend on `enabled`

        for line in check_lines(options):
            say(line)
    for line in compatibility.report():
        say(line)
    if not options.enabled:
        say("store-metrics is disabled: tasks run uninstrumented. Nothing sent.")
        return EXIT_OK
    for line in where_counted(options) + path_lines(options):
        say(line)
    return _send_one(options, say)


def path_lines(options: OptionValues) -> list[str]:
    """What ``backend = auto`` chose and why, and how the tags travel."""
    lines = []
    if options.backend_reason:
        lines.append(f"backend = auto chose {options.backend!r}: {options.backend_reason}")
    if options.backend in _TAGS_ON_THE_WIRE:
        how = _TAGS_ON_THE_WIRE[options.backend]
        lines.append(f"tags: kept: dag_id, task_id, run_type, operator (+ team_name) {how}")
    return lines


def _say_options(options: OptionValues, process: str, say: Callable[[str], None]) -> None:
    """The options that apply to ``process``, where each came from, the stand-down and the cap."""
    say("store-metrics configuration ([store_metrics] in airflow.cfg or AIRFLOW__STORE_METRICS__*):")
    values = options.as_dict()
    width = max(map(len, values))
    shown = {name: value for name, value in values.items() if applies(name, process, options)}
    for name, value in shown.items():
        # What auto chose is shown as such (the reason follows below): the default is auto, not it.
        shown_value = f"auto -> {value}" if name == "backend" and options.backend_reason else value
        say(f"  {name:<{width}} = {shown_value!s:<28} ({options.sources.get(name, 'default')})")
    if len(shown) < len(values):
        say(
            f"  ({len(values) - len(shown)} options that do not apply to the {process} process are not shown)"
        )
    say(standing_down())
    cap = default("max_series")
    say(
        f"series cap: {cap:,} series per process; past it, new tag sets are counted under tag value "
        f"{OVERFLOW_TAG_VALUE!r} (logged once)"
    )


def _send_one(options: OptionValues, say: Callable[[str], None]) -> int:
    """Open the backend here, send one increment, flush it; the exit code."""
    try:
        arguments = options.configure_kwargs()
        _, backend_args = split_arguments(arguments.pop("backend"), arguments)
        backend = create_backend(options.backend, **backend_args)
    except ConfigError as exc:
        say(f"error: {exc}")
        return EXIT_CONFIG
    except MissingExtraError as exc:
        say(f"error: {exc}")
        return EXIT_MISSING_EXTRA
    say(f"backend: {backend.describe()}")
    if backend.sends_nowhere:
        # The same line as the plugin's: counting works, nobody will see it.
        say(
            "warning: this configuration sends the counts nowhere: set [store_metrics] backend, or "
            "enable a backend in Airflow's [metrics] (statsd_on, statsd_datadog_enabled or otel_on)"
        )
        return EXIT_NOWHERE
    source: TotalsSource = _OneIncrement()
    try:
        backend.open(source)
        if not backend.pull:
            backend.export([CounterDelta(CHECK, (), 1)])
        backend.force_flush(options.flush_timeout or 2.0)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE and _serves_prometheus(options):
            return _port_in_use(options, say)
        say(f"error: the backend failed: {type(exc).__name__}: {exc}")
        return EXIT_BACKEND
    except Exception as exc:
        say(f"error: the backend failed: {type(exc).__name__}: {exc}")
        return EXIT_BACKEND
    finally:
        with contextlib.suppress(Exception):
            backend.close(1.0)
    say(f"sent one increment of {CHECK.full_name(backend.prefix)!r}: ok")
    say(what_sent_means(options, _airflow_sender() if options.backend == "airflow" else options.backend))
    return EXIT_OK


def _serves_prometheus(options: OptionValues) -> bool:
    return options.backend == "otel" and options.otel_exporter == "prometheus"


def _port_in_use(options: OptionValues, say: Callable[[str], None]) -> int:
    """``prometheus_port`` is taken: fine when a store-metrics endpoint of this host holds it (the
    triggerer or an inventory serving the counts Prometheus reads), an error naming the holder else."""
    port, host = options.prometheus_port, options.prometheus_host
    holder = host_processes.port_holder(port, host, options.prefix)
    if holder.store_metrics:
        say(
            f"scrape: port {port} (prometheus_port, {host}) is already served by a store-metrics endpoint "
            f"of this host: {holder.who()}. Prometheus reads the counts there; check opens no second one"
        )
        return EXIT_OK
    what = (
        "answers /metrics, but is no Airflow or store-metrics process"
        if holder.exposition
        else ("does not answer /metrics as Prometheus")
    )
    say(
        f"error: prometheus_port {port} ({host}) is held by {holder.who()}, which {what}: stop it, or set "
        "[store_metrics] prometheus_port to a free port (and scrape that one)"
    )
    return EXIT_BACKEND


def _airflow_sender() -> str:
    """The sender Airflow's ``[metrics]`` picks (``statsd``, ``dogstatsd``, ``otel``, ``none``)."""
    from ..config.auto_backend import read_airflow_metrics
    from ..config.reader import default_reader

    return read_airflow_metrics(default_reader()).sender
