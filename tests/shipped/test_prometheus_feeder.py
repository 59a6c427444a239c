"""End to end, source 2: a feeder process scraped by a real Prometheus, in controlled passes.

The feeder (``support.feeder``) drives the instrumented wrappers over in-memory stores, one pass
of calls at a time, so the test knows which samples Prometheus holds: per-second rates, ratios over
a window, and recording rules (which need a series to exist before it grows) are checked against the
calls of exactly one pass. The model and checks: ``support.e2e``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.e2e import (
    ERRORS_DAG,
    ERRORS_TEAM,
    JOB,
    PY_OPERATOR,
    Model,
    Prometheus,
    alerting_rules,
    as_groups,
    assert_groups,
    dashboard_targets,
    expected,
    feeder_pass_model,
    filters_of,
    interpolate,
    mean,
    never_read_tasks,
    recorded,
    wait_for,
)
from support.feeder import Feeder
from testbed.ports import free_port


@dataclass
class FeederSource:
    prom: Prometheus
    pass_model: Model
    window_start: float  # the evaluation that recorded pass A's calls (or a later one)
    at: float  # just after the evaluation that recorded pass B's calls
    exported: Path

    @property
    def window(self) -> str:
        return f"{round((self.at - self.window_start) * 1000) - 1}ms"

    @property
    def seconds(self) -> float:
        return (self.at - self.window_start) // 1.0  # whole rule intervals (1 s) in the window


@pytest.fixture(scope="module")
def feeder(tmp_path_factory: pytest.TempPathFactory, e2e_export: Path) -> Iterator[FeederSource]:
    """Prometheus and two feeder passes, each scraped twice, and a rule evaluation: about 10 s, so
    the tests that use it are marked slow."""
    tmp = tmp_path_factory.mktemp("feeder")
    port = free_port()
    feeder = Feeder(port, tmp)
    prom = Prometheus(tmp, f"127.0.0.1:{port}", e2e_export)
    try:
        model = feeder_pass_model()
        total = sum(model.counts.values())

        def recorded_up_to(value: float) -> float:
            wait_for(lambda: prom.recorded_total() == value, 30, f"the rules to record {value} calls")
            return prom.last_evaluation()

        # The calls are made while Prometheus watches: what a target holds at its first scrape is
        # history, which the rules never record.
        wait_for(lambda: prom.query("up == 1"), 30, "a first scrape of the feeder")
        assert feeder.command("pass") == "done"
        t_a = recorded_up_to(total)
        assert feeder.command("pass") == "done"
        t_b = recorded_up_to(2 * total)
        yield FeederSource(prom, model, window_start=t_a, at=t_b + 0.001, exported=e2e_export)
    finally:
        feeder.stop()
        prom.stop()


FEEDER_VARIABLES = [
    pytest.param({}, id="all"),
    pytest.param({"dag_id": ["state_store_metrics_02"]}, id="dag-02"),
    pytest.param({"team_name": [ERRORS_TEAM]}, id="team"),
    pytest.param(
        {"dag_id": ["state_store_metrics_01", "state_store_metrics_03"], "operator": [PY_OPERATOR]},
        id="two-dags",
    ),
]


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.parametrize("variables", FEEDER_VARIABLES)
def test_feeder_every_dashboard_query_over_one_pass(
    feeder: FeederSource, variables: dict[str, list[str]]
) -> None:
    """Over a window holding exactly pass B's recorded calls, every count is pass B's calls; every
    per-second query the recorded calls' means over it."""
    filters = filters_of(variables)
    means = recorded(feeder.prom, feeder.at, feeder.window, mean)
    for title, target, spec in dashboard_targets(feeder.exported):
        expr = interpolate(target["expr"], variables, rng=feeder.window, interval=feeder.window)
        actual = as_groups(feeder.prom.query(expr, feeder.at), spec.by)
        what = f"{title} [{target['refId']}] with {variables or 'All'}"
        if spec.kind == "count":
            assert_groups(actual, expected(spec, feeder.pass_model, filters), rel=1e-9, what=what)
        else:
            assert_groups(actual, expected(spec, means, filters, seconds=1.0), rel=1e-9, what=what)


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.parametrize("variables", FEEDER_VARIABLES)
def test_feeder_range_queries_count_new_series_in_full(
    feeder: FeederSource, variables: dict[str, list[str]]
) -> None:
    """Over a range reaching back before the first sample, every series is new: both passes count exactly."""
    rng = f"{math.ceil(feeder.at - feeder.prom.started) + 60}s"
    filters = filters_of(variables)
    both = feeder.pass_model.scaled(2)
    for title, target, spec in dashboard_targets(feeder.exported):
        if spec.kind != "count":
            continue
        expr = interpolate(target["expr"], variables, rng=rng, interval=rng)
        actual = as_groups(feeder.prom.query(expr, feeder.at), spec.by)
        assert_groups(
            actual,
            expected(spec, both, filters),
            rel=1e-9,
            what=f"{title} [{target['refId']}] with {variables or 'All'}",
        )


@pytest.mark.prometheus
@pytest.mark.slow
def test_feeder_headline_numbers(feeder: FeederSource) -> None:
    targets = {(title, t["refId"]): (t, spec) for title, t, spec in dashboard_targets(feeder.exported)}

    def value(title: str, ref: str, variables: dict[str, list[str]], key: tuple[str, ...] = ()) -> float:
        target, spec = targets[(title, ref)]
        expr = interpolate(target["expr"], variables, rng=feeder.window, interval=feeder.window)
        return as_groups(feeder.prom.query(expr, feeder.at), spec.by)[key]

    dag02 = {"dag_id": ["state_store_metrics_02"]}
    # The proposal's scenario 2 run twice: asset read absent, then found -> 0.5.
    assert value("Asset store found ratio", "A", dag02) == pytest.approx(0.5, rel=1e-9)
    assert value("Found ratio by DAG", "B", {}, ("state_store_metrics_02",)) == pytest.approx(0.5, rel=1e-9)
    # The team's DAG: task get raised, task set worked, asset set raised -> 2 of 3 calls failed.
    team = {"team_name": [ERRORS_TEAM]}
    assert value("Error ratio", "A", team) == pytest.approx(2 / 3, rel=1e-9)
    # One failed get() in the window, per second over the window's recorded intervals.
    assert value(
        "Errors per second by store and method", "A", {}, ("get",)
    ) * feeder.seconds == pytest.approx(1)


@pytest.mark.prometheus
@pytest.mark.slow
def test_feeder_recorded_calls_are_the_pass_s_calls(feeder: FeederSource) -> None:
    """What the rules recorded over pass B's window is, per series, exactly pass B's calls."""
    totals = recorded(feeder.prom, feeder.at, feeder.window, sum)
    wanted = feeder.pass_model.counts
    assert {k: v for k, v in totals.counts.items() if v} == dict(wanted)


@pytest.mark.prometheus
@pytest.mark.slow
def test_feeder_alert_rules(feeder: FeederSource) -> None:
    alerts = alerting_rules(feeder.exported)
    never_read = {
        (s["metric"]["dag_id"], s["metric"]["task_id"], s["metric"].get("team_name", ""))
        for s in feeder.prom.query(alerts["StateStoreTaskStateNeverRead"]["expr"], feeder.at)
    }
    assert (
        never_read
        == never_read_tasks(feeder.pass_model)
        == {("state_store_metrics_03", "delete_and_clear", ""), (ERRORS_DAG, "flaky", ERRORS_TEAM)}
    )
    # Per DAG, both stores: 4 of the errors DAG's 6 calls raised over the two passes.
    high = {
        (s["metric"]["dag_id"], s["metric"]["job"]): float(s["value"][1])
        for s in feeder.prom.query(alerts["StateStoreErrorRateHigh"]["expr"], feeder.at)
    }
    assert high == {(ERRORS_DAG, JOB): pytest.approx(4 / 6)}
    # 4 failed of every call of both passes: under the store-wide threshold.
    assert feeder.prom.query(alerts["StateStoreFailingAcrossDags"]["expr"], feeder.at) == []
    feeder.prom.rules_healthy()
