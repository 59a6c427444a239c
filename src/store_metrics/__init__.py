"""store-metrics: counters for every call to Apache Airflow's state store.

Installed with pip, it is an Airflow plugin: every task's ``context["task_state_store"]`` and
``context["asset_state_store"]`` are wrapped so each call becomes a counter such as
``airflow.task_state_store.read_found`` tagged ``dag_id``, ``task_id``, ``run_type``,
``operator`` (and ``team_name``). Importing this package does nothing else: no thread, socket
or provider exists until ``configure`` is called (the plugin calls it at a task's start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

#: The public API, by name -> the module that holds it. Imported on first use (PEP 562), so that
#: importing the plugin (store_metrics.integration.plugin, in every Airflow process) loads none of it.
_API = {
    "instrument_asset_store": "counting.accessors",
    "instrument_task_store": "counting.accessors",
    "unwrap": "counting.accessors",
    "METRICS": "catalogue",
    "Metric": "catalogue",
    "Counter": "contracts",
    "Emitter": "contracts",
    "ConfigError": "errors",
    "MissingExtraError": "errors",
    "configure": "counting.runtime",
    "get_emitter": "counting.runtime",
    "set_emitter": "counting.runtime",
    "shutdown": "counting.runtime",
}

__all__ = [
    "METRICS",
    "ConfigError",
    "Counter",
    "Emitter",
    "Metric",
    "MissingExtraError",
    "__version__",
    "configure",
    "get_emitter",
    "instrument_asset_store",
    "instrument_task_store",
    "set_emitter",
    "shutdown",
    "unwrap",
]

if TYPE_CHECKING:
    from .catalogue import METRICS, Metric
    from .contracts import Counter, Emitter
    from .counting.accessors import instrument_asset_store, instrument_task_store, unwrap
    from .counting.runtime import configure, get_emitter, set_emitter, shutdown
    from .errors import ConfigError, MissingExtraError


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'store_metrics' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
