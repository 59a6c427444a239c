"""Whether the installed Airflow counts state store calls itself, so that store-metrics stands down.

If the upstream proposal merges, Airflow emits the same series under the same names: the plugin
then counts nothing in tasks, triggers or the API server, rather than count every call twice.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path

from .catalogue import Outcome, Store, metric_for

#: The metric whose presence in Airflow's own registry says Airflow counts natively.
_NATIVE_METRIC = metric_for(Store.TASK, Outcome.READ_FOUND).name


@functools.cache
def airflow_emits_state_store_metrics() -> bool:
    """Whether the installed Airflow counts state store calls itself (the upstream proposal merged).

    Two signs, either is enough: the accessor takes the ``stats_tags`` the proposal passes in,
    or Airflow's metrics registry lists ``task_state_store.read_found``.
    """
    try:
        from airflow.sdk.execution_time import context as sdk_context

        accessor = getattr(sdk_context, "TaskStateStoreAccessor", None)
        if accessor is not None and "stats_tags" in inspect.signature(accessor).parameters:
            return True
        from airflow.sdk._shared.observability import metrics as shared_metrics

        registry = Path(shared_metrics.__file__).with_name("metrics_template.yaml")
        return registry.is_file() and _NATIVE_METRIC in registry.read_text(encoding="utf-8")
    except Exception:
        return False
