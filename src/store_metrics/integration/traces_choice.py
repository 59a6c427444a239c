"""Whether this process's state store calls are spans: decided once per process, for the task
listener (a task's stores) and the triggerer (its triggers' stores) alike.

Its own module so that both can ask without importing each other.
"""

from __future__ import annotations

import logging

from .. import logs

__all__ = ["traces_wanted"]

#: ([store_metrics] traces resolved, traces_keys); None: not decided yet in this process.
_decided: tuple[bool, bool] | None = None


def traces_wanted() -> tuple[bool, bool]:
    """Whether this process's state store calls are spans, and with their keys; decided once.

    ``[store_metrics] traces``: ``off`` never; ``auto`` where Airflow's ``[traces] otel_on`` is on;
    ``on`` also without it. Either way only where a tracer provider is set (Airflow sets its own when
    ``otel_on`` is): without one a span would go nowhere, so ``on`` says so once and makes none.
    """
    global _decided
    if _decided is None:
        _decided = (False, False)
        try:
            _decided = _decide_traces()
        except Exception:  # the calls are still counted, only not traced
            logs.once("traces", logging.ERROR, "store-metrics could not set up traces", exc_info=True)
    return _decided


def _decide_traces() -> tuple[bool, bool]:
    from ..config.options import TRACES_AUTO, TRACES_OFF
    from ..config.reader import read_options

    options = read_options()  # read (and checked) by ensure_emitter before this
    if options.traces == TRACES_OFF:
        return (False, False)
    if options.traces == TRACES_AUTO:
        from airflow.sdk.configuration import conf

        if not conf.getboolean("traces", "otel_on", fallback=False):
            return (False, False)
    from ..counting import tracing

    if not tracing.has_provider():
        logs.once(
            "traces",
            logging.WARNING,
            "store-metrics: [store_metrics] traces = on, but no OpenTelemetry tracer provider is set "
            "in this process ([traces] otel_on is off): state store calls are not traced",
        )
        return (False, False)
    return (True, options.traces_keys)
