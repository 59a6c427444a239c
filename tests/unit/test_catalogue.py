"""The metric catalogue: the exact names, tags and Prometheus series of every counter."""

from __future__ import annotations

import pytest

from store_metrics import catalogue
from store_metrics.catalogue import Operation, Outcome, Store

STATE_STORE_NAMES = [
    "task_state_store.read_found",
    "task_state_store.read_absent",
    "task_state_store.write",
    "task_state_store.delete",
    "task_state_store.clear",
    "task_state_store.error",
    "asset_state_store.read_found",
    "asset_state_store.read_absent",
    "asset_state_store.write",
    "asset_state_store.delete",
    "asset_state_store.clear",
    "asset_state_store.error",
]


def test_the_state_store_counters_are_exactly_these() -> None:
    assert [m.name for m in catalogue.STATE_STORE_METRICS] == STATE_STORE_NAMES
    assert all(m.kind is catalogue.Kind.COUNTER for m in catalogue.STATE_STORE_METRICS)
    assert [m.name for m in catalogue.METRICS] == [*STATE_STORE_NAMES, *RETRY_NAMES, "store_metrics.check"]


RETRY_NAMES = ["task_state_store.retry_resumed", "task_state_store.retry_not_resumed"]


def test_the_retry_counters_count_attempts_with_the_call_counters_tags() -> None:
    assert [m.name for m in catalogue.RETRY_METRICS] == RETRY_NAMES
    for metric in catalogue.RETRY_METRICS:
        assert metric.kind is catalogue.Kind.COUNTER and metric.unit == "{attempt}"
        assert metric.tags == ("dag_id", "task_id", "run_type", "operator")
        assert metric.optional_tags == ("team_name",)
        assert "try_number >= 2" in metric.description and "first" in metric.description
    assert catalogue.retry_metric(True).prometheus_name() == "airflow_task_state_store_retry_resumed_total"
    assert (
        catalogue.retry_metric(False).prometheus_name() == "airflow_task_state_store_retry_not_resumed_total"
    )
    # Not call counters: the per-call series (and what sums them) stay exactly as they were.
    assert not set(catalogue.RETRY_METRICS) & set(catalogue.STATE_STORE_METRICS)


def test_tags_never_include_the_key() -> None:
    for metric in catalogue.STATE_STORE_METRICS:
        expected = ("dag_id", "task_id", "run_type", "operator")
        if metric.name.endswith(".error"):
            expected = (*expected, "operation")
        assert metric.tags == expected
        assert metric.optional_tags == ("team_name",)
        assert "key" not in metric.all_tags
    assert catalogue.get("task_state_store.error").all_tags == (
        "dag_id",
        "task_id",
        "run_type",
        "operator",
        "team_name",
        "operation",
    )


def test_names_under_the_default_and_a_custom_prefix() -> None:
    metric = catalogue.get("task_state_store.read_found")
    assert metric.full_name() == "airflow.task_state_store.read_found"
    assert metric.full_name("platform.airflow") == "platform.airflow.task_state_store.read_found"
    assert metric.full_name("") == "task_state_store.read_found"
    # Exactly the series the upstream proposal shows in Prometheus.
    assert metric.prometheus_name() == "airflow_task_state_store_read_found_total"
    assert (
        catalogue.get("asset_state_store.clear").prometheus_name() == "airflow_asset_state_store_clear_total"
    )


@pytest.mark.parametrize("scope", list(Store))
@pytest.mark.parametrize("outcome", list(Outcome))
def test_metric_for_every_scope_and_outcome(scope: Store, outcome: Outcome) -> None:
    metric = catalogue.metric_for(scope, outcome)
    assert metric.name == f"{scope.value}.{outcome.value}"
    assert metric.description


def test_operations_are_the_four_methods() -> None:
    assert [op.value for op in Operation] == ["get", "set", "delete", "clear"]


def test_task_tags_has_team_name_only_when_set() -> None:
    assert catalogue.task_tags(dag_id="d", task_id="t", run_type="manual", operator="X") == {
        "dag_id": "d",
        "task_id": "t",
        "run_type": "manual",
        "operator": "X",
    }
    assert catalogue.task_tags(dag_id="d", task_id="t", run_type="manual", operator="X", team_name="") == {
        "dag_id": "d",
        "task_id": "t",
        "run_type": "manual",
        "operator": "X",
    }
    assert catalogue.task_tags(dag_id="d", task_id="t", run_type="scheduled", operator="X", team_name="ml")[
        "team_name"
    ] == ("ml")


def test_unknown_metric_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        catalogue.get("task_state_store.read")
