"""Prometheus rules and config: promtool check and test, mutations the tests catch, catalogue coverage."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from store_metrics import catalogue

ROOT = Path(__file__).resolve().parent.parent
COLLECTOR = ROOT / "collector"
RULES = COLLECTOR / "rules.yml"
RULES_TEST = COLLECTOR / "rules.test.yml"

pytestmark = pytest.mark.prometheus


def promtool(*args: str, cwd: Path = COLLECTOR) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed (Debian: apt-get install -y prometheus)")
    return subprocess.run([path, *args], cwd=cwd, check=False, capture_output=True, text=True, timeout=60)


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_promtool_check_config() -> None:
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_check_rules() -> None:
    result = promtool("check", "rules", "rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_promtool_test_rules() -> None:
    result = promtool("test", "rules", "rules.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


#: Plausible mistakes in rules.yml; each must make `promtool test rules` fail.
MUTATIONS = {
    "found ratio counts absent reads": ('{outcome="read_found"}) or 0 *', '{outcome="read_absent"}) or 0 *'),
    "error threshold 10x too high": ("> 0.05", "> 0.5"),
    "team label dropped from the per-DAG rates": (
        "sum by (dag_id, team_name) (rate(airflow_task_state_store_read_found_total[5m]))",
        "sum by (dag_id) (rate(airflow_task_state_store_read_found_total[5m]))",
    ),
    "store label of a counter wrong": (
        "expr: sum by (dag_id, team_name) (rate(airflow_task_state_store_write_total[5m]))\n    labels:\n"
        "      store: task",
        "expr: sum by (dag_id, team_name) (rate(airflow_task_state_store_write_total[5m]))\n    labels:\n"
        "      store: asset",
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
}


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
        assert f"rate({metric.prometheus_name()}[5m])" in calls[(store, outcome)]


NAME = re.compile(r"\b([a-zA-Z_][a-zA-Z0-9_]*(?::[a-zA-Z0-9_]+)+|[a-z][a-z0-9_]*_total)\b")


def test_rules_reference_only_catalogue_metrics_and_recorded_series() -> None:
    known = {m.prometheus_name() for m in catalogue.METRICS}
    recorded = {r["record"] for r in rules() if "record" in r}
    for rule in rules():
        for name in NAME.findall(rule["expr"]):
            if ":" in name:
                assert name in recorded, (rule.get("record") or rule.get("alert"), name)
            else:
                assert name in known, (rule.get("record") or rule.get("alert"), name)
    # Recorded series use only the catalogue's labels plus store/outcome.
    allowed = set(catalogue.TAG_ORDER) | {"store", "outcome"}
    for rule in rules():
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
    for alert in alerts:
        assert alert["labels"]["severity"] in {"warning", "critical"}
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
        assert alert["for"]
