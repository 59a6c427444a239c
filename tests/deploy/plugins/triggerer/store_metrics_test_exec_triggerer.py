"""A test-only plugin that makes this Linux triggerer start its trigger runner as macOS does.

Airflow 3.4 starts the trigger runner with ``use_exec=supervisor._should_use_exec()``: true on
macOS (a fresh interpreter through ``os.posix_spawn``), false on Linux (a fork). In the triggerer's
process only, this plugin makes it answer true, so the runner really starts as a fresh interpreter
that loads no plugin. Plugins from the plugins folder are loaded, and their ``on_load`` called,
before any ``on_starting`` listener runs.
"""

from __future__ import annotations

import sys
from typing import Any

from airflow.plugins_manager import AirflowPlugin


class ExecTriggererPlugin(AirflowPlugin):
    name = "store_metrics_test_exec_triggerer"

    @classmethod
    def on_load(cls, *args: Any, **kwargs: Any) -> None:
        if "airflow.jobs.triggerer_job_runner" not in sys.modules:
            return
        from airflow.sdk.execution_time import supervisor

        supervisor._should_use_exec = lambda: True
