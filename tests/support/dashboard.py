"""The committed Grafana dashboard, as the tests read it: layout, queries, and queries evaluated.

``evaluate_queries`` runs ``promtool test rules`` on committed queries, with Grafana's
variables set as a test chooses, against synthetic input series (and the rule files whose recorded
series the panels read), and fails the test unless every query returns exactly the samples expected.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from support.promtool import promtool
from testbed.repository import ROOT

#: Grafana's grid: 24 columns.
GRID_WIDTH = 24
#: The dashboard's filter variables: an unset one matches everything (Grafana's "All").
VARIABLES = ("team_name", "dag_id", "task_id", "operator", "run_type")
#: The deployment and job variables (one value each, never All): by default no cluster label and
#: the job the tests' input series carry, for the tasks, the asset watchers and the API server alike.
SCOPE = {"cluster": "", "job": "airflow", "watcher_job": "airflow", "server_job": "airflow"}

#: One query to evaluate: its expression, the dashboard variables it runs with, and the samples
#: it must return (labels -> value).
Case = tuple[str, Mapping[str, str], Mapping[str, float]]


def assert_laid_out(panels: Sequence[Mapping[str, Any]], below: int = -1) -> None:
    """Every panel within the grid's columns and below ``below`` (its row's ``y``), none overlapping."""
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= GRID_WIDTH and g["h"] > 0 and g["y"] > below, p["title"]
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not area & cells, f"{p['title']} overlaps another panel"
        cells |= area


def panel_exprs(row: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """The queries of a dashboard row's panels, by (panel title, refId)."""
    return {(p["title"], t["refId"]): t["expr"] for p in row["panels"] for t in p["targets"]}


def interpolate(
    expr: str,
    variables: Mapping[str, str],
    *,
    interval: str = "5m",
    rate_interval: str = "5m",
    rng: str = "1h",
) -> str:
    """``expr`` as Grafana runs it: the filter variables set (``.*`` unless given), the deployment
    and job (``SCOPE`` unless given), ``interval`` per point (``$__interval``,
    ``$__rate_interval``), the range ``rng``."""
    for name in VARIABLES:
        expr = expr.replace(f"${name}", variables.get(name, ".*"))
    for name, default in SCOPE.items():
        expr = expr.replace(f"${name}", variables.get(name, default))
    expr = expr.replace("$__rate_interval", rate_interval).replace("$__interval", interval)
    expr = expr.replace("$__range", rng)
    # Left: no Grafana variable; "$1" is label_replace's reference (Grafana has no variable "1").
    assert not re.search(r"\$(?!\d)", expr), expr
    return expr


def evaluate_queries(
    tmp_path: Path,
    interval: str,
    inputs: Sequence[tuple[str, str]],
    cases: Sequence[Case],
    eval_time: str,
    *,
    rule_files: Sequence[str] = (),
    role: str | None = None,
) -> None:
    """``promtool test rules`` of ``cases`` at ``eval_time``, on the ``inputs`` series (one sample
    every ``interval``); ``rule_files`` (in ``tmp_path``) are loaded and evaluated along; ``role``
    picks a pinned promtool (``support.promtool.promtool``)."""
    doc = {
        **({"rule_files": list(rule_files)} if rule_files else {}),
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": interval,
                "input_series": [{"series": s, "values": v} for s, v in inputs],
                "promql_expr_test": [
                    {
                        "expr": interpolate(expr, variables),
                        "eval_time": eval_time,
                        "exp_samples": [
                            {"labels": labels, "value": value} for labels, value in samples.items()
                        ],
                    }
                    for expr, variables, samples in cases
                ],
            }
        ],
    }
    (tmp_path / "panels.test.yml").write_text(yaml.safe_dump(doc, width=10_000))
    tested = promtool("test", "rules", "panels.test.yml", cwd=tmp_path, role=role)
    assert tested.returncode == 0, tested.stdout + tested.stderr


# -- the committed dashboard, and the alerts its thresholds draw ------------------------------------

#: The repository's copy of the export.
DASHBOARDS = ROOT / "dashboards"
COLLECTOR = ROOT / "collector"
JSON_PATH = DASHBOARDS / "store-metrics.json"
PROVISIONING = DASHBOARDS / "provisioning"

#: The oldest Grafana the docs support (docs/alerts.md) and the schema it writes (10.4 to 11.2: 39).
OLDEST_GRAFANA, SCHEMA_VERSION = "11.0.0", 39
#: The panel types the dashboard may use, and the ones Grafana 11 no longer draws.
PANEL_TYPES = {"row", "timeseries", "stat", "table", "bargauge"}
LEGACY_PANEL_TYPES = {"graph", "singlestat", "table-old", "grafana-piechart-panel", "grafana-worldmap-panel"}
#: Every panel's and query's data source: the dashboard's variable.
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: How every task-side query's selector starts: one deployment, one job.
TASK_SCOPE = 'cluster="$cluster",job="$job"'


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(JSON_PATH.read_text())
    return data


def panels() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = dashboard()["panels"]
    return found


def every_panel() -> list[dict[str, Any]]:
    """Top-level panels and those inside the collapsed rows."""
    return [q for p in panels() for q in (p, *p.get("panels", [])) if q["type"] != "row"]


def targets() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(panel, query) of every query that draws a panel's lines: not the one that brings a panel its
    exemplars, whose own lines are hidden (its own test in tests/shipped/test_dashboards.py)."""
    return [(p, t) for p in panels() for t in p.get("targets", []) if not t.get("exemplar")]


def alert(name: str) -> dict[str, Any]:
    for path in COLLECTOR.glob("*rules.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == name:
                    return dict(rule)
    raise AssertionError(name)


def threshold(name: str) -> float:
    """The number an alert compares against (its first ``> x``)."""
    match = re.search(r"\) > ([0-9.]+)\n|> ([0-9.]+)$", alert(name)["expr"])
    assert match, alert(name)["expr"]
    return float(match.group(1) or match.group(2))


def with_rules(tmp_path: Path, *names: str) -> list[str]:
    """Copy the rule files the panels read into ``tmp_path``, for promtool to evaluate along."""
    for name in names:
        shutil.copy(COLLECTOR / name, tmp_path / name)
    return list(names)
