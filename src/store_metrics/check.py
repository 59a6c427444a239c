"""``store-metrics check``: read the configuration as the plugin would, and prove the target works.

It prints every option with where its value came from, builds and opens the backend in the
foreground (so a failure is reported here, not logged from a worker thread), sends one
``store_metrics.check`` increment and flushes it. Exit codes: 0 sent, 1 bad configuration
(the same message the plugin logs), 2 missing extra, 3 the backend failed, 4 the configuration
sends nowhere (backend ``none``, or ``airflow`` with no ``[metrics]`` backend enabled).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, TextIO

from .backends import create_backend
from .catalogue import CHECK
from .config import Settings, load_settings
from .contracts import TotalsSource
from .deltas import CounterDelta, TagTuple
from .errors import ConfigError, MissingExtraError
from .options import SERVER_PROMETHEUS_PORTS, split_arguments

EXIT_OK = 0
EXIT_CONFIG = 1
EXIT_MISSING_EXTRA = 2
EXIT_BACKEND = 3
#: The configuration is valid but sends nowhere (backend ``none``, or ``airflow`` with no
#: ``[metrics]`` backend enabled): counting works, nobody will see it.
EXIT_NOWHERE = 4


class _OneIncrement:
    """Totals for the check counter, for pull backends."""

    def totals(self, metric: Any) -> list[tuple[TagTuple, int]]:
        return [((), 1)] if metric.name == CHECK.name else []


def where_counted(settings: Settings) -> list[str]:
    """Where the state store calls are counted with these settings, and what that needs."""
    if not settings.counts_at_api_server:
        return [
            "counting: in each task process (count_at = tasks): install the plugin wherever tasks run; "
            "each task hands its counts to the backend when it ends"
        ]
    lines = [
        "counting: by the API server workers, as each task's Execution API requests arrive "
        "(count_at = api_server): task processes count nothing; install the plugin on the API server "
        "hosts; nothing is counted under dag.test(), and a call that fails before reaching the API "
        "server is not counted as an error"
    ]
    if settings.backend == "otel" and settings.otel_exporter == "prometheus":
        last = settings.server_prometheus_port + SERVER_PROMETHEUS_PORTS - 1
        lines.append(
            f"scrape: each API server worker serves its counts on the first free port of "
            f"{settings.prometheus_host}:{settings.server_prometheus_port}-{last} (cumulative); "
            "let Prometheus scrape every worker (job store-metrics-api-server) and sum across them"
        )
    return lines


def run_check(out: TextIO = sys.stdout, settings: Settings | None = None) -> int:
    def say(message: str) -> None:
        print(message, file=out, flush=True)

    try:
        settings = settings or load_settings()
    except ConfigError as exc:
        say(f"error: {exc}")
        return EXIT_CONFIG
    say("store-metrics configuration ([store_metrics] in airflow.cfg or AIRFLOW__STORE_METRICS__*):")
    values = settings.as_dict()
    width = max(map(len, values))
    for name, value in values.items():
        say(f"  {name:<{width}} = {value!s:<28} ({settings.sources.get(name, 'default')})")
    from .ui.check import check_lines  # the views do not depend on `enabled`

    for line in check_lines(settings):
        say(line)
    if not settings.enabled:
        say("store-metrics is disabled: tasks run uninstrumented. Nothing sent.")
        return EXIT_OK
    for line in where_counted(settings):
        say(line)
    try:
        arguments = settings.configure_kwargs()
        _, backend_args = split_arguments(arguments.pop("backend"), arguments)
        backend = create_backend(settings.backend, **backend_args)
    except ConfigError as exc:
        say(f"error: {exc}")
        return EXIT_CONFIG
    except MissingExtraError as exc:
        say(f"error: {exc}")
        return EXIT_MISSING_EXTRA
    say(f"backend: {backend.describe()}")
    if settings.backend == "none" or getattr(backend, "sends_nowhere", False):
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
        backend.force_flush(settings.flush_timeout or 2.0)
    except Exception as exc:
        say(f"error: the backend failed: {type(exc).__name__}: {exc}")
        return EXIT_BACKEND
    finally:
        with contextlib.suppress(Exception):
            backend.close(1.0)
    say(f"sent one increment of {CHECK.full_name(getattr(backend, 'prefix', '') or '')!r}: ok")
    return EXIT_OK
