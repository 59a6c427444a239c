"""Prometheus rules and config: promtool check and test, mutations the tests catch, catalogue coverage.

rules.yml records the one tier every panel and alert reads (the calls of each interval per
deployment, job, DAG, task, operator, run type, team and failing method) and holds the per-DAG and
store-wide alerts; watcher-rules.yml the asset watchers' alert over the same tier (a watcher belongs
to no DAG, so the per-DAG alerts leave it out). Every alert carries severity, summary, description,
runbook_url and dashboard_url, and has a page under docs/runbooks/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from support.exported import run_export
from support.promtool import assert_unit_tests_catch, promtool
from testbed.repository import ROOT

COLLECTOR = ROOT / "collector"
RULES = COLLECTOR / "rules.yml"
RULES_TEST = COLLECTOR / "rules.test.yml"
WATCHER_FILENAME = "watcher-rules.yml"
WATCHER_TESTS_FILENAME = "watcher-rules.test.yml"
WATCHER_RULES = COLLECTOR / WATCHER_FILENAME
WATCHER_RULES_TEST = COLLECTOR / WATCHER_TESTS_FILENAME

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
    "a counter's growth taken from its latest sample only (a failed scrape recounts everything)": (
        '(last_over_time(airflow_task_state_store_error_total{job!=""}[1h] offset 90s) unless',
        '(airflow_task_state_store_error_total{job!=""} offset 90s unless',
    ),
    "a restarted peer's counter, back at its old value, counted as nothing": (
        '(last_over_time(airflow_task_state_store_delete_total{job!=""}[1h] offset 90s)'
        " unless on (cluster, instance) (up offset 90s == 1))",
        'last_over_time(airflow_task_state_store_delete_total{job!=""}[1h] offset 90s)',
    ),
    "a new series' first count dropped": (
        '          airflow_task_state_store_read_found_total{job!=""} offset 30s\n          and on',
        '          airflow_task_state_store_read_found_total{job!=""} offset 30s > 100\n          and on',
    ),
    "history counted: a target back after failing every scrape for longer than the lookback counts in full": (
        " unless on (cluster, instance) up offset 3690s)",
        ")",
    ),
    "a new pod failing its first scrape while it starts loses its first calls": (
        " unless on (cluster, instance) up offset 3690s)",
        " unless on (cluster, instance) max_over_time(up[1h] offset 90s))",
    ),
    "history counted: a fresh Prometheus's targets first scraped a scrape interval apart count in full": (
        "max by (cluster, job) (max_over_time(up[1h] offset 150s))",
        "max by (cluster, job) (max_over_time(up[1h] offset 90s))",
    ),
    "a rollout's new pods lose their first minute (a new target counts only if itself was scraped)": (
        "* on (cluster, job) group_right ()",
        "* on (cluster, job, instance) group_right ()",
    ),
    "an asset clear's growth read a scrape too late (offset 60s)": (
        'airflow_asset_state_store_clear_total{job!=""} offset 90s',
        'airflow_asset_state_store_clear_total{job!=""} offset 60s',
    ),
    "a reset counted as nothing": (
        '(last_over_time(airflow_task_state_store_read_absent_total{job!=""}[1h] offset 90s)'
        " unless on (cluster, instance) (up offset 90s == 1))\n          )\n        ) >= 0",
        '(last_over_time(airflow_task_state_store_read_absent_total{job!=""}[1h] offset 90s)'
        " unless on (cluster, instance) (up offset 90s == 1))\n          )\n        ) > -1000",
    ),
    "jobs added up": (
        "sum by (cluster, job, dag_id, task_id, run_type, operator, team_name) (\n        (\n"
        "          airflow_task_state_store_write_total",
        "sum by (cluster, dag_id, task_id, run_type, operator, team_name) (\n        (\n"
        "          airflow_task_state_store_write_total",
    ),
    "instances kept apart": (
        "sum by (cluster, job, dag_id, task_id, run_type, operator, team_name) (\n        (\n"
        "          airflow_task_state_store_write_total",
        "sum by (cluster, job, instance, dag_id, task_id, run_type, operator, team_name) (\n"
        "        (\n          airflow_task_state_store_write_total",
    ),
    "store label of a counter wrong": (
        "      store: task\n      outcome: write\n",
        "      store: asset\n      outcome: write\n",
    ),
    "error threshold 10x too high": (") > 0.05\n", ") > 0.5\n"),
    "error window too short for an hourly DAG's run": ("[1h]))\n        /", "[5m]))\n        /"),
    "no floor of calls": (">= 10\n", ">= 0\n"),
    "watchers counted as a DAG": ('run_type!="asset_watcher"', 'run_type!="no_such_run_type"'),
    "store-wide ratio over one DAG's calls": (
        "sum by (cluster, job) (sum_over_time(task:airflow_store_metrics_calls:increase[15m])) >= 20",
        "sum by (cluster, job, dag_id) (sum_over_time(task:airflow_store_metrics_calls:increase[15m])) >= 20",
    ),
    "store-wide alert on any error": (") > 0.2\n", ") > 0\n"),
    "never-read alert inverted": (
        "unless on (cluster, job, dag_id, task_id, team_name)",
        "and on (cluster, job, dag_id, task_id, team_name)",
    ),
    "never-read alert never resolves (no window)": (
        'sum_over_time(task:airflow_store_metrics_calls:increase{store="task",outcome="write"}[1d])',
        'sum_over_time(task:airflow_store_metrics_calls:increase{store="task",outcome="write"}[30d])',
    ),
    "never-read alert fires at once": ("for: 1h", "for: 1m"),
}

#: Plausible mistakes in watcher-rules.yml; each must make `promtool test rules` fail.
WATCHER_MUTATIONS = {
    "watcher alert counts the tasks' calls too": ('run_type="asset_watcher"', 'run_type!=""'),
    "watcher alert split by DAG, not by asset": (
        "sum by (cluster, job, operator, task_id) (sum_over_time(task:airflow_store_metrics_calls:increase{"
        'run_type="asset_watcher",outcome',
        "sum by (cluster, job, operator, dag_id) (sum_over_time(task:airflow_store_metrics_calls:increase{"
        'run_type="asset_watcher",outcome',
    ),
    "watcher alert fires at once": ("for: 5m", "for: 0s"),
    "watcher alert threshold 10x too high": (") > 0.05\n", ") > 0.5\n"),
    "watcher alert without a floor": (">= 10\n", ">= 0\n"),
}


@pytest.mark.parametrize("mutation", list(WATCHER_MUTATIONS), ids=list(WATCHER_MUTATIONS))
def test_watcher_rule_unit_tests_catch_a_wrong_rule(mutation: str, tmp_path: Path) -> None:
    assert_unit_tests_catch(WATCHER_MUTATIONS[mutation], WATCHER_FILENAME, tmp_path, "rules.yml")


@pytest.mark.slow  # each runs rules.test.yml, a day of samples: ~5 s
@pytest.mark.parametrize("mutation", list(MUTATIONS), ids=list(MUTATIONS))
def test_rule_unit_tests_catch_a_wrong_rule(mutation: str, tmp_path: Path) -> None:
    assert_unit_tests_catch(MUTATIONS[mutation], "rules.yml", tmp_path)


def test_rules_are_generated_from_the_catalogue() -> None:
    result = run_export(ROOT, "--check")  # the repository's copy of the export, rules included
    assert result.returncode == 0, result.stderr


#: A counter's call-recording rule at the default settings (rule_interval 1m, rule_offset 30s,
#: counter_lookback 1h), written out here and not generated: every term and offset of it is held.
EXPECTED_RULE = """\
sum by (cluster, job, {tags}) (
  (
    {name}{{job!=""}} offset 30s
    - (
      {name}{{job!=""}} offset 90s
      or
      (last_over_time({name}{{job!=""}}[1h] offset 90s) unless on (cluster, instance) (up offset 90s == 1))
    )
  ) >= 0
  or
  (
    {name}{{job!=""}} offset 30s
    and on (cluster, instance)
    (
      max by (cluster, instance) (max_over_time(up[1h] offset 90s)) == 1
      or
      (max by (cluster, job) (max_over_time(up[1h] offset 150s)) == 1)
      * on (cluster, job) group_right ()
      max by (cluster, job, instance) (up offset 30s == 1 unless on (cluster, instance) up offset 3690s)
    )
  )
)"""


def test_every_state_store_counter_has_its_call_recording_rule() -> None:
    recorded = {
        (r["record"], r["labels"]["store"], r["labels"]["outcome"]): r["expr"]
        for r in rules()
        if r.get("record")
        in ("task:airflow_store_metrics_calls:increase", "task:airflow_store_metrics_retries:increase")
    }
    counters = [m for m in catalogue.METRICS if m.recording is not None]
    assert len(recorded) == len(counters)
    assert {*catalogue.STATE_STORE_METRICS, *catalogue.RETRY_METRICS} <= set(counters)
    for metric in counters:
        assert metric.recording is not None
        labels = dict(metric.recording.labels)
        expr = recorded[(_record_name(metric.recording.series), labels["store"], labels["outcome"])]
        # Its growth since the previous read (90 s back), bridged over a failed scrape; its whole value
        # when new on a target scraped within the lookback, or on a new target of a job scraped
        # within the lookback before the read before (a rollout); per deployment, job and its tags.
        assert expr == EXPECTED_RULE.format(name=metric.prometheus_name(), tags=", ".join(metric.all_tags))
    (group,) = [g for g in yaml.safe_load(RULES.read_text())["groups"] if g["name"] == "store-metrics.rules"]
    assert (
        group["interval"] == "1m"
    )  # rule_interval: the offsets above are 30s, 30s + 1m, 30s + 2m, 30s + 1m + 1h


def _record_name(base: str) -> str:
    level, metric, operations = base.split(":")
    return f"{level}:airflow_{metric}:{operations}"


NAME = re.compile(r"\b([a-zA-Z_][a-zA-Z0-9_]*(?::[a-zA-Z0-9_]+)+|[a-z][a-z0-9_]*_total)\b")


@pytest.mark.parametrize("path", [RULES, WATCHER_RULES], ids=lambda p: p.name)
def test_rules_reference_only_catalogue_metrics_and_recorded_series(path: Path) -> None:
    known = {m.prometheus_name() for m in catalogue.METRICS}
    recorded = {r["record"] for p in (RULES, WATCHER_RULES) for r in rules(p) if "record" in r}
    for rule in rules(path):
        for name in NAME.findall(rule["expr"]):
            if ":" in name:
                assert name in recorded, (rule.get("record") or rule.get("alert"), name)
            else:
                assert name in known, (rule.get("record") or rule.get("alert"), name)
    # Recorded series use only the catalogue's labels plus store/outcome, the deployment and job.
    allowed = set(catalogue.TAG_ORDER) | {"store", "outcome", "cluster", "job"}
    for rule in rules(path):
        # Only the recording rules' scrape guard groups by instance (on ``up``); nothing keeps it.
        # The series count is per target (instance) by design: StateStoreMetricsMissing reads it.
        expr = rule["expr"].replace("max by (cluster, instance) (max_over_time(up[", "")
        expr = expr.replace("max by (cluster, job, instance) (up offset", "")
        if rule.get("record", "").startswith("instance:"):
            expr = expr.replace("count by (cluster, job, instance)", "")
        for by in re.findall(r"by \(([^)]*)\)", expr):
            assert {label.strip() for label in by.split(",")} <= allowed, rule
        assert set(rule.get("labels", {})) <= allowed | {"severity"}, rule


def test_alerts_carry_severity_text_runbook_and_dashboard_link() -> None:
    alerts = [r for r in rules() if "alert" in r]
    assert {a["alert"] for a in alerts} == {
        "StateStoreTaskStateNeverRead",
        "StateStoreErrorRateHigh",
        "StateStoreFailingAcrossDags",
        "StateStoreRetriesStartOver",
        "StateStoreMetricsMissing",
    }
    watcher_alerts = [r for r in rules(WATCHER_RULES) if "alert" in r]
    assert [a["alert"] for a in watcher_alerts] == ["StateStoreWatcherErrorRateHigh"]
    severities = {a["alert"]: a["labels"]["severity"] for a in [*alerts, *watcher_alerts]}
    assert severities == {
        "StateStoreTaskStateNeverRead": "info",
        "StateStoreErrorRateHigh": "warning",
        "StateStoreFailingAcrossDags": "critical",
        "StateStoreRetriesStartOver": "warning",
        "StateStoreMetricsMissing": "warning",
        "StateStoreWatcherErrorRateHigh": "warning",
    }
    for alert in [*alerts, *watcher_alerts]:
        notes = alert["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url", "dashboard_url"}, alert["alert"]
        assert notes["runbook_url"] == (
            f"https://store-metrics.github.io/airflow-store-metrics/runbooks/{alert['alert'].lower()}/"
        )
        assert notes["dashboard_url"].startswith(
            "http://localhost:3000/d/store-metrics-state-store/?var-cluster="
        )
        # The job variable of the alert's component: the watchers' own for a watcher alert.
        job_variable = "watcher_job" if alert in watcher_alerts else "job"
        assert f"var-{job_variable}={{{{ $labels.job }}}}" in notes["dashboard_url"]
        assert alert["for"]
