"""A test-only plugin that makes this Airflow look like one whose trigger runner changed.

It replaces ``TriggerRunner.run_trigger(self, trigger_id, trigger, timeout_after, context)`` with a
method of another shape that does exactly the same (it calls Airflow's own). store-metrics then finds
no hook point it knows: it must log one line and leave triggers alone. Plugins from the plugins
folder are loaded, and their ``on_load`` called, before entry-point plugins and before any
``on_starting`` listener runs.
"""

from __future__ import annotations

import sys
from typing import Any

from airflow.plugins_manager import AirflowPlugin


class ChangedTriggererPlugin(AirflowPlugin):
    name = "store_metrics_test_changed_triggerer"

    @classmethod
    def on_load(cls, *args: Any, **kwargs: Any) -> None:
        module = sys.modules.get("airflow.jobs.triggerer_job_runner")
        if module is None or getattr(module.TriggerRunner.run_trigger, "_changed", False):
            return
        original = module.TriggerRunner.run_trigger

        async def run_trigger(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await original(self, *args, **kwargs)

        run_trigger._changed = True  # type: ignore[attr-defined]
        module.TriggerRunner.run_trigger = run_trigger
