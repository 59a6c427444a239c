"""The export settings (store_metrics.shipped.settings): one table, checked values, ``--set`` on the
command line, and every shipped file following a change.

The mixin-style ``_config``: a threshold set once changes the alert, its promtool tests, the
Datadog twin and the dashboards' threshold lines together; a bad value is refused with the setting's
name and what it accepts, before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from store_metrics.shipped import export, settings
from support.exported import run_export
from support.promtool import promtool

COLLECTOR = export.COLLECTOR


def alert(files: dict, name: str) -> dict:
    for path in ("rules.yml", "watcher-rules.yml", "server-rules.yml", "footprint-rules.yml"):
        for group in yaml.safe_load(files[COLLECTOR / path])["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == name:
                    return dict(rule)
    raise AssertionError(name)


def test_every_default_is_valid_and_described() -> None:
    assert settings.resolve() == settings.defaults()
    names = [s.name for s in settings.SETTINGS]
    assert len(names) == len(set(names))
    for setting in settings.SETTINGS:
        assert setting.description.endswith(".") and len(setting.description) > 20, setting.name


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("error_ratio", "5%", "not a ratio"),
        ("error_ratio", "1.5", "not a ratio"),
        ("error_window", "an hour", "not a duration"),
        ("error_min_calls", "-1", "not a count"),
        ("selector", "job=airflow", "not a matchers"),
        ("cluster_label", "my-cluster", "not a label"),
        ("runbook_url_base", "ftp://x", "not a url"),
        ("long_stall_ms", "120", "not a stall bucket bound"),
        ("error_window", "30s", "outside its range, 5m to 1d"),
        ("no_such_setting", "1", "unknown setting"),
        ("collector_resolver", "round-robin", "not a choice \\(one of static, dns, k8s\\)"),
        ("collector_backends", "backend-0:4317 backend-1:4317", "not a endpoints"),
    ],
)
def test_a_bad_value_is_refused_with_its_name(name: str, value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as raised:
        settings.resolve({name: value})
    assert name in str(raised.value)


def test_set_changes_the_alert_its_datadog_twin_and_the_dashboard_lines(tmp_path: Path) -> None:
    done = run_export(
        tmp_path, "--set", "error_ratio=0.1", "--set", "error_window=2h", "--set", "cluster_label=env"
    )
    assert done.returncode == 0, done.stderr
    rules = (tmp_path / "collector" / "rules.yml").read_text()
    assert ") > 0.1\n" in rules and "[2h]" in rules and "by (env, job, dag_id" in rules
    monitor = json.loads((tmp_path / "datadog" / "monitors" / "state-store-error-ratio.json").read_text())
    assert monitor["options"]["thresholds"]["critical"] == 0.1 and monitor["query"].startswith(
        "sum(last_2h):"
    )
    dashboard = json.loads((tmp_path / "dashboards" / "store-metrics.json").read_text())
    steps = [
        step["value"]
        for panel in dashboard["panels"]
        for step in panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])
    ]
    assert 0.1 in steps
    inhibit = yaml.safe_load((tmp_path / "collector" / "alertmanager-inhibit.yml").read_text())
    assert inhibit["inhibit_rules"][0]["equal"] == ["env", "job"]
    stale = run_export(tmp_path, "--check", "--set", "error_ratio=0.2")
    assert stale.returncode == 1 and "--prefix airflow --set error_ratio=0.2" in stale.stderr


def test_a_bad_set_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    done = run_export(tmp_path / "out", "--set", "error_ratio=lots")
    assert done.returncode == 2 and "setting error_ratio: 'lots' is not a ratio" in done.stderr
    assert not (tmp_path / "out").exists()
    assert "expected NAME=VALUE" in run_export(tmp_path / "out", "--set", "error_ratio").stderr


@pytest.mark.prometheus
def test_changed_links_and_scope_keep_the_rules_valid_and_their_tests_passing(tmp_path: Path) -> None:
    """The promtool tests are templates too: the links, the cluster label and the selector they
    expect follow the settings (their thresholds do not: their input series are made for the
    defaults)."""
    changes = {
        "runbook_url_base": "https://wiki.example.com/rb/",
        "grafana_url": "https://grafana.example.com",
        "cluster_label": "env",
        "selector": 'job=~".+"',
    }
    files = export.render_all("airflow", changes)
    for path, text in files.items():
        if path.parent == COLLECTOR:
            (tmp_path / path.name).write_text(text)
    assert alert(files, "StateStoreErrorRateHigh")["annotations"]["runbook_url"] == (
        "https://wiki.example.com/rb/statestoreerrorratehigh/"
    )
    for name in ("rules", "watcher-rules", "server-rules", "footprint-rules"):
        tested = promtool("test", "rules", f"{name}.test.yml", cwd=tmp_path)
        assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_front_collectors_resolver_follows_the_settings() -> None:
    """The loadbalancing exporter's resolver keys (static.hostnames, dns.hostname/port,
    k8s.service/ports) as collector/otel-collector-front.yaml gets them."""

    def resolver(**changes: str) -> dict[str, object]:
        text = export.render_all(changes=changes, tests=False)[COLLECTOR / "otel-collector-front.yaml"]
        return dict(yaml.safe_load(text)["exporters"]["loadbalancing"]["resolver"])

    assert resolver() == {
        "static": {"hostnames": ["otel-collector-backend-0:4317", "otel-collector-backend-1:4317"]}
    }
    assert resolver(collector_backends="a,b:14317") == {"static": {"hostnames": ["a:4317", "b:14317"]}}
    assert resolver(collector_resolver="dns", collector_backends="backends.monitoring.svc") == {
        "dns": {"hostname": "backends.monitoring.svc", "port": "4317"}
    }
    assert resolver(collector_resolver="k8s", collector_backends="backends.monitoring:14317") == {
        "k8s": {"service": "backends.monitoring", "ports": [14317]}
    }


def test_a_resolver_that_takes_one_name_refuses_a_list() -> None:
    with pytest.raises(ValueError, match=r"collector_backends.*names several hosts.*dns takes one name"):
        settings.resolve({"collector_resolver": "dns"})
