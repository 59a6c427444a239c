"""The state store footprint in Prometheus: footprint-rules.yml, its promtool tests, the scrape job
of ``store-metrics inventory --serve`` and the statsd_exporter mappings of its gauges.

* promtool checks the rules and runs their unit tests (``collector/footprint-rules.test.yml``: two
  replicas give the max, not the double; the ``other`` buckets count in the totals; each alert
  fires after its ``for:`` and not for blips);
* plausible mistakes in the rules make those unit tests fail;
* the rules name only the inventory's catalogue series, by their ``prometheus_name()``;
* ``prometheus.yml`` scrapes the inventory on :9490 and loads the rules;
* the statsd_exporter mappings give each gauge its ``prometheus_name()`` (``_bytes``, ``_seconds``,
  ``_milliseconds``), for ``inventory_export = backend`` with a StatsD backend.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from store_metrics.config import options
from support.promtool import assert_unit_tests_catch, promtool
from testbed.repository import ROOT

COLLECTOR = ROOT / "collector"
FILENAME = "footprint-rules.yml"
TESTS_FILENAME = "footprint-rules.test.yml"
RULES = COLLECTOR / FILENAME
RULES_TEST = COLLECTOR / TESTS_FILENAME
#: What the footprint rules record (the dashboard's Footprint row and the alerts read them).
RECORDED = (
    "dag_id:airflow_store_metrics_footprint_entries:sum",
    "dag_id:airflow_store_metrics_footprint_bytes:sum",
    "dag_id:airflow_store_metrics_footprint_expired_entries:sum",
    "asset:airflow_store_metrics_footprint_entries:sum",
    "asset:airflow_store_metrics_footprint_bytes:sum",
    "store:airflow_store_metrics_footprint_expired_entries:sum",
    "store:airflow_store_metrics_inventory_up:max",
    "store:airflow_store_metrics_inventory_footprint_age_seconds:min",
    "store:airflow_store_metrics_inventory_query_duration_ms:max",
)
MAPPING = COLLECTOR / "statsd-mapping-inventory.yml"
ALERTS = {"StateStoreRetentionNotApplied", "StateStoreInventoryDown", "StateStoreInventoryStale"}


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


@pytest.mark.prometheus
def test_promtool_checks_and_unit_tests_pass() -> None:
    checked = promtool("check", "rules", FILENAME)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout
    tested = promtool("test", "rules", TESTS_FILENAME)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_the_unit_tests_cover_replicas_other_and_every_alert() -> None:
    doc = yaml.safe_load(RULES_TEST.read_text())
    assert doc["rule_files"] == [FILENAME]
    series = [s["series"] for group in doc["tests"] for s in group["input_series"]]
    # Two replicas of the same group, and the `other` buckets of both stores.
    assert any('pod="store-metrics-inventory-5d8c7-b"' in s for s in series)
    assert any('dag_id="<other>",task_id="<other>"' in s for s in series)
    assert any('dag_id="etl",task_id="<other>"' in s for s in series)
    assert any('asset="<other>"' in s for s in series)
    tested = {t["alertname"] for group in doc["tests"] for t in group.get("alert_rule_test", [])}
    assert tested == ALERTS
    for alert in ALERTS:  # each alert: at least one evaluation firing and one not
        results = [
            bool(t["exp_alerts"])
            for group in doc["tests"]
            for t in group.get("alert_rule_test", [])
            if t["alertname"] == alert
        ]
        assert True in results and False in results, alert
    recorded = {t["expr"].split("{")[0] for group in doc["tests"] for t in group.get("promql_expr_test", [])}
    assert set(RECORDED) <= recorded


#: Plausible mistakes in footprint-rules.yml; each must make `promtool test rules` fail.
MUTATIONS = {
    "replicas added up": ("max by (cluster, dag_id, task_id)", "sum by (cluster, dag_id, task_id)"),
    "job label kept, replicas of two jobs counted twice": (
        "max by (cluster, dag_id, task_id)",
        "max by (cluster, job, dag_id, task_id)",
    ),
    "labels a scrape config adds split the replicas (max without, not by the gauge's labels)": (
        "max by (cluster, dag_id, task_id)",
        "max without (instance, pod, job)",
    ),
    "other left out of the task store's expired entries": (
        '(airflow_task_state_store_footprint_expired_entries{job!=""}))\n    labels:',
        '(airflow_task_state_store_footprint_expired_entries{job!="",dag_id!="<other>"}))\n    labels:',
    ),
    "other left out of the assets": (
        '(airflow_asset_state_store_footprint_entries{job!=""})',
        '(airflow_asset_state_store_footprint_entries{job!="",asset!="<other>"})',
    ),
    "up from the worst replica": (
        "max by (cluster, store) (airflow_state_store_inventory_up",
        "min by (cluster, store) (airflow_state_store_inventory_up",
    ),
    "age from the stalest replica": (
        'min by (cluster, store) (airflow_state_store_inventory_footprint_age_seconds{job!=""})\n  - record',
        'max by (cluster, store) (airflow_state_store_inventory_footprint_age_seconds{job!=""})\n  - record',
    ),
    "retention alert ignores cleanups that leave some expired entries": (
        "\n      unless on (cluster, store)\n"
        "      resets(store:airflow_store_metrics_footprint_expired_entries:sum[25h]) > 0",
        "",
    ),
    "retention alert fires under a daily clean (window of 6 hours)": ("[25h]", "[6h]"),
    "retention alert fires while the count is younger than the window": (
        "\n      and on (cluster, store)\n"
        "      store:airflow_store_metrics_footprint_expired_entries:sum offset 25h",
        "",
    ),
    "retention alert fires at once": ("for: 1h", "for: 0s"),
    "inventory down ignores a missing inventory": (
        '\n      or\n      absent(airflow_state_store_inventory_up{job!=""})',
        "",
    ),
    "inventory down only when no deployment reports": (
        '      (\n        max by (cluster) (max_over_time(airflow_state_store_inventory_up{job!=""}[1d]))\n'
        '        unless\n        max by (cluster) (airflow_state_store_inventory_up{job!=""})\n'
        "      )\n      or\n",
        "",
    ),
    "inventory down fires at once": ("for: 15m", "for: 1m"),
    "stale threshold 10x too high": ("> 900", "> 9000"),
    "stale alert fires at once": ("> 900\n    for: 5m", "> 900\n    for: 0s"),
}


@pytest.mark.prometheus
@pytest.mark.slow  # each runs footprint-rules.test.yml, three days of samples: ~10 s
@pytest.mark.parametrize("mutation", list(MUTATIONS), ids=list(MUTATIONS))
def test_unit_tests_catch_a_wrong_rule(mutation: str, tmp_path: Path) -> None:
    assert_unit_tests_catch(MUTATIONS[mutation], FILENAME, tmp_path)


SERIES = re.compile(r"(?<![:\w])(airflow_[a-z0-9_]+)\b")


def test_rules_use_only_the_inventory_s_catalogue_series_and_labels() -> None:
    known = {m.prometheus_name() for m in catalogue.INVENTORY_METRICS}
    recorded = {r["record"] for r in rules() if "record" in r}
    assert recorded == set(RECORDED)
    labels = {catalogue.DAG_ID, catalogue.TASK_ID, catalogue.ASSET, catalogue.STORE, "severity", "cluster"}
    used: set[str] = set()
    for rule in rules():
        text = rule["expr"] + " " + " ".join(rule.get("annotations", {}).values())
        names = set(SERIES.findall(text))
        assert names <= known, rule
        used |= names
        for name in re.findall(r"\b\w+:\w+:\w+\b", rule["expr"]):
            assert name in recorded, (rule, name)
        for by in re.findall(r"\bby \(([^)]*)\)", rule["expr"]):
            assert {label.strip() for label in by.split(",")} <= labels, rule
        assert set(rule.get("labels", {})) <= labels, rule
        # A footprint gauge is only ever read through the max across replicas, by explicit labels:
        # the deployment and the gauge's own tags (no target label a scrape config adds splits it).
        for metric in catalogue.FOOTPRINT_METRICS:
            name = metric.prometheus_name()
            if name in names:
                by = ", ".join(("cluster", *metric.all_tags))
                assert f'max by ({by}) ({name}{{job!=""}})' in rule["expr"], rule
    assert {f"airflow_task_state_store_footprint_{n}" for n in ("entries", "bytes", "expired_entries")} | {
        f"airflow_asset_state_store_footprint_{n}" for n in ("entries", "bytes")
    } | {
        catalogue.INVENTORY_UP.prometheus_name(),
        catalogue.INVENTORY_FOOTPRINT_AGE.prometheus_name(),
        catalogue.INVENTORY_QUERY_DURATION.prometheus_name(),
    } <= used
    alerts = [r for r in rules() if "alert" in r]
    assert {a["alert"] for a in alerts} == ALERTS
    for alert in alerts:
        assert alert["labels"]["severity"] == "warning" and alert["for"]
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
        assert alert["annotations"]["runbook_url"].endswith(f"/runbooks/{alert['alert'].lower()}/")


def test_prometheus_scrapes_the_inventory_and_loads_the_rules() -> None:
    config = yaml.safe_load((COLLECTOR / "prometheus.yml").read_text())
    assert FILENAME in config["rule_files"]
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "store-metrics-inventory"]
    targets = [t for c in job["static_configs"] for t in c["targets"]]
    assert targets and all(t.endswith(f":{options.default('inventory_port')}") for t in targets)


@pytest.mark.prometheus
def test_prometheus_config_with_the_inventory_job_passes_promtool() -> None:
    checked = promtool("check", "config", "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"Checking {FILENAME}" in checked.stdout


def test_statsd_exporter_mapping_gives_every_gauge_its_prometheus_name() -> None:
    doc = yaml.safe_load(MAPPING.read_text())
    assert set(doc) == {"mappings"}
    mappings = {m["match"]: m for m in doc["mappings"]}
    assert set(mappings) == {m.full_name() for m in catalogue.INVENTORY_METRICS}
    for metric in catalogue.INVENTORY_METRICS:
        entry = mappings[metric.full_name()]
        assert entry == {
            "match": metric.full_name(),
            "match_metric_type": "gauge",
            "name": metric.prometheus_name(),
            "help": metric.description,
            "ttl": "10m",
        }
    names = {m["name"] for m in mappings.values()}
    # The unit suffixes the scrape endpoint and the OpenTelemetry path write.
    assert "airflow_task_state_store_footprint_oldest_age_seconds" in names
    assert "airflow_state_store_inventory_query_duration_milliseconds" in names
    assert "airflow_asset_state_store_footprint_bytes" in names
    assert "airflow_state_store_inventory_up" in names
