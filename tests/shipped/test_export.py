"""``store-metrics export``: the repository's files are its output, and it works for any prefix.

* ``collector/``, ``dashboards/``, ``helm/``, ``datadog/`` and ``kubernetes/`` hold, byte for byte,
  what ``export`` writes for the default prefix, and nothing else it would not write;
* for another prefix (``myco.airflow``) the rules (task side, API server, asset watchers,
  footprint) pass
  ``promtool check rules`` and their unit tests pass ``promtool test rules``, the Prometheus config
  passes ``promtool check config``, every query of the rules and the dashboard names only
  ``myco_airflow_`` series, and the statsd_exporter mappings (the inventory's too) map
  ``myco.airflow.`` names to them;
* the YAML writer (the package does not depend on PyYAML) writes what PyYAML writes;
* ``export`` loads no optional library, and (slow) works from a wheel installed alone in a fresh
  venv, outside the repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from store_metrics.shipped import export
from support.exported import OTHER_PREFIX, run_export
from support.promtool import promtool
from testbed.repository import ROOT

PREFIX = OTHER_PREFIX
SERIES_PREFIX = "myco_airflow_"
#: The rule files ``export`` writes (in collector/), each with its promtool tests ``<name>.test.yml``.
RULE_FILES = ("rules.yml", "server-rules.yml", "watcher-rules.yml", "footprint-rules.yml")
MAPPING_FILES = ("statsd-mapping.yml", "statsd-mapping-server.yml", "statsd-mapping-inventory.yml")
#: What ``export`` must never import: the backends' libraries, Airflow, and PyYAML (not a dependency).
OPTIONAL = ("opentelemetry", "datadog", "statsd", "airflow", "prometheus_client", "requests", "grpc", "yaml")


# -- the repository's files -----------------------------------------------------------------------


def test_repository_files_are_exactly_what_export_writes(tmp_path: Path) -> None:
    done = run_export(tmp_path / "out")
    assert done.returncode == 0, done.stderr
    written = sorted(p.relative_to(tmp_path / "out") for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert [PurePosixPath(p.as_posix()) for p in written] == sorted(export.render_all())
    for relative in written:
        repo_file = ROOT / relative
        assert repo_file.is_file(), (
            f"{relative} is missing from the repository: run store-metrics export --out ."
        )
        assert repo_file.read_bytes() == (tmp_path / "out" / relative).read_bytes(), (
            f"{relative} differs from `store-metrics export --out .` (change store_metrics.shipped)"
        )


def test_the_repository_holds_no_generated_file_export_does_not_write() -> None:
    present = {
        PurePosixPath(p.relative_to(ROOT).as_posix())
        for folder in export.FOLDERS
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert present == set(export.render_all())


def test_check_reports_a_stale_file_and_a_bad_prefix(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_export(out, "--check").returncode == 1  # nothing written yet
    assert run_export(out).returncode == 0
    assert run_export(out, "--check").returncode == 0
    rules_file = out / "collector" / "rules.yml"
    rules_file.write_text(rules_file.read_text().replace("> 0.05", "> 0.5"))
    stale = run_export(out, "--check")
    assert stale.returncode == 1 and str(rules_file) in stale.stderr
    assert run_export(out, "--check", "--prefix", PREFIX).returncode == 1  # other prefix, other files
    bad = run_export(tmp_path / "bad", "--prefix", "1bad..prefix")
    assert bad.returncode == 2 and "invalid metric prefix" in bad.stderr
    assert not (tmp_path / "bad").exists()


def test_empty_prefix_is_allowed(tmp_path: Path) -> None:
    assert run_export(tmp_path / "out", "--prefix", "").returncode == 0
    text = (tmp_path / "out" / "collector" / "rules.yml").read_text()
    assert 'last_over_time(task_state_store_write_total{job!=""}[1h] offset 90s)' in text
    footprint = (tmp_path / "out" / "collector" / "footprint-rules.yml").read_text()
    assert '(max by (cluster, dag_id, task_id) (task_state_store_footprint_entries{job!=""}))' in footprint


# -- another prefix -----------------------------------------------------------------------------------


@pytest.mark.prometheus
@pytest.mark.parametrize("rules_file", RULE_FILES)
def test_custom_prefix_rules_pass_promtool(custom: Path, rules_file: str) -> None:
    collector = custom / "collector"
    tests_file = rules_file.replace(".yml", ".test.yml")
    count = sum(len(g["rules"]) for g in yaml.safe_load((collector / rules_file).read_text())["groups"])
    checked = promtool("check", "rules", rules_file, cwd=collector)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {count} rules found" in checked.stdout
    tested = promtool("test", "rules", tests_file, cwd=collector)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


@pytest.mark.prometheus
def test_custom_prefix_prometheus_config_passes_promtool(custom: Path) -> None:
    checked = promtool("check", "config", "prometheus.yml", cwd=custom / "collector")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 4 rule files found" in checked.stdout
    for name in RULE_FILES:
        assert f"Checking {name}" in checked.stdout


KEYWORDS = {"and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring", "group_left"}
KEYWORDS |= {"Inf", "NaN"}  # number literals


def series_in(expr: str) -> set[str]:
    """The series names a PromQL expression selects (recorded ones included), Grafana variables aside."""
    names = {
        alternative
        for pattern in re.findall(r'__name__=~"([^"]*)"', expr)
        for alternative in pattern.replace("\\", "").split("|")
    }
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    bare = re.sub(r"\{[^}]*\}", " ", bare)  # label matchers
    bare = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    bare = re.sub(r"\[[^\]]*\]", " ", bare)  # ranges
    bare = re.sub(r"\$\w+", " ", bare)  # Grafana variables
    for name in re.findall(r"(?<![\w.])([A-Za-z_:][\w:]*)\b(?!\s*\()", bare):
        if name not in KEYWORDS:
            names.add(name)
    return names


def dashboard_exprs(doc: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard: panel targets (also in collapsed rows), variables."""
    exprs: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            exprs.extend(target["expr"] for target in panel.get("targets", []))
            walk(panel.get("panels", []))

    walk(doc["panels"])
    for variable in doc["templating"]["list"]:
        if variable["type"] == "query":  # label_values(<selector>, <label>): the selector
            selector = re.fullmatch(r"label_values\((.*), \w+\)", variable["query"])
            assert selector, variable["query"]
            exprs.append(selector.group(1))
    return exprs


def rule_exprs(path: Path) -> list[str]:
    return [r["expr"] for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]]


def test_series_in_finds_what_the_queries_select() -> None:
    expr = (
        'sum by (dag_id) (rate(a_total{dag_id=~"$dag_id"}[$__rate_interval])) or '
        'label_replace(b_total offset 1h, "x", "1", "", "") / c:d:rate5m + '
        'group by (le) ({__name__=~"e_total|f_total",team=~"$team_name"})'
    )
    assert series_in(expr) == {"a_total", "b_total", "c:d:rate5m", "e_total", "f_total"}


def recorded_series(collector: Path) -> set[str]:
    return {
        rule["record"]
        for name in RULE_FILES
        for group in yaml.safe_load((collector / name).read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    }


def panels_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for panel in doc["panels"]:
        found += [panel, *panel.get("panels", [])]
    return found


def test_custom_prefix_dashboard_reads_recorded_series_and_else_only_prefixed_ones(custom: Path) -> None:
    """Every panel reads recording rules; one that reads a raw series says why, and names it with the
    prefix, the same series as the default prefix's dashboard, only renamed."""
    doc = json.loads((custom / "dashboards" / "store-metrics.json").read_text())
    default = json.loads((ROOT / "dashboards" / "store-metrics.json").read_text())
    recorded = recorded_series(custom / "collector")
    exprs, default_exprs = dashboard_exprs(doc), dashboard_exprs(default)
    assert len(exprs) == len(default_exprs) > 50
    for expr, default_expr in zip(exprs, default_exprs, strict=True):
        names = series_in(expr)
        assert names, expr
        raw = names - recorded
        assert all(n.startswith(SERIES_PREFIX) for n in raw), (raw, expr)
        assert {n.replace(SERIES_PREFIX, "airflow_", 1) for n in names} == series_in(default_expr)
    for panel in panels_of(doc):
        raw = set().union(set(), *(series_in(t["expr"]) for t in panel.get("targets", []))) - recorded
        if raw:
            assert "not a recording rule" in panel["description"], (panel["title"], raw)
    rules = [
        rule
        for name in RULE_FILES
        for group in yaml.safe_load((custom / "collector" / name).read_text())["groups"]
        for rule in group["rules"]
    ]
    alerts = [rule["expr"] for rule in rules if "alert" in rule]
    read = set().union(*(series_in(e) for e in [*exprs, *alerts]))
    # And what the records those read are made of (server-rules.yml's native histograms, summed).
    feeding = {rule["record"]: series_in(rule["expr"]) for rule in rules if "record" in rule}
    while grown := set().union(*(feeding.get(name, set()) for name in read)) - read:
        read |= grown
    assert recorded <= read, f"recorded by the rules, read by no panel and no alert: {recorded - read}"


@pytest.mark.parametrize("rules_file", RULE_FILES)
def test_custom_prefix_rules_query_only_prefixed_and_recorded_series(custom: Path, rules_file: str) -> None:
    recorded = {
        rule["record"]
        for name in RULE_FILES
        for group in yaml.safe_load((custom / "collector" / name).read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    }
    for expr in rule_exprs(custom / "collector" / rules_file):
        for name in series_in(expr):
            # ``up``: the recording rules' scrape guard (a target's own series, not ours).
            assert name.startswith(SERIES_PREFIX) or name in recorded or name == "up", (name, expr)
    text = (custom / "collector" / rules_file).read_text()
    assert not re.search(r"\bairflow_", text)


def test_custom_prefix_statsd_mappings_and_rule_tests_use_the_prefix(custom: Path) -> None:
    collector = custom / "collector"
    for name in MAPPING_FILES:
        for entry in yaml.safe_load((collector / name).read_text())["mappings"]:
            assert entry["match"].startswith(f"{PREFIX}.") and entry["name"].startswith(SERIES_PREFIX)
    inventory = yaml.safe_load((collector / "statsd-mapping-inventory.yml").read_text())["mappings"]
    assert {(m["match"], m["name"]) for m in inventory} == {
        (m.full_name(PREFIX), m.prometheus_name(PREFIX)) for m in catalogue.INVENTORY_METRICS
    }
    for name in (r.replace(".yml", ".test.yml") for r in RULE_FILES):
        doc = yaml.safe_load((collector / name).read_text())
        for group in doc["tests"]:
            for series in group["input_series"]:
                assert series["series"].startswith((SERIES_PREFIX, "up{")), series
        assert not re.search(r"\bairflow_|@", (collector / name).read_text())


# -- what export loads, and a wheel on its own ---------------------------------------------------------------


def test_export_loads_no_optional_library_and_reads_no_repository_file(tmp_path: Path) -> None:
    probe = (
        "import builtins, io, json, sys\n"
        "opened = []\n"
        "_open = io.open\n"
        "def tracking_open(file, *args, **kwargs):\n"
        "    opened.append(str(file))\n"
        "    return _open(file, *args, **kwargs)\n"
        "builtins.open = io.open = tracking_open\n"
        "from store_metrics.commands.cli import main\n"
        f"code = main(['export', '--out', {str(tmp_path / 'out')!r}, '--prefix', {PREFIX!r}])\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {OPTIONAL!r})\n"
        "print(json.dumps({'code': code, 'loaded': loaded, 'opened': opened}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    assert result["loaded"] == []
    assert any("/templates/" in p for p in result["opened"])  # the probe sees the package's reads
    package = Path(os.path.abspath(catalogue.__file__)).parent
    for path in (Path(os.path.abspath(p)) for p in result["opened"]):
        assert package in path.parents or tmp_path in path.parents, f"export opened {path}"
        assert not {ROOT / "collector", ROOT / "dashboards"} & set(path.resolve().parents), path


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_a_wheel_installed_alone_exports_the_same_files_outside_the_repository(tmp_path: Path) -> None:
    # Build from a copy of what the wheel is made of, so the build leaves nothing in the work tree.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src" / "store_metrics",
        source / "src" / "store_metrics",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    built = _pip("wheel", "--no-deps", "--wheel-dir", str(tmp_path / "dist"), str(source))
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("airflow_store_metrics-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    installed = _pip("--python", str(python), "install", "--no-deps", "--no-index", str(wheel))
    assert installed.returncode == 0, installed.stdout + installed.stderr

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    environ = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import json, sys, store_metrics; print(json.dumps([store_metrics.__file__, "
            f"sorted(m for m in sys.modules if m.split('.')[0] in {OPTIONAL!r})]))",
        ],
        cwd=outside,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert where.returncode == 0, where.stderr
    location, loaded = json.loads(where.stdout)
    assert Path(location).resolve().is_relative_to(env_dir.resolve()), location
    assert loaded == []
    done = subprocess.run(
        [str(env_dir / "bin" / "store-metrics"), "export", "--out", "out", "--prefix", PREFIX],
        cwd=outside,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    expected = export.render_all(PREFIX)
    for relative, text in expected.items():
        assert (outside / "out" / relative).read_text(encoding="utf-8") == text, relative
    # The Kubernetes manifests too, for this prefix.
    rules = (outside / "out" / "kubernetes" / "base" / "prometheusrule-rules.yaml").read_text()
    assert "myco_airflow_task_state_store_" in rules
    assert sorted(p.name for p in (outside / "out" / "kubernetes").iterdir()) == [
        "api-server",
        "base",
        "statsd",
    ]
