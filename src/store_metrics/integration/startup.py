"""Setting a process up to count, once: what a task process and the trigger runner both do first.

``ensure_emitter`` configures the process-wide emitter from ``[store_metrics]`` the first time
it is called in a process, and says once, in the log, where the counts go or why nothing is
counted. The task listener (``task_listener``) calls it when a task starts; the triggerer's
hook (``triggerer``) calls it in the trigger runner, before its event loop exists. Every later
call returns the first answer.

Importing it loads nothing but ``store_metrics.logs``; the configuration, the emitter and a
backend are imported when it first runs.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import logs


class _Setup:
    """What ``ensure_emitter`` decided in this process."""

    ready: bool | None = None  # None: not decided yet in this process


_setup = _Setup()


def ensure_emitter() -> bool:
    """Configure the emitter on first use in this process; False when nothing is counted here."""
    if _setup.ready is not None:
        return _setup.ready
    _setup.ready = False
    from ..config.reader import read_options
    from ..counting import runtime
    from ..errors import ConfigError, MissingExtraError
    from ..native import airflow_emits_state_store_metrics

    if airflow_emits_state_store_metrics():
        logs.once(
            "native",
            logging.INFO,
            "store-metrics: this Airflow counts state store calls itself; the plugin stays out of the way",
        )
        return False
    try:
        options = read_options()
    except ConfigError as exc:
        logs.once("config", logging.ERROR, "store-metrics is off for this process: %s", exc)
        return False
    if not options.enabled:
        logs.once("disabled", logging.INFO, "store-metrics is disabled ([store_metrics] enabled = false)")
        return False
    if not runtime.is_configured():  # a test may have installed its own (store_metrics.testing)
        try:
            emitter = runtime.configure(**options.configure_kwargs())
        except (ConfigError, MissingExtraError) as exc:
            logs.once("config", logging.ERROR, "store-metrics is off for this process: %s", exc)
            return False
        _say_where(options, emitter)
    _setup.ready = True
    return True


def _say_where(options: Any, emitter: Any) -> None:
    """Once per process: where the counts go, or a warning that they go nowhere."""
    # backend = none, written out, is a choice: said at INFO below, not warned about.
    if options.sends_nowhere or (emitter.backend.sends_nowhere and options.backend != "none"):
        logs.once(
            "nowhere",
            logging.WARNING,
            "store-metrics: Airflow's [metrics] enables no backend, so the counts go nowhere. Set "
            "[metrics] statsd_on, statsd_datadog_enabled or otel_on, or [store_metrics] backend.",
        )
    else:
        logs.once(
            "target",
            logging.INFO,
            "store-metrics: counting state store calls, sending to %s%s",
            emitter.backend.describe(),
            f" (backend = auto: {options.backend_reason})" if options.backend_reason else "",
        )
