"""Prometheus rules and config: promtool check and test, mutations the tests catch, catalogue coverage.

rules.yml (the tasks' calls, per DAG) and watcher-rules.yml (asset watchers' calls, by trigger class
and watched asset): a watcher belongs to no DAG, so the per-DAG rules leave it out.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from support.promtool import promtool

ROOT = Path(__file__).resolve().parent.parent
COLLECTOR = ROOT / "collector"
RULES = COLLECTOR / "rules.yml"
RULES_TEST = COLLECTOR / "rules.test.yml"
WATCHER_FILENAME = "watcher-rules.yml"
WATCHER_TESTS_FILENAME = "watcher-rules.test.yml"
WATCHER_RULES = COLLECTOR / WATCHER_FILENAME
WATCHER_RULES_TEST = COLLECTOR / WATCHER_TESTS_FILENAME
#: The asset watchers' calls, and every other call (the tasks'), as the rules select them.
WATCHERS = f'{{{catalogue.RUN_TYPE}="{catalogue.RUN_TYPE_ASSET_WATCHER}"}}'
NOT_WATCHERS = f'{{{catalogue.RUN_TYPE}!="{catalogue.RUN_TYPE_ASSET_WATCHER}"}}'
WATCHER_CALLS = "operator_task_id:store_metrics_watcher_calls:rate5m"
WATCHER_RECORDED = (
    WATCHER_CALLS,
    "operator_task_id:store_metrics_watcher_found:ratio_rate5m",
    "operator_task_id:store_metrics_watcher_errors:ratio_rate5m",
)

pytestmark = pytest.mark.prometheus


def rules(path: Path = RULES) -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]]


def test_promtool_check_config() -> None:
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_check_rules() -> None:
    result = promtool("check", "rules", "rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout
    result = promtool("check", "rules", WATCHER_FILENAME)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules(WATCHER_RULES))} rules found" in result.stdout


def test_promtool_test_rules() -> None:
    result = promtool("test", "rules", "rules.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    result = promtool("test", "rules", WATCHER_TESTS_FILENAME)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


#: Plausible mistakes in rules.yml; each must make `promtool test rules` fail.
MUTATIONS = {
    "found ratio counts absent reads": ('{outcome="read_found"}) or 0 *', '{outcome="read_absent"}) or 0 *'),
    "error threshold 10x too high": ("> 0.05", "> 0.5"),
    "team label dropped from the per-DAG rates": (
        f"sum by (dag_id, team_name) (rate(airflow_task_state_store_read_found_total{NOT_WATCHERS}[5m]))",
        f"sum by (dag_id) (rate(airflow_task_state_store_read_found_total{NOT_WATCHERS}[5m]))",
    ),
    "store label of a counter wrong": (
        f"expr: sum by (dag_id, team_name) (rate(airflow_task_state_store_write_total{NOT_WATCHERS}[5m]))\n"
        "    labels:\n      store: task",
        f"expr: sum by (dag_id, team_name) (rate(airflow_task_state_store_write_total{NOT_WATCHERS}[5m]))\n"
        "    labels:\n      store: asset",
    ),
    "never-read alert inverted": (
        "unless on (dag_id, task_id, team_name)",
        "and on (dag_id, task_id, team_name)",
    ),
    "never-read alert fires at once": ("for: 1h", "for: 1m"),
    "reads per write loses DAGs that never read": (
        'or 0 * sum by (dag_id, team_name, store) (dag_id:store_metrics_calls:rate5m{outcome="write"})) /',
        ") /",
    ),
    "errors left out of the error ratio's denominator": (
        'outcome=~"read_found|read_absent|write|delete|clear|error"}) > 0)',
        'outcome=~"read_found|read_absent|write|delete|clear"}) > 0)',
    ),
    "platform alert needs 2 DAGs": (">= 3", ">= 2"),
    # Asset watchers (run_type="asset_watcher", dag_id="none").
    "watchers merged into the per-DAG rates": (f"{NOT_WATCHERS}[5m]", "[5m]"),
    "watchers' errors by method counted per DAG": (
        f"(rate(airflow_asset_state_store_error_total{NOT_WATCHERS}[5m]))\n"
        "    labels:\n      store: asset\n- name:",
        "(rate(airflow_asset_state_store_error_total[5m]))\n    labels:\n      store: asset\n- name:",
    ),
}

#: Plausible mistakes in watcher-rules.yml; each must make `promtool test rules` fail.
WATCHER_MUTATIONS = {
    "watcher rules count the tasks' calls too": (f"{WATCHERS}[5m]", "[5m]"),
    "watcher rules split by DAG, not by asset": (
        "sum by (operator, task_id) (rate(",
        "sum by (operator, dag_id) (rate(",
    ),
    "watcher error ratio counts found reads": (
        'operator_task_id:store_metrics_watcher_calls:rate5m{outcome="error"}',
        'operator_task_id:store_metrics_watcher_calls:rate5m{outcome="read_found"}',
    ),
    "watcher alert fires at once": (
        "store_metrics_watcher_errors:ratio_rate5m > 0.05\n    for: 10m",
        "store_metrics_watcher_errors:ratio_rate5m > 0.05\n    for: 1m",
    ),
    "watcher alert threshold 10x too high": (
        "store_metrics_watcher_errors:ratio_rate5m > 0.05",
        "store_metrics_watcher_errors:ratio_rate5m > 0.5",
    ),
}


@pytest.mark.parametrize("mutation", list(WATCHER_MUTATIONS), ids=list(WATCHER_MUTATIONS))
def test_watcher_rule_unit_tests_catch_a_wrong_rule(mutation: str, tmp_path: Path) -> None:
    old, new = WATCHER_MUTATIONS[mutation]
    text = WATCHER_RULES.read_text()
    assert old in text, f"mutation {mutation!r} no longer applies to {WATCHER_FILENAME}"
    (tmp_path / WATCHER_FILENAME).write_text(text.replace(old, new))
    shutil.copy(WATCHER_RULES_TEST, tmp_path / WATCHER_TESTS_FILENAME)
    checked = promtool("check", "rules", WATCHER_FILENAME, cwd=tmp_path)
    assert checked.returncode == 0, "mutant must still be valid"
    result = promtool("test", "rules", WATCHER_TESTS_FILENAME, cwd=tmp_path)
    assert result.returncode != 0, f"promtool test rules passed with mutation: {mutation}"
    assert "FAILED" in result.stdout + result.stderr


@pytest.mark.parametrize("mutation", list(MUTATIONS), ids=list(MUTATIONS))
def test_rule_unit_tests_catch_a_wrong_rule(mutation: str, tmp_path: Path) -> None:
    old, new = MUTATIONS[mutation]
    text = RULES.read_text()
    assert old in text, f"mutation {mutation!r} no longer applies to rules.yml"
    # Every occurrence, except the zero-fill removal: that one only in the reads-per-write rule.
    mutated = text.replace(old, new, 1 if new == ") /" else -1)
    (tmp_path / "rules.yml").write_text(mutated)
    shutil.copy(RULES_TEST, tmp_path / "rules.test.yml")
    assert promtool("check", "rules", "rules.yml", cwd=tmp_path).returncode == 0, "mutant must still be valid"
    result = promtool("test", "rules", "rules.test.yml", cwd=tmp_path)
    assert result.returncode != 0, f"promtool test rules passed with mutation: {mutation}"
    assert "FAILED" in result.stdout + result.stderr


def test_rules_are_generated_from_the_catalogue() -> None:
    result = subprocess.run(
        [sys.executable, str(COLLECTOR / "generate.py"), "--check"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_every_state_store_counter_has_a_per_dag_rate_rule() -> None:
    calls = {
        (r["labels"]["store"], r["labels"]["outcome"]): r["expr"]
        for r in rules()
        if r.get("record") == "dag_id:store_metrics_calls:rate5m"
    }
    assert len(calls) == len(catalogue.STATE_STORE_METRICS)
    for metric in catalogue.STATE_STORE_METRICS:
        scope, outcome = metric.name.split(".")
        store = scope.removesuffix("_state_store")
        # The tasks' calls: every run type but the asset watchers' (they belong to no DAG).
        assert f'rate({metric.prometheus_name()}{{run_type!="asset_watcher"}}[5m])' in calls[(store, outcome)]


def test_every_state_store_counter_has_a_watcher_rate_rule_and_per_dag_rules_exclude_watchers() -> None:
    watcher_calls = {
        (r["labels"]["store"], r["labels"]["outcome"]): r["expr"]
        for r in rules(WATCHER_RULES)
        if r.get("record") == WATCHER_CALLS
    }
    assert len(watcher_calls) == len(catalogue.STATE_STORE_METRICS)
    for metric in catalogue.STATE_STORE_METRICS:
        scope, outcome = metric.name.split(".")
        store = scope.removesuffix("_state_store")
        assert watcher_calls[(store, outcome)] == (
            f'sum by (operator, task_id) (rate({metric.prometheus_name()}{{run_type="asset_watcher"}}[5m]))'
        )
    assert WATCHERS == '{run_type="asset_watcher"}' and NOT_WATCHERS == '{run_type!="asset_watcher"}'
    # Every rule over the raw counters says which calls it takes: the tasks' or the watchers'.
    for path, wanted in ((RULES, NOT_WATCHERS), (WATCHER_RULES, WATCHERS)):
        for rule in rules(path):
            for _, matcher in re.findall(r"\b(airflow_\w+_total)(\{[^}]*\})?\[", rule["expr"]):
                assert matcher == wanted, rule
    assert {r["record"] for r in rules(WATCHER_RULES) if "record" in r} == set(WATCHER_RECORDED)


NAME = re.compile(r"\b([a-zA-Z_][a-zA-Z0-9_]*(?::[a-zA-Z0-9_]+)+|[a-z][a-z0-9_]*_total)\b")


@pytest.mark.parametrize("path", [RULES, WATCHER_RULES], ids=lambda p: p.name)
def test_rules_reference_only_catalogue_metrics_and_recorded_series(path: Path) -> None:
    known = {m.prometheus_name() for m in catalogue.METRICS}
    recorded = {r["record"] for r in rules(path) if "record" in r}
    for rule in rules(path):
        for name in NAME.findall(rule["expr"]):
            if ":" in name:
                assert name in recorded, (rule.get("record") or rule.get("alert"), name)
            else:
                assert name in known, (rule.get("record") or rule.get("alert"), name)
    # Recorded series use only the catalogue's labels plus store/outcome.
    allowed = set(catalogue.TAG_ORDER) | {"store", "outcome"}
    for rule in rules(path):
        for by in re.findall(r"by \(([^)]*)\)", rule["expr"]):
            assert {label.strip() for label in by.split(",")} <= allowed, rule
        assert set(rule.get("labels", {})) <= allowed | {"severity"}, rule


def test_alerts_carry_severity_and_text() -> None:
    alerts = [r for r in rules() if "alert" in r]
    assert {a["alert"] for a in alerts} == {
        "StateStoreTaskStateNeverRead",
        "StateStoreErrorRateHigh",
        "StateStoreFailingAcrossDags",
    }
    watcher_alerts = [r for r in rules(WATCHER_RULES) if "alert" in r]
    assert [a["alert"] for a in watcher_alerts] == ["StateStoreWatcherErrorRateHigh"]
    for alert in [*alerts, *watcher_alerts]:
        assert alert["labels"]["severity"] in {"warning", "critical"}
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
        assert alert["for"]
