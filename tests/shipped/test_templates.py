"""The shipped pipeline files: templates in the package, and the dashboards built at export time.

* the Grafana dashboard and the Datadog dashboard and monitors are built by the package
  (``store_metrics.shipped.grafana``, ``store_metrics.shipped.datadog``) for the export's prefix and
  settings, a setting written as a JSON number exactly as given;
* every template in the package is written by ``export`` (none forgotten), and a token is renamed
  exactly: the Prometheus name, the dotted name, or a value the caller passes; an unknown one fails;
* every export setting is used by a template or a builder.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

import pytest

import store_metrics
from store_metrics import catalogue
from store_metrics.shipped import (
    export,
    records,
    rule_test_files,
    rules,
    settings,
    statsd_mappings,
    templating,
)
from store_metrics.shipped.render_context import JsonNumber, RenderContext, dumps
from store_metrics.shipped.rules import GENERATED_RECORDS

#: The values export computes for a template (rules.yml's generated recording rules, the statsd
#: mappings' lists).
COMPUTED = {
    *rules.values("airflow", settings.values()),
    "collector_filter",
    statsd_mappings.TOKEN,
    *rule_test_files.server_values("airflow", settings.values()),
}


class _ReadSettings(dict[str, str]):
    """Settings' values that remember which ones a builder read."""

    def __init__(self, values: dict[str, str]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.read.add(name)
        return super().__getitem__(name)


def _exported(prefix: str, changes: dict[str, str]) -> dict[PurePosixPath, str]:
    return export.render_all(prefix, changes, tests=False)


def test_the_dashboards_are_built_for_the_export_s_prefix_and_settings() -> None:
    files = _exported("myco.airflow", {"error_ratio": "0.2", "datadog_env_tag": "stage"})
    grafana = files[export.DASHBOARDS / "store-metrics.json"]
    assert "task:myco_airflow_store_metrics_calls:increase" in grafana
    assert "myco_airflow_task_state_store_footprint_bytes" in grafana
    assert "myco_airflow_task_state_store_write_total" in grafana  # the exemplars' raw counters
    datadog = [text for path, text in files.items() if path.parts[0] == str(export.DATADOG)]
    assert len(datadog) == 1 + len(export.BUILT) - 2  # the dashboard and every monitor
    assert all(":myco.airflow." in text for text in datadog)
    for text in [grafana, *datadog]:
        json.loads(text)
        assert not re.search(r"(?<![\w.])airflow[._](?:task|asset)_state_store", text)  # no other prefix
        assert not re.search(r"@[A-Za-z_][A-Za-z0-9_.:]*@", text)  # no placeholder left
    error_ratio = next(p for p in json.loads(grafana)["panels"] if p["title"] == "Error ratio")
    assert error_ratio["fieldConfig"]["defaults"]["thresholds"]["steps"][1] == {"color": "red", "value": 0.2}
    monitor = json.loads(files[export.DATADOG / "monitors" / "state-store-error-ratio.json"])
    assert monitor["options"]["thresholds"] == {"critical": 0.2}
    assert monitor["query"].endswith(" > 0.2") and "by {stage,dag_id}" in monitor["query"]


def test_a_setting_written_as_a_json_number_keeps_its_text() -> None:
    assert dumps({"critical": JsonNumber("0.050"), "text": "0.050"}) == (
        '{\n  "critical": 0.050,\n  "text": "0.050"\n}\n'
    )
    with pytest.raises(ValueError, match="not a JSON number"):
        JsonNumber("5m")
    ctx = RenderContext()
    with pytest.raises(ValueError, match="export setting error_window: '1h' is not a number"):
        ctx.number("error_window")
    with pytest.raises(KeyError, match="no export setting 'threshold'"):
        ctx.setting("threshold")


def test_every_template_is_exported() -> None:
    # helm.py and kubernetes.py render their own templates (export.WRAPPERS), around the others' text.
    wrapped = {n for n in templating.template_names() if n.startswith(("helm/", "kubernetes/"))}
    assert wrapped
    assert set(export.TEMPLATES.values()) | wrapped == set(templating.template_names())
    with pytest.raises(KeyError, match="unknown token @collector_filter@"):
        templating.render("otel-collector.yaml", "airflow", {})  # its filter value not given
    # The dashboards and monitors are built (no template of theirs), the promtool tests generated
    # for the export's settings (rule_test_files): both are written too.
    assert not {str(path) for path in export.BUILT} & set(templating.template_names())
    assert set(export.TEMPLATES) | set(export.BUILT) | set(export.TESTS) == set(export.FILES)
    assert export.COLLECTOR / "rules.test.yml" in export.TESTS


def test_every_token_of_every_template_is_a_catalogue_name_or_a_setting() -> None:
    values = settings.values()
    names = {m.name for m in catalogue.ALL_METRICS}
    used: set[str] = set()
    recorded = {
        token
        for name in templating.template_names()
        for token in re.findall(r"- record: @(record:[a-z0-9_:]+)@", templating.source(name))
    }
    for name in templating.template_names():
        if name.startswith(("helm/", "kubernetes/")):
            continue  # helm.py's and kubernetes.py's own values (test_helm.py, test_kubernetes.py)
        for token in re.findall(r"@([A-Za-z_][A-Za-z0-9_.:]*)@", templating.source(name)):
            used.add(token)
            if token == f"{records.TOKEN}...":  # rules.yml's header says how a template writes one
                continue
            if token.startswith(records.TOKEN):  # a recorded series: one a rule file records
                base = token.removeprefix(records.TOKEN)
                assert token in recorded or base in GENERATED_RECORDS, (name, token)
                continue
            if token.startswith("buckets:"):  # a histogram's buckets from a recorded native histogram
                metric, _, base = token.removeprefix("buckets:").partition(":")
                assert catalogue.get(metric).buckets and f"{records.TOKEN}{base}" in recorded, (name, token)
                continue
            metric = token.removeprefix("full:")
            assert metric in names or token in values or token in COMPUTED, (name, token)
    # Every setting is used by some template or builder (directly, or through a value derived from it).
    read = _ReadSettings(values)
    for build in export.BUILT.values():
        build(RenderContext("airflow", read))
    used |= read.read
    for derived, sources in settings.DERIVED_FROM.items():
        if derived in used:
            used |= set(sources)
    for setting in settings.SETTINGS:
        assert any(t == setting.name or t.startswith(f"{setting.name}_") for t in used), setting.name
    assert not names & set(values), "a setting named like a catalogue metric"


def test_the_shipped_provider_info_is_what_the_option_table_builds() -> None:
    """Airflow reads it in every process: the wheel ships data, built from options.py."""
    from generators import provider_info as generator
    from store_metrics.integration import provider_info

    assert generator.SHIPPED.read_text(encoding="utf-8") == generator.text()
    info = provider_info.get_provider_info()
    assert info["versions"] == [store_metrics.__version__]
    assert {k: v for k, v in info.items() if k != "versions"} == generator.build()


def test_native_buckets_are_spelled_as_go_exporters_write_le() -> None:
    """Go's shortest float formatting (client_golang, statsd_exporter, the Collector), which
    Prometheus 2 stores as it comes: whole numbers below 1e6 as they are, an exponent from 1e6 on
    (Prometheus 3 stores 1024 as 1024.0 and the same exponent form, which the bar panels fold)."""
    spelled = {
        b: templating.go_float(b) for b in (*catalogue.SIZE_BUCKETS_BYTES, *catalogue.STALL_BUCKETS_MS)
    }
    assert spelled[64.0] == "64" and spelled[262144.0] == "262144" and spelled[2.5] == "2.5"
    assert spelled[1048576.0] == "1.048576e+06" and spelled[16777216.0] == "1.6777216e+07"
    assert templating.go_float(1_000_000) == "1e+06" and templating.go_float(10000) == "10000"
    expanded = templating.fill(
        "@buckets:api_server.event_loop.stall:job:store_metrics_api_loop_stall_ms:rate5m@", "myco.airflow", {}
    )
    recorded = "job:myco_airflow_store_metrics_api_loop_stall_ms:rate5m"
    assert expanded.count(f"histogram_count({recorded})") == len(catalogue.STALL_BUCKETS_MS) + 1
    assert [f'"le", "{templating.go_float(b)}"' in expanded for b in catalogue.STALL_BUCKETS_MS] == [
        True
    ] * 12
    assert "histogram_fraction(-Inf, 2.5, " in expanded and '"le", "+Inf"' in expanded
    with pytest.raises(KeyError, match="unknown token"):
        templating.fill("@buckets:api_server.event_loop.stall.max:job:store_metrics_x:rate5m@", "airflow", {})
