"""``store-metrics export --target victoriametrics``, judged by vmalert and vmalert-tool themselves.

The pinned VictoriaMetrics (testbed/peers.py) is where each difference was found; each has a test
here that fails on the Prometheus export (the only one before the target) and passes on the target's:

* MetricsQL has no native-histogram functions: vmalert refuses server-rules.yml as Prometheus gets
  it (``unsupported function "histogram_count"``); the target leaves exactly the native records and
  branches out and loads in vmalert;
* vmalert-tool's own format (``metricsql_expr_test``, each alert test's ``groupname``, the external
  labels on the alerts) and VictoriaMetrics' 12-13 significant digits: every shipped unit test,
  rendered for the target, passes in vmalert-tool; the Prometheus export's fail there;
* every other file, and so every Prometheus user's file, is the Prometheus export's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from store_metrics.shipped import victoriametrics
from support.exported import Exported, run_export
from testbed import peers

pytestmark = pytest.mark.peers

RULE_TESTS = ("rules.test.yml", "server-rules.test.yml", "watcher-rules.test.yml", "footprint-rules.test.yml")
#: The server side's records of native histograms: what the target leaves out.
NATIVE_RECORDS = {
    "store_operation_value_size:airflow_store_metrics_api_request_duration_ms:rate5m",
    "operation:airflow_store_metrics_api_request_size_bytes:rate5m",
    "operation:airflow_store_metrics_api_response_size_bytes:rate5m",
    "worker:airflow_store_metrics_api_loop_stall_ms:rate5m",
    "job:airflow_store_metrics_api_loop_stall_ms:rate5m",
}


@pytest.fixture(scope="module")
def vm_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vm-export") / "out"
    done = run_export(out, "--target", "victoriametrics")
    assert done.returncode == 0, done.stderr
    return out


def vm(program: str) -> str:
    return str(peers.binary(program, "current"))


def run(*cmd: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def records(path: Path) -> set[str]:
    return {
        r["record"] for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"] if "record" in r
    }


def test_vmalert_refuses_the_native_histogram_functions_and_loads_the_target_s_rules(
    exported: Exported, vm_export: Path
) -> None:
    prometheus = exported() / "collector"
    refused = run(vm("vmalert"), "-dryRun", "-rule=server-rules.yml", cwd=prometheus)
    assert refused.returncode != 0
    assert 'unsupported function "histogram_count"' in refused.stdout + refused.stderr
    loaded = run(vm("vmalert"), "-dryRun", "-rule=*rules.yml", cwd=vm_export / "collector")
    assert loaded.returncode == 0, loaded.stdout[-3000:] + loaded.stderr[-3000:]
    # exactly the native records are left out; every classic record is kept
    left_out = records(prometheus / "server-rules.yml") - records(
        vm_export / "collector" / "server-rules.yml"
    )
    assert left_out == NATIVE_RECORDS
    assert "histogram_" not in (vm_export / "collector" / "server-rules.yml").read_text().replace(
        "histogram_quantile", ""
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", RULE_TESTS)
def test_every_shipped_unit_test_passes_in_vmalert_tool(
    name: str, vm_export: Path, exported: Exported
) -> None:
    collector = vm_export / "collector"
    done = run(vm("vmalert-tool"), "unittest", f"--files={name}", cwd=collector)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]
    # the same tests as promtool runs them (every case kept, but the native records' queries)
    theirs = yaml.safe_load((exported() / "collector" / name).read_text())
    ours = yaml.safe_load((collector / name).read_text())
    assert [t.get("name") for t in ours["tests"]] == [t.get("name") for t in theirs["tests"]]
    assert sum(len(t.get("alert_rule_test", [])) for t in ours["tests"]) == sum(
        len(t.get("alert_rule_test", [])) for t in theirs["tests"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rules.test.yml", "watcher-rules.test.yml"])
def test_the_prometheus_export_s_unit_tests_fail_in_vmalert_tool(name: str, exported: Exported) -> None:
    """What the target changes is needed: vmalert-tool refuses promtool's alert tests (no
    ``groupname``) and has no ``promql_expr_test``."""
    done = run(vm("vmalert-tool"), "unittest", f"--files={name}", cwd=exported() / "collector")
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "field promql_expr_test not found" in said or 'missing required field "groupname"' in said, said


def test_alert_tests_name_their_group_and_carry_the_external_labels(vm_export: Path) -> None:
    collector = vm_export / "collector"
    document = yaml.safe_load((collector / "rules.test.yml").read_text())
    groups = {
        r["alert"]: g["name"]
        for g in yaml.safe_load((collector / "rules.yml").read_text())["groups"]
        for r in g["rules"]
        if "alert" in r
    }
    labelled = 0
    for test in document["tests"]:
        assert "promql_expr_test" not in test
        for case in test.get("alert_rule_test", []):
            assert case["groupname"] == groups[case["alertname"]]
            for alert in case.get("exp_alerts", []):
                for name, value in test.get("external_labels", {}).items():
                    assert alert["exp_labels"][name] == value
                    labelled += 1
    assert labelled  # the cluster external label of the one test that sets it


def test_query_tests_compare_at_the_storage_s_precision(vm_export: Path) -> None:
    document = yaml.safe_load((vm_export / "collector" / "server-rules.test.yml").read_text())
    cases = [case for test in document["tests"] for case in test.get("metricsql_expr_test", [])]
    assert cases and all(c["expr"].endswith(", 1e-09) keep_metric_names") for c in cases)
    # a rate of 20 long stalls a minute, as promtool expects it and as VictoriaMetrics reads it back
    assert victoriametrics.go_round(20 / 60) == 0.333333333
    assert victoriametrics.go_round(-2.5e-10) == 0.0


def test_prometheus_users_files_do_not_change(exported: Exported, vm_export: Path) -> None:
    """Only the rule files and their tests (and the Kubernetes objects wrapping the rules) differ."""
    prometheus = exported()
    theirs = {p.relative_to(prometheus) for p in prometheus.rglob("*") if p.is_file()}
    ours = {p.relative_to(vm_export) for p in vm_export.rglob("*") if p.is_file()}
    assert ours == theirs
    differ = {p for p in theirs if (prometheus / p).read_bytes() != (vm_export / p).read_bytes()}
    assert all(p.name.endswith(("rules.yml", "rules.test.yml", "rules.yaml")) for p in differ), differ


def test_an_unknown_target_is_refused_naming_the_accepted_ones(tmp_path: Path) -> None:
    done = run_export(tmp_path / "out", "--target", "thanos")
    assert done.returncode == 2
    assert "invalid --target 'thanos'" in done.stderr
    assert "prometheus, victoriametrics" in done.stderr
    assert not (tmp_path / "out").exists()
