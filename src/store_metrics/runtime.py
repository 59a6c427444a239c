"""The process-wide emitter: configure it once, and every wrapper made afterwards uses it.

Until :func:`configure` is called the active emitter is a :class:`~store_metrics.emitter.NullEmitter`:
no thread, socket or provider exists, and wrapped accessors count nothing.
"""

from __future__ import annotations

import threading
from typing import Any

from . import validate
from .aggregator import (
    DEFAULT_EXIT_TIMEOUT,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_FLUSH_TIMEOUT,
    DEFAULT_MAX_SERIES,
    AggregatingEmitter,
)
from .backends import create_backend
from .emitter import Emitter, NullEmitter

_lock = threading.Lock()
_active: Emitter = NullEmitter()


def configure(backend: str = "airflow", **options: Any) -> AggregatingEmitter:
    """Build the emitter for ``backend`` and make it the active one.

    Takes the arguments of :func:`create_emitter`: the emitter's ``flush_interval``,
    ``flush_timeout``, ``exit_timeout`` and ``max_series``, and the backend's options (``host``,
    ``port``, ``prefix``, ``exporter``, ``meter_provider``, ...; options a backend does not use
    are ignored, so one set of settings serves every backend). Raises
    :class:`~store_metrics.errors.ConfigError` or :class:`~store_metrics.errors.MissingExtraError`
    here, never later. A previously configured emitter is flushed and closed.
    """
    emitter = create_emitter(backend, **options)
    previous = set_emitter(emitter)
    if isinstance(previous, AggregatingEmitter):
        previous.close(emitter.flush_timeout)
    return emitter


def create_emitter(
    backend: str = "airflow",
    *,
    flush_interval: float = DEFAULT_FLUSH_INTERVAL,
    flush_timeout: float = DEFAULT_FLUSH_TIMEOUT,
    exit_timeout: float = DEFAULT_EXIT_TIMEOUT,
    max_series: int = DEFAULT_MAX_SERIES,
    **backend_options: Any,
) -> AggregatingEmitter:
    """Build an emitter for ``backend`` without making it the active one (the API server's own).

    ``backend_options`` go to the backend; see :func:`configure`. Raises the same errors.
    """
    flush_interval = validate.positive_seconds("flush_interval", flush_interval)
    flush_timeout = validate.positive_seconds("flush_timeout", flush_timeout, allow_zero=True)
    exit_timeout = validate.positive_seconds("exit_timeout", exit_timeout, allow_zero=True)
    max_series = validate.positive_int("max_series", max_series)
    built = create_backend(backend, export_interval=flush_interval, max_series=max_series, **backend_options)
    return AggregatingEmitter(
        built,
        flush_interval=flush_interval,
        flush_timeout=flush_timeout,
        exit_timeout=exit_timeout,
        max_series=max_series,
    )


def get_emitter() -> Emitter:
    """The active emitter (a no-op one until :func:`configure` is called)."""
    return _active


def set_emitter(emitter: Emitter) -> Emitter:
    """Make ``emitter`` the active one and return the previous one (used by :mod:`store_metrics.testing`)."""
    global _active
    with _lock:
        previous, _active = _active, emitter
    return previous


def is_configured() -> bool:
    return not isinstance(_active, NullEmitter)


def shutdown(timeout: float | None = None) -> bool:
    """Flush and close the active emitter, and go back to counting nothing."""
    previous = set_emitter(NullEmitter())
    if isinstance(previous, AggregatingEmitter):
        return previous.close(timeout)
    return True
