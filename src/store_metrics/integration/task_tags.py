"""A task instance's tags, read the one way for a task process and for a deferred task's trigger.

``dag_id``, ``task_id`` and ``team_name`` come from the task instance's ``stats_tags`` (what Airflow
tags its own task metrics with; ``team_name`` only on a multi-team deployment), falling back to its
attributes; ``run_type`` from the run; ``operator`` as the caller knows it. What is not known is
``<unknown>``, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..catalogue import UNKNOWN, task_tags


def run_type_of(context: Any) -> str:
    """The ``run_type`` of the context's DAG run (an enum or a string), ``<unknown>`` without one."""
    dag_run = context.get("dag_run") if isinstance(context, Mapping) else None
    run_type = getattr(dag_run, "run_type", None)
    return UNKNOWN if run_type is None else str(getattr(run_type, "value", run_type))


def task_instance_tags(task_instance: Any, context: Any, operator: str) -> dict[str, str]:
    """The tag set of one task instance's calls: dag_id, task_id, run_type, operator, team_name if set."""
    stats_tags = dict(getattr(task_instance, "stats_tags", None) or {})
    return task_tags(
        dag_id=str(stats_tags.get("dag_id") or getattr(task_instance, "dag_id", None) or UNKNOWN),
        task_id=str(stats_tags.get("task_id") or getattr(task_instance, "task_id", None) or UNKNOWN),
        run_type=run_type_of(context),
        operator=operator or UNKNOWN,
        team_name=stats_tags.get("team_name") or None,
    )
