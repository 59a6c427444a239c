"""Backend adapters, one module each, and the loader that turns a backend name into one.

A backend's library is imported only inside its own module, and that module is imported only
here, at configuration time: a missing extra surfaces as ``MissingExtraError``
when the emitter is configured, never as an ``ImportError`` inside a task.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from ..config.options import BACKEND_CHOICES, BACKENDS, backend_options
from ..contracts import Backend
from ..errors import ConfigError, MissingExtraError

__all__ = ["BACKENDS", "create_backend"]


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

    ``options`` are the backend's own keywords (``store_metrics.config.options.split_arguments``
    picks them); one the option table does not give this backend is a ``ConfigError``.
    Building does no I/O; sockets and providers are made later by ``open()`` on the
    emitter's worker thread.
    """
    if name not in BACKENDS:
        raise ConfigError("backend", name, BACKEND_CHOICES)
    accepted = backend_options(name)
    checked: dict[str, Any] = {}
    for keyword, value in options.items():
        option = accepted.get(keyword)
        if option is None:
            raise ConfigError(
                keyword, value, f"(not an option of backend {name!r}) {', '.join(sorted(accepted))}"
            )
        # Checked under the option's own name, so the error reads like the airflow.cfg one.
        checked[keyword] = option.check(option.name, value)
    module_name, extra = BACKENDS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MissingExtraError(name, extra, _missing_package(exc)) from exc
    backend: Backend = module.create(**checked)
    return backend
