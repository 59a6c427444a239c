"""The dashboard's API server row: collapsed, catalogue series only, and its queries evaluate right.

Each query is evaluated by ``promtool test rules`` on synthetic API server series whose expected
values are worked out by hand below.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from store_metrics.shipped.grafana.dashboard import server_specs
from store_metrics.shipped.render_context import RenderContext
from support.dashboard import assert_laid_out, evaluate_queries, interpolate, panel_exprs
from support.promtool import promtool
from testbed.repository import ROOT

DASHBOARDS = ROOT / "dashboards"
COLLECTOR = ROOT / "collector"


def server_row() -> dict[str, Any]:
    panels = json.loads((DASHBOARDS / "store-metrics.json").read_text())["panels"]
    rows = [p for p in panels if p["type"] == "row" and p["title"].startswith("API server")]
    assert len(rows) == 1
    assert panels[-1] is rows[0]  # the last row
    return rows[0]


def test_the_server_row_is_collapsed_and_laid_out_below_it() -> None:
    row = server_row()
    assert row["collapsed"] is True and row["panels"]
    panels = json.loads((DASHBOARDS / "store-metrics.json").read_text())["panels"]
    ids = [p["id"] for p in panels] + [p["id"] for p in row["panels"]]
    assert len(ids) == len(set(ids))
    assert_laid_out(row["panels"], below=row["gridPos"]["y"])
    for panel in row["panels"]:
        assert panel["description"] and panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    titles = {p["title"] for p in row["panels"]}
    assert {
        "Request latency p99 by operation and value size",
        "Value sizes (selected range)",
        "Event-loop stall: largest per interval, by worker",
        "Event-loop stalls by length (selected range)",
    } <= titles


SERIES = re.compile(r"(?<![:\w])(airflow_[a-z0-9_]+)\b")


RECORD = re.compile(r"\b(\w+:airflow_store_metrics_api_\w+:\w+)\{")


def test_server_queries_read_the_server_rules_which_cover_every_server_metric() -> None:
    rules = [
        r for g in yaml.safe_load((COLLECTOR / "server-rules.yml").read_text())["groups"] for r in g["rules"]
    ]
    recorded = {r["record"]: r["expr"] for r in rules if "record" in r}
    committed = {(p["title"], t["refId"]): t for p in server_row()["panels"] for t in p["targets"]}
    specs = server_specs(RenderContext())
    assert len(specs) == len(committed)
    read: set[str] = set()
    for title, ref, target in specs:
        expr = committed[(title, ref)]["expr"]
        assert expr == target.spec.expr()
        names = set(RECORD.findall(expr))
        assert names and names <= set(recorded), (title, names - set(recorded))
        assert not SERIES.findall(expr), title  # no raw series
        read |= names
        assert 'cluster="$cluster",job="$server_job"' in expr  # the API server's own job
        # No task-side filter variables: these series have no DAG labels.
        assert "$dag_id" not in expr and "$team_name" not in expr
        if committed[(title, ref)]["instant"]:  # selected-range summaries
            assert "[$__range]" in expr, title
    # Through the rules they read, the panels cover every API server metric.
    used = {n for name in read for n in SERIES.findall(recorded[name])}
    covered = {
        m.name for m in catalogue.SERVER_METRICS if any(u.startswith(m.prometheus_name()) for u in used)
    }
    assert covered == {m.name for m in catalogue.SERVER_METRICS}


#: Synthetic series (per minute) and what each panel query must return at 10m (by hand):
INPUT = [
    # Task gets: 60 a minute within 5 ms, 6 more within 10 ms (small values); 6 big ones within 250 ms.
    (
        'airflow_api_server_state_store_request_duration_milliseconds_bucket{job="airflow",store="task",operation="get",value_size="le_1KiB",worker="w1",le="5"}',
        "0+60x20",
    ),
    (
        'airflow_api_server_state_store_request_duration_milliseconds_bucket{job="airflow",store="task",operation="get",value_size="le_1KiB",worker="w1",le="10"}',
        "0+66x20",
    ),
    (
        'airflow_api_server_state_store_request_duration_milliseconds_bucket{job="airflow",store="task",operation="get",value_size="le_1KiB",worker="w1",le="+Inf"}',
        "0+66x20",
    ),
    (
        'airflow_api_server_state_store_request_duration_milliseconds_bucket{job="airflow",store="task",operation="get",value_size="le_1MiB",worker="w1",le="100"}',
        "0+0x20",
    ),
    (
        'airflow_api_server_state_store_request_duration_milliseconds_bucket{job="airflow",store="task",operation="get",value_size="le_1MiB",worker="w1",le="250"}',
        "0+6x20",
    ),
    (
        'airflow_api_server_state_store_request_duration_milliseconds_bucket{job="airflow",store="task",operation="get",value_size="le_1MiB",worker="w1",le="+Inf"}',
        "0+6x20",
    ),
    ('airflow_api_server_event_loop_stall_max_milliseconds{job="airflow",worker="w1"}', "3+0x20"),
    ('airflow_api_server_event_loop_stall_max_milliseconds{job="airflow",worker="w2"}', "212.5+0x20"),
    ('airflow_api_server_event_loop_stall_milliseconds_sum{job="airflow",worker="w1"}', "0+6000x20"),
    (
        'airflow_api_server_event_loop_long_stalls_total{job="airflow",store="task",operation="get",worker="w1"}',
        "0+6x20",
    ),
    (
        'airflow_api_server_event_loop_long_stalls_total{job="airflow",store="none",operation="none",worker="w2"}',
        "0+3x20",
    ),
]
EXPECTED = {
    # p99 of small gets: rank 0.99 * 1.1/s = 1.089 in (5, 10]: 5 + 5 * (1.089 - 1) / 0.1 = 9.45.
    # p99 of big gets: all in (100, 250]: 100 + 150 * 0.99 = 248.5.
    ("Request latency p99 by operation and value size", "A"): {
        '{store="task",operation="get",value_size="le_1KiB"}': 9.449999999999996,  # 9.45 in floats
        '{store="task",operation="get",value_size="le_1MiB"}': 248.5,
    },
    ("Event-loop stall: largest per interval, by worker", "A"): {'{worker="w1"}': 3, '{worker="w2"}': 212.5},
    # 6000 ms a minute = 100 ms/s = 10% of the time.
    ("Event-loop stalled share, by worker", "A"): {'{worker="w1"}': 0.1},
    ("Long stalls per second by state store route in flight", "A"): {
        '{store="task",operation="get"}': 0.1,
        '{store="none",operation="none"}': 0.05,
    },
}


@pytest.mark.prometheus
def test_server_queries_evaluate_to_the_hand_computed_values(tmp_path: Path) -> None:
    committed = panel_exprs(server_row())
    # Every query parses (as a rule expression, with Grafana's variables at fixed values).
    rules = [
        {"record": f"check:q{i}:x", "expr": interpolate(expr, {})}
        for i, expr in enumerate(committed.values())
    ]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    checked = promtool("check", "rules", "queries.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    cases = [(committed[(title, ref)], {}, samples) for (title, ref), samples in EXPECTED.items()]
    shutil.copy(COLLECTOR / "server-rules.yml", tmp_path / "server-rules.yml")
    evaluate_queries(tmp_path, "1m", INPUT, cases, "10m", rule_files=["queries.yml", "server-rules.yml"])
