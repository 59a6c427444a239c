"""API server rules and statsd_exporter mappings: promtool, mutations the tests catch, catalogue only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from support.promtool import assert_unit_tests_catch, promtool
from testbed.repository import ROOT

COLLECTOR = ROOT / "collector"
RULES = COLLECTOR / "server-rules.yml"
RULES_TEST = COLLECTOR / "server-rules.test.yml"
MAPPING = COLLECTOR / "statsd-mapping-server.yml"


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


@pytest.mark.prometheus
def test_promtool_checks_and_unit_tests_pass() -> None:
    checked = promtool("check", "rules", "server-rules.yml")
    assert checked.returncode == 0 and f"SUCCESS: {len(rules())} rules found" in checked.stdout, (
        checked.stdout
    )
    tested = promtool("test", "rules", "server-rules.test.yml")
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    config = promtool("check", "config", "prometheus.yml")
    assert config.returncode == 0 and "server-rules.yml" in config.stdout, config.stdout + config.stderr


#: Plausible mistakes in server-rules.yml; each must make `promtool test rules` fail.
MUTATIONS = {
    "stalled ratio in ms, not a share": ("[5m])) / 1000", "[5m]))"),
    "only the Go spelling of le": ('le=~"100(\\\\.0)?"', 'le="100"'),
    "long stalls counted below the threshold": ('le=~"100(\\\\.0)?"', 'le=~"250(\\\\.0)?"'),
    "stall alert threshold 10x too high": ("ratio_rate5m > 0.05", "ratio_rate5m > 0.5"),
    "stall alert fires at once": ("for: 10m", "for: 1m"),
    "long-stall alert fires at once": ("for: 15m", "for: 1m"),
    "requests split by worker": (
        "sum by (cluster, job, store, operation, outcome)",
        "sum by (cluster, job, store, operation, outcome, worker)",
    ),
    "duration buckets added up across bounds": ("value_size, le) (rate(", "value_size) (rate("),
    "largest stall from the calmest worker": (
        "max by (cluster, job, instance, worker)",
        "min by (cluster, job, instance, worker)",
    ),
    "long stalls by route split by worker": (
        "sum by (cluster, job, store, operation) (rate(",
        "sum by (cluster, job, store, operation, worker) (rate(",
    ),
}


@pytest.mark.prometheus
@pytest.mark.parametrize("mutation", list(MUTATIONS), ids=list(MUTATIONS))
def test_unit_tests_catch_a_wrong_rule(mutation: str, tmp_path: Path) -> None:
    assert_unit_tests_catch(MUTATIONS[mutation], "server-rules.yml", tmp_path)


SERIES = re.compile(r"(?<![:\w])(airflow_[a-z0-9_]+)\b")


def test_rules_use_only_server_catalogue_series_and_labels() -> None:
    known: set[str] = set()
    for metric in catalogue.SERVER_METRICS:
        name = metric.prometheus_name()
        known |= (
            {name, f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            if metric.kind.value == "histogram"
            else {name}
        )
    recorded = {r["record"] for r in rules() if "record" in r}
    labels = {
        "le",
        "severity",
        "cluster",
        "job",
        "instance",  # per worker: two pods' workers with the same label (worker_label = slot) stay apart
        *catalogue.SERVER_REQUESTS.tags,
        *catalogue.SERVER_DURATION.tags,
    }
    for rule in rules():
        text = rule["expr"] + " " + " ".join(rule.get("annotations", {}).values())
        assert set(SERIES.findall(text)) <= known, rule
        for name in re.findall(r"\b\w+:\w+:\w+\b", rule["expr"]):
            assert name in recorded, (rule, name)
        for by in re.findall(r"by \(([^)]*)\)", rule["expr"]):
            assert {label.strip() for label in by.split(",")} <= labels, rule
        assert set(rule.get("labels", {})) <= labels, rule
    alerts = [r for r in rules() if "alert" in r]
    assert {a["alert"] for a in alerts} == {"StateStoreApiServerLoopStalled", "StateStoreApiServerLongStalls"}
    for alert in alerts:
        assert alert["labels"]["severity"] == "warning" and alert["for"]
        # The runbook says what to do when it fires (tests/docs/test_alerts_docs.py checks the pages).
        assert alert["annotations"]["runbook_url"].endswith(f"/runbooks/{alert['alert'].lower()}/")


def test_statsd_exporter_mapping_gives_the_opentelemetry_names_and_buckets() -> None:
    doc = yaml.safe_load(MAPPING.read_text())
    assert set(doc) == {"mappings"}
    mappings = {m["match"]: m for m in doc["mappings"]}
    assert set(mappings) == {m.full_name() for m in catalogue.SERVER_METRICS}
    for metric in catalogue.SERVER_METRICS:
        entry = mappings[metric.full_name()]
        assert entry["name"] == metric.prometheus_name() and entry["help"] == metric.description
        assert "*" not in entry["match"] and "labels" not in entry  # the tags are the labels
        if metric.kind is catalogue.Kind.HISTOGRAM:
            assert entry["match_metric_type"] == "observer" and entry["observer_type"] == "histogram"
            assert entry["histogram_options"] == {"buckets": [float(b) for b in metric.buckets]}
        elif metric.kind is catalogue.Kind.GAUGE:
            assert entry["match_metric_type"] == "gauge" and entry["ttl"] == "10m"
        else:
            assert entry["match_metric_type"] == "counter"
        if metric.kind is not catalogue.Kind.GAUGE:
            # A restarted worker's series go away after a day without updates (statsd_ttl).
            assert entry["ttl"] == "25h"
