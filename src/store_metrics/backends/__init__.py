"""Backend adapters, one module each, and the loader that turns a backend name into one.

A backend's library is imported only inside its own module, and that module is imported only
here, at configuration time: a missing extra surfaces as :class:`~store_metrics.errors.MissingExtraError`
when the emitter is configured, never as an ``ImportError`` inside a task.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Final

from ..emitter import Backend
from ..errors import ConfigError, MissingExtraError

#: backend name -> (module, extra that brings its library)
BACKENDS: Final[dict[str, tuple[str, str]]] = {
    "airflow": ("store_metrics.backends.airflow_stats", "airflow"),
    "otel": ("store_metrics.backends.otel", "otel"),
    "dogstatsd": ("store_metrics.backends.dogstatsd", "dogstatsd"),
    "statsd": ("store_metrics.backends.statsd", "statsd"),
    "none": ("store_metrics.backends.none", ""),
}


def _missing_package(exc: ImportError) -> str:
    """The package to name in the error: the top-level one when that is what is missing."""
    missing = exc.name or str(exc)
    top = missing.split(".")[0]
    if top != missing:
        try:
            installed = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            installed = False
        if not installed:
            return top
    return missing


def create_backend(name: str, **options: Any) -> Backend:
    """Import the adapter for ``name`` and build it with ``options``.

    Building does no I/O; sockets and providers are made later by ``open()`` on the
    emitter's worker thread.
    """
    if name not in BACKENDS:
        raise ConfigError("backend", name, BACKENDS)
    module_name, extra = BACKENDS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MissingExtraError(name, extra, _missing_package(exc)) from exc
    backend: Backend = module.create(**options)
    return backend
