"""The exported promtool tests (rules.test.yml, watcher-, server- and footprint-rules.test.yml) pass
on the real promtool for the settings they are exported with (tests/shipped/test_rule_tests_on_every_pin.py
runs every exported file at the defaults, on every pin).

Pins (testbed/peers.py): Prometheus 3 newest and LTS, and the 2.x minimum (Debian's 2.42). The
settings table holds the docs' examples (docs/alerts.md), the settings the issue found failing
(rule_interval=2m, long_stall_ms=250) and both ends of the documented range of every setting the
test files are written for (others at their defaults); their expected values are worked out from
each scenario (store_metrics.shipped.rule_test_files), never copied from a run.

A row takes 5-60 s (an export, then promtool over a day or a week of samples), so the suite runs the
docs' examples (all four files) on every pin and a sample of rows on the newest pin (CI_ROWS); a row
runs the test files its settings change (a file whose text and rule files are the default export's is
the default's run, on every pin). ``STORE_METRICS_RULE_TABLE=all`` runs every row on every pin.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path, PurePosixPath

import pytest

from store_metrics.shipped import export, settings
from support.promtool import promtool_each
from testbed.repository import ROOT

pytestmark = pytest.mark.peers

ROLES = ("newest", "lts", "minimum")

#: The settings the test files are written for (their scenarios' steps, windows, floors, thresholds).
GENERATED_FOR = (
    "rule_interval",
    "rule_offset",
    "counter_lookback",
    "error_ratio",
    "error_min_calls",
    "error_window",
    "error_for",
    "failing_ratio",
    "failing_min_calls",
    "failing_window",
    "failing_for",
    "never_read_window",
    "never_read_for",
    "retry_start_over_ratio",
    "retry_min_attempts",
    "retry_window",
    "missing_window",
    "missing_for",
    "hygiene_interval",
    "loop_stalled_ratio",
    "loop_stalled_for",
    "long_stall_ms",
    "long_stalls_per_minute",
    "long_stalls_for",
    "retention_window",
    "retention_for",
    "inventory_down_for",
    "inventory_stale_after",
    "inventory_stale_for",
)
#: The docs' examples (docs/alerts.md): a prefix, a deployment label, a threshold, a job selector.
EXAMPLES: dict[str, tuple[str, dict[str, str]]] = {
    "docs: prefix, cluster_label, error_ratio": (
        "myco.airflow",
        {"cluster_label": "env", "error_ratio": "0.1"},
    ),
    "docs: a job selector": ("airflow", {"selector": 'job=~"airflow-statsd|store-metrics-.*"'}),
}


def _bounds() -> dict[str, tuple[str, dict[str, str]]]:
    rows: dict[str, tuple[str, dict[str, str]]] = {}
    for setting in settings.SETTINGS:
        if setting.name not in GENERATED_FOR:
            continue
        for value in (setting.low, setting.high):
            try:
                settings.resolve({setting.name: value})
            except ValueError:
                continue  # an end another setting's default contradicts (error_for 1d > error_window 1h)
            rows[f"{setting.name}={value}"] = ("airflow", {setting.name: value})
    return rows


#: A common scrape interval as the rule interval: every scenario at four times the default's steps;
#: and the settings issue 28 found the shipped tests failing for (the watchers' evaluated each minute
#: counting calls twice; the server's long stalls at the default bucket).
COMMON = {
    "rule_interval=15s": ("airflow", {"rule_interval": "15s"}),
    "rule_interval=2m": ("airflow", {"rule_interval": "2m"}),
    "long_stall_ms=250": ("airflow", {"long_stall_ms": "250"}),
}
TABLE = {**EXAMPLES, **COMMON, **_bounds()}
#: The rows the suite runs besides the examples: the issue's (rule_interval=2m a long step), a common
#: step, and the longest windows (the most samples; those longer than promtool can hold are left out
#: of the file, which says so).
CI_ROWS = (
    "rule_interval=2m",
    "long_stall_ms=250",
    "rule_interval=15s",
    "error_window=1d",
    "never_read_window=7d",
    "retry_window=7d",
    "missing_window=7d",
)
WHOLE_TABLE = os.environ.get("STORE_METRICS_RULE_TABLE") == "all"


@pytest.mark.slow  # an export and three promtools per row: 2-60 s each
@pytest.mark.parametrize("row", list(TABLE), ids=list(TABLE))
def test_the_generated_rule_tests_pass_for_the_settings_they_are_exported_with(
    row: str, tmp_path: Path
) -> None:
    if not WHOLE_TABLE and row not in EXAMPLES and row not in CI_ROWS:
        pytest.skip("a range end outside the suite's sample: STORE_METRICS_RULE_TABLE=all runs it")
    prefix, changes = TABLE[row]
    files = _collector(export.render_all(prefix, changes))
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    names = sorted(name for name in files if name.endswith(".test.yml"))
    assert len(names) == 4, names
    if row not in EXAMPLES:
        names = [name for name in names if _changed(name, files, _default_files())]
    runs = [
        (role, ("test", "rules", name))
        for role in (ROLES if (WHOLE_TABLE or row in EXAMPLES) else ("newest",))
        for name in names
    ]
    for (role, (*_, name)), result in zip(runs, promtool_each(runs, cwd=tmp_path), strict=True):
        assert result.returncode == 0, f"{role} {row} {name}:\n{result.stdout[-4000:]}{result.stderr[-2000:]}"


def _collector(files: dict[PurePosixPath, str]) -> dict[str, str]:
    return {p.name: t for p, t in files.items() if p.parent == export.COLLECTOR and p.suffix == ".yml"}


@functools.cache
def _default_files() -> dict[str, str]:
    return _collector(export.render_all("airflow", {}))


def _changed(name: str, files: dict[str, str], default: dict[str, str]) -> bool:
    """Whether test file ``name`` or a rule file it loads differs from the default export's."""
    loads = re.findall(r"^  - (\S+\.yml)$", files[name].split("evaluation_interval:")[0], flags=re.M)
    assert loads, name
    return any(files[n] != default.get(n) for n in (name, *loads))


def test_contradicting_settings_are_refused_naming_both() -> None:
    for changes, both in (
        ({"error_for": "2h"}, ("error_for", "error_window")),
        ({"missing_for": "1d", "missing_window": "1h"}, ("missing_for", "missing_window")),
        ({"inventory_down_for": "1h", "missing_window": "1h"}, ("inventory_down_for", "missing_window")),
        ({"inventory_down_for": "54m", "missing_window": "1h"}, ("inventory_down_for", "missing_window")),
        ({"rule_interval": "5m", "counter_lookback": "5m", "error_window": "5m", "rule_offset": "5m"}, None),
        ({"inventory_down_for": "53m", "missing_window": "1h"}, None),
    ):
        if both is None:
            export.render_all(changes=changes, tests=False)  # no contradiction
            continue
        with pytest.raises(ValueError, match=f"^setting {both[0]}: ") as refused:
            export.render_all(changes=changes, tests=False)
        assert all(f"setting {name}" in str(refused.value) for name in both), refused.value
    with pytest.raises(ValueError, match="long_stall_ms: 200 is not a stall bucket bound"):
        export.render_all(changes={"long_stall_ms": "200"}, tests=False)


def test_the_suites_sample_of_range_ends_is_in_the_table() -> None:
    assert set(CI_ROWS) <= set(TABLE), set(CI_ROWS) - set(TABLE)


def test_a_window_longer_than_promtool_holds_is_left_out_and_said() -> None:
    """never_read_window 7d at the default 1m rule_interval is 10,080 steps: promtool's rule tests
    load at most 10,000 samples a query, so that scenario is not written, and the file says why.
    At the defaults every scenario is written."""
    tested = export.render_all("airflow", {"never_read_window": "7d"})[export.COLLECTOR / "rules.test.yml"]
    header = tested.split("rule_files:")[0]
    assert "Not generated for these settings" in header
    assert (
        "StateStoreTaskStateNeverRead: never_read_window 7d, never_read_for 1h at rule_interval 1m" in header
    )
    assert "alertname: StateStoreTaskStateNeverRead" not in tested
    assert "alertname: StateStoreMetricsMissing" in tested
    default = export.render_all("airflow", {})[export.COLLECTOR / "rules.test.yml"]
    assert "Not generated" not in default
    assert "alertname: StateStoreTaskStateNeverRead" in default


def test_the_footprint_and_watcher_tests_say_which_scenarios_promtool_cannot_hold() -> None:
    """retention_window 7d is 10,080 evaluations a minute apart (the footprint tests evaluate every
    minute); error_window 1d at a 5s rule_interval is 17,351 steps: each scenario is left out and
    its file says why. At the defaults every scenario is written."""
    cases = (
        (
            {"retention_window": "7d"},
            "footprint-rules.test.yml",
            "StateStoreRetentionNotApplied: retention_window 7d",
        ),
        (
            {"rule_interval": "5s", "error_window": "1d"},
            "watcher-rules.test.yml",
            "StateStoreWatcherErrorRateHigh: error_window 1d, error_for 5m at rule_interval 5s",
        ),
    )
    for changes, name, reason in cases:
        tested = export.render_all("airflow", changes)[export.COLLECTOR / name]
        header = tested.split("rule_files:")[0]
        assert "Not generated for these settings" in header and reason in header, header
        alert = reason.split(":")[0]
        assert f"- name: '{alert}:" not in tested  # its scenarios' groups
        default = export.render_all("airflow", {})[export.COLLECTOR / name]
        assert "Not generated" not in default and f"- name: '{alert}:" in default


def test_an_alert_link_names_the_deployment_from_prometheus_external_label() -> None:
    """Where no series carries the deployment label (Prometheus adds it as an external label), the
    dashboard link still opens that deployment: the burst scenario runs with ``cluster: prod`` as an
    external label, and every exported alert link reads the label, else the external label."""
    tested = (ROOT / "collector" / "rules.test.yml").read_text()
    assert "external_labels:\n      cluster: 'prod'" in tested
    assert "?var-cluster=prod&var-job=airflow&var-dag_id=hourly'" in tested
    for name in ("rules.yml", "watcher-rules.yml", "server-rules.yml", "footprint-rules.yml"):
        links = re.findall(r"dashboard_url: '[^']*'", (ROOT / "collector" / name).read_text())
        assert links and all(
            "var-cluster={{ or $labels.cluster $externalLabels.cluster }}" in link for link in links
        ), name
