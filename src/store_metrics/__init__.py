"""store-metrics: counters for every call to Apache Airflow's state store.

Installed with pip, it is an Airflow plugin: every task's ``context["task_state_store"]`` and
``context["asset_state_store"]`` are wrapped so each call becomes a counter such as
``airflow.task_state_store.read_found`` tagged ``dag_id``, ``task_id``, ``run_type``,
``operator`` (and ``team_name``). Importing this package does nothing else: no thread, socket
or provider exists until :func:`configure` is called (the plugin calls it at a task's start).
"""

from __future__ import annotations

__version__ = "0.2.0"

from .accessors import instrument_asset_store, instrument_task_store, unwrap
from .catalogue import METRICS, Metric
from .contracts import Counter, Emitter
from .errors import ConfigError, MissingExtraError
from .runtime import configure, get_emitter, set_emitter, shutdown

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
