"""The plugin's own decisions, without running a task: tags, and noticing a native Airflow.

The task instance here is a stand-in with the attributes the plugin reads (``stats_tags``,
``dag_id``, ``task_id``, ``task``); the real RuntimeTaskInstance is exercised end to end in
test_airflow_scenarios.py and test_airflow_standalone.py. Multi-team deployments cannot be set
up under dag.test() here, which is why team_name is checked at this level.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from store_metrics import plugin


class KubernetesPodOperator:
    """Only its name matters: the operator tag is the task's class name."""


class DagRunType:
    value = "scheduled"


def ti(**stats_tags: str) -> Any:
    return SimpleNamespace(
        stats_tags=stats_tags, dag_id="fallback_dag", task_id="fallback_task", task=KubernetesPodOperator()
    )


def test_tags_come_from_the_task_instance_and_the_dag_run() -> None:
    context = {"dag_run": SimpleNamespace(run_type=DagRunType())}
    tags = plugin.tags_for(ti(dag_id="etl", task_id="load"), context)
    assert tags == {
        "dag_id": "etl",
        "task_id": "load",
        "run_type": "scheduled",
        "operator": "KubernetesPodOperator",
    }


def test_team_name_is_a_tag_only_when_the_run_has_one() -> None:
    context = {"dag_run": SimpleNamespace(run_type="manual")}
    tags = plugin.tags_for(ti(dag_id="etl", task_id="load", team_name="payments"), context)
    assert tags["team_name"] == "payments"
    assert list(tags) == ["dag_id", "task_id", "run_type", "operator", "team_name"]
    assert "team_name" not in plugin.tags_for(ti(dag_id="etl", task_id="load", team_name=""), context)


def test_a_missing_dag_run_is_run_type_unknown() -> None:
    assert plugin.tags_for(ti(), {})["run_type"] == "unknown"
    assert plugin.tags_for(ti(), {})["dag_id"] == "fallback_dag"


def test_airflow_3_3_2_does_not_count_the_state_store_itself() -> None:
    plugin.airflow_emits_state_store_metrics.cache_clear()
    assert plugin.airflow_emits_state_store_metrics() is False


def test_an_airflow_whose_accessor_takes_stats_tags_counts_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """The upstream proposal passes ``stats_tags`` into the accessor: that Airflow counts on its own."""
    from airflow.sdk.execution_time import context

    class TaskStateStoreAccessor:
        def __init__(self, ti_id: Any, scope: Any, stats_tags: dict[str, str] | None = None) -> None:
            pass

    monkeypatch.setattr(context, "TaskStateStoreAccessor", TaskStateStoreAccessor)
    plugin.airflow_emits_state_store_metrics.cache_clear()
    try:
        assert plugin.airflow_emits_state_store_metrics() is True
    finally:
        plugin.airflow_emits_state_store_metrics.cache_clear()


def test_the_plugin_registers_the_listener_and_the_server_middleware() -> None:
    assert plugin.StoreMetricsPlugin.name == "store_metrics"
    assert plugin.listener in plugin.StoreMetricsPlugin.listeners
    middlewares = plugin.StoreMetricsPlugin.fastapi_root_middlewares
    assert [m["middleware"].__name__ for m in middlewares] == ["StateStoreRouteMetrics"]
