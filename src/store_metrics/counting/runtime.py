"""The process-wide emitter: configure it once, and every wrapper made afterwards uses it.

Until ``configure`` is called the active emitter is a ``NullEmitter``:
no thread, socket or provider exists, and wrapped accessors count nothing.
"""

from __future__ import annotations

import threading
from typing import Any

from ..backends import create_backend
from ..config.options import AUTO, EMITTER_OPTIONS, default, split_arguments
from ..contracts import Emitter, NullEmitter
from ..emitter import AggregatingEmitter

_lock = threading.Lock()
_active: Emitter = NullEmitter()


def configure(backend: str = default("backend"), **arguments: Any) -> AggregatingEmitter:
    """Build the emitter for ``backend`` and make it the active one.

    Takes the arguments of ``create_emitter``. Raises
    ``ConfigError`` or ``MissingExtraError``
    here, never later. A previously configured emitter is flushed and closed.
    """
    emitter = create_emitter(backend, **arguments)
    previous = set_emitter(emitter)
    if isinstance(previous, AggregatingEmitter):
        previous.close(emitter.flush_timeout)
    return emitter


def create_emitter(backend: str = default("backend"), **arguments: Any) -> AggregatingEmitter:
    """Build an emitter for ``backend`` without making it the active one (the API server's own).

    ``backend="auto"`` (the default) does what the plugin does with no ``[store_metrics]`` backend:
    it reads the configuration (``store_metrics.config.reader.read_options``) for the backend that
    keeps the tags on Airflow's ``[metrics]`` path, and for every argument not given here.
    ``arguments`` are the emitter's (``flush_interval``, ``flush_timeout``, ``exit_timeout``,
    ``max_series``) and the backends' (``host``, ``port``, ``prefix``, ``exporter``,
    ``meter_provider``, ...): every name in ``store_metrics.config.options.OPTIONS``. One that is not
    there (``prot=9125``) is a ``ConfigError`` naming it; ones the
    chosen backend does not take are ignored, so one set of settings serves every backend.
    """
    if backend == AUTO:
        from ..config.reader import read_options

        arguments = {**read_options().configure_kwargs(), **arguments}
        backend = arguments.pop("backend")
    emitter_args, backend_args = split_arguments(backend, arguments)
    checked = {
        option.name: option.check(option.name, emitter_args.get(option.name, option.default))
        for option in EMITTER_OPTIONS
    }
    for option in EMITTER_OPTIONS:
        # Emitter options a backend takes too (OTel's export interval and cardinality limit)
        # follow the emitter's value, given or default.
        if backend in option.backends:
            backend_args[option.backends[backend]] = checked[option.name]
    return AggregatingEmitter(create_backend(backend, **backend_args), **checked)


def get_emitter() -> Emitter:
    """The active emitter (a no-op one until ``configure`` is called)."""
    return _active


def set_emitter(emitter: Emitter) -> Emitter:
    """Make ``emitter`` the active one and return the previous one (used by ``store_metrics.testing``)."""
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
