"""This API server worker's metrics, decided once per process from ``[store_metrics]``: none,
``ServerMetrics``, or (``count_at = api_server`` with traces on) the traced
``TracedServerMetrics``. It sits above both: ``metrics`` knows nothing of
tracing, and ``tracing`` is imported only when a worker traces.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from .. import logs
from .metrics import ServerMetrics, worker_identity
from .store_calls import StoreCalls

if TYPE_CHECKING:
    from .tracing import RouteTracing


_lock = threading.Lock()
_active: ServerMetrics | None = None
_decided_pid = 0


def server_metrics() -> ServerMetrics | None:
    """This worker's ``ServerMetrics``, made from ``[store_metrics]`` on first use.

    ``None`` (once decided, for the life of the process) when store-metrics or its server side
    is switched off, or the configuration is bad: the middleware then only passes requests on.
    """
    global _active, _decided_pid
    pid = os.getpid()
    if _decided_pid == pid:
        return _active
    with _lock:
        if _decided_pid != pid:
            _active = _build()
            _decided_pid = pid
    return _active


def _build() -> ServerMetrics | None:
    from ..config.reader import read_options
    from ..counting.runtime import create_emitter
    from ..errors import ConfigError, MissingExtraError

    try:
        options = read_options()
        count_calls = options.enabled and options.counts_at_api_server and not _airflow_counts_itself()
        if not (options.enabled and (options.server_metrics or count_calls)):
            logs.once("server:off", logging.INFO, "store-metrics: API server metrics are off")
            return None
        worker = worker_identity(options.worker_label_style)
        emitter = create_emitter(**options.server_configure_kwargs(worker))
    except (ConfigError, MissingExtraError) as exc:
        logs.once("server:config", logging.ERROR, "store-metrics API server metrics are off: %s", exc)
        return None
    except Exception:
        logs.once("server:config", logging.ERROR, "store-metrics API server metrics are off", exc_info=True)
        return None
    if options.server_metrics:
        logs.once(
            "server:on",
            logging.INFO,
            "store-metrics: API server worker %s counts state store requests and watches its event loop "
            "(tick %g ms, long stall %g ms), sending to %s",
            worker,
            options.stall_tick_ms,
            options.stall_threshold_ms,
            emitter.backend.describe(),
        )
    if count_calls:
        logs.once(
            "server:count_at",
            logging.INFO,
            "store-metrics: count_at = api_server: API server worker %s counts every task's state store "
            "calls as their Execution API requests arrive (task processes count nothing), sending to %s",
            worker,
            emitter.backend.describe(),
        )
    kwargs: dict[str, Any] = {
        "tick_ms": options.stall_tick_ms,
        "threshold_ms": options.stall_threshold_ms,
        "log_interval": options.flush_interval,
        "route_metrics": options.server_metrics,
    }
    # Traces (count_at = api_server only): decided here, once per worker; without them the tracing
    # module is never imported and the requests run the untraced classes' methods.
    tracing = _route_tracing(options.traces) if count_calls else None
    if tracing is not None:
        from .tracing import TracedServerMetrics, TracedStoreCalls

        return TracedServerMetrics(
            emitter, worker, calls=TracedStoreCalls(emitter), tracing=tracing, **kwargs
        )
    return ServerMetrics(emitter, worker, calls=StoreCalls(emitter) if count_calls else None, **kwargs)


def _route_tracing(traces: str) -> RouteTracing | None:
    """The worker's ``RouteTracing`` (``[store_metrics] traces``), or ``None``: a
    failure to set it up costs a log line, and the requests are counted untraced."""
    from ..config.options import TRACES_OFF

    if traces == TRACES_OFF:
        return None
    try:
        from .tracing import route_tracing

        tracing = route_tracing(traces)
    except Exception:
        logs.once("server:traces", logging.ERROR, "store-metrics could not set up traces", exc_info=True)
        return None
    if tracing is not None:
        logs.once(
            "server:traces",
            logging.INFO,
            "store-metrics: each state store request this API server worker serves is a span in its "
            "task's trace",
        )
    return tracing


def _airflow_counts_itself() -> bool:
    """Whether this Airflow counts state store calls itself: then neither side of the plugin does."""
    from ..native import airflow_emits_state_store_metrics

    if airflow_emits_state_store_metrics():
        logs.once(
            "server:native",
            logging.INFO,
            "store-metrics: this Airflow counts state store calls itself; the API server does not count them",
        )
        return True
    return False
