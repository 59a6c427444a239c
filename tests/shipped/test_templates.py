"""The shipped pipeline files are data: templates in the package, the dashboards' built by generators/.

* the dashboard templates (Grafana, Datadog) are exactly what the development-time generators
  (``generators/``, not installed) build, with every catalogue name turned into its token;
* every template in the package is written by ``export`` (none forgotten), and a token is renamed
  exactly: the Prometheus name, the dotted name, or a value the caller passes; an unknown one fails.
"""

from __future__ import annotations

import re

import pytest

import store_metrics
from generators import templates as generated
from generators.tokens import SENTINEL, tokenize
from store_metrics import catalogue
from store_metrics.shipped import export, records, rule_test_files, rules, settings, templating
from store_metrics.shipped.rules import GENERATED_RECORDS

#: The values export computes for a template (rules.yml's generated recording rules).
COMPUTED = {
    *rules.values("airflow", settings.values()),
    "collector_filter",
    *rule_test_files.server_values("airflow", settings.values()),
}


def test_the_dashboard_templates_are_what_the_generators_build() -> None:
    built = generated.build()
    assert built, "no generated template"
    for name, text in built.items():
        assert templating.source(name) == text, f"{name} is out of date: run scripts/dashboards"


def test_every_template_is_exported() -> None:
    # helm.py and kubernetes.py render their own templates (export.WRAPPERS), around the others' text.
    wrapped = {n for n in templating.template_names() if n.startswith(("helm/", "kubernetes/"))}
    assert wrapped
    assert set(export.TEMPLATES.values()) | wrapped == set(templating.template_names())
    with pytest.raises(KeyError, match="unknown token @collector_filter@"):
        templating.render("otel-collector.yaml", "airflow", {})  # its filter value not given
    # The promtool tests generated for the export's settings (rule_test_files) are written too.
    assert set(export.TEMPLATES) | set(export.TESTS) == set(export.FILES)
    assert export.COLLECTOR / "rules.test.yml" in export.TESTS


def test_tokens_rename_catalogue_names_exactly() -> None:
    text = tokenize(f"x {SENTINEL}_task_state_store_write_total {SENTINEL}.asset_state_store.error y")
    assert text == "x @task_state_store.write@ @full:asset_state_store.error@ y"
    with pytest.raises(ValueError, match="not a catalogue name"):
        tokenize(f"{SENTINEL}_not_a_metric")
    duration = catalogue.SERVER_DURATION
    assert tokenize(f"{duration.prometheus_name(SENTINEL)}_bucket") == f"@{duration.name}@_bucket"
    calls = f"task:{SENTINEL}_store_metrics_calls:increase"
    assert tokenize(f"sum({calls}[1h])") == "sum(@record:task:store_metrics_calls:increase@[1h])"
    rendered = templating.render("dashboards/store-metrics.json", "myco.airflow", settings.values())
    assert "myco_airflow_task_state_store_footprint_bytes" in rendered
    assert "task:myco_airflow_store_metrics_calls:increase" in rendered
    assert not re.search(r"@[A-Za-z_][A-Za-z0-9_.:]*@", rendered)


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
    # Every setting is used by some template (directly, or through a value derived from it).
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
