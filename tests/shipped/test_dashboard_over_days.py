"""The dashboard queried as Grafana queries it, over a day and over a week, on Prometheus 3 (the
newest pin) and on the 2.x minimum (Debian's 2.42).

A week and two hours of every component's series (``support.component_series``: DAG tasks,
asset watchers, the API server, the inventory; scraped each minute, one job as the shipped
PodMonitor gives it) are written as OpenMetrics and turned into blocks by the pin's own promtool
(``tsdb create-blocks-from openmetrics``). The pin's Prometheus then evaluates the shipped recording
rules the dashboard reads over the whole week, each in one range query at the rules' interval, 17 s
past each minute as a rule group evaluates at an offset into its interval (what promtool's rules
backfill does, which took three minutes a pin in 2-hour slices); the results go into blocks the same
way, and Prometheus restarts on raw and recorded blocks together: two starts per pin, none per panel.

Every target of every panel is then sent as Grafana sends it (``support.grafana_step``): a range
query with the step Grafana computes for a panel of its width on a 1920-pixel screen (max data points
= its width in pixels), its min interval and the shipped data source's scrape interval (15 s; the
week is sampled each minute, which the recorded tier reads the same), or an instant query at the
range's end. Checked over 24 h and 7 d, and over 1 h (where the steps of
the narrow panels would fall under the rule interval without the queries' min interval): every
panel returns data, every stat panel equals the calls the synthetic week made in the range, as its
spec says (``support.e2e.expected``), and every per-second query has a point at every step, each
the calls per minute / 60.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics.shipped.grafana.dashboard import specs, trigger_specs
from store_metrics.shipped.render_context import RenderContext
from support import component_series
from support.dashboard import COLLECTOR, DASHBOARDS, dashboard, interpolate
from support.e2e import Model, dashboard_rows, expected
from support.grafana_step import GrafanaQuery, grafana_query
from support.prometheus import PrometheusServer
from testbed import peers

pytestmark = [pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

#: One deployment; every component under the job the shipped PodMonitor gives (the inventory: its own).
CLUSTER, JOB, INVENTORY_JOB = "prod", "airflow/store-metrics-api-server", "store-metrics-inventory"
SCRAPES = [
    ("tasks", JOB, CLUSTER),
    ("watchers", JOB, CLUSTER),
    ("server", JOB, CLUSTER),
    ("inventory", INVENTORY_JOB, CLUSTER),
]
SCOPE = {"cluster": CLUSTER, "job": JOB, "watcher_job": JOB, "server_job": JOB}
DAY, WEEK, SCRAPE, RULE_OFFSET = 86400, 7 * 86400, 60, 17
#: Grafana's grid on a 1920-pixel screen: a panel's width in pixels is its grid width x 80.
PIXELS_PER_COLUMN = 1920 // 24
RULE_FILES = ("rules.yml", "watcher-rules.yml", "server-rules.yml", "footprint-rules.yml")


def _promtool(role: str, *args: str) -> None:
    done = subprocess.run(
        [str(peers.binary("promtool", role)), *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _recorded_names() -> set[str]:
    """The recorded series the dashboard's panels read."""
    text = "\n".join(t["expr"] for p in dashboard_panels() for t in p["targets"])
    return set(re.findall(r"\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b", text))


def dashboard_panels() -> list[dict[str, Any]]:
    return [p for panels in _rows().values() for p in panels]


def _rows() -> dict[str, list[dict[str, Any]]]:
    return dashboard_rows(COLLECTOR.parent)


def _rules_the_dashboard_reads() -> list[dict[str, Any]]:
    """The shipped recording rules whose series the panels read (alerts and other records left out)."""
    wanted = _recorded_names()
    rules = []
    for name in RULE_FILES:
        for group in yaml.safe_load((COLLECTOR / name).read_text())["groups"]:
            assert group.get("interval", "1m") in ("1m", "15m"), group["name"]
            if group.get("interval", "1m") == "1m":
                rules += [r for r in group["rules"] if r.get("record") in wanted]
    assert {r["record"] for r in rules} == wanted  # every recorded series the dashboard reads
    return rules


def _recorded(prom: PrometheusServer, start: int, end: int) -> Iterator[str]:
    """The rules the dashboard reads, evaluated by ``prom`` every minute from ``start`` to ``end``:
    one range query per rule at the rules' interval, the rule's labels added, as OpenMetrics.

    What ``promtool tsdb create-blocks-from rules`` does, in one query per rule where promtool makes
    one per 2-hour block (5.5 s a rule, three minutes a pin, measured on this machine).
    """
    by_record: dict[str, list[str]] = {}
    for rule in _rules_the_dashboard_reads():
        result = prom.api("query_range", query=rule["expr"], start=str(start), end=str(end), step="60")[
            "result"
        ]
        lines = by_record.setdefault(rule["record"], [])
        for series in result:
            labels = {k: v for k, v in series["metric"].items() if k != "__name__"} | rule.get("labels", {})
            selector = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            lines += [f"{rule['record']}{{{selector}}} {value} {int(t)}" for t, value in series["values"]]
    for lines in by_record.values():
        yield from lines
    yield "# EOF"


def _blocks(role: str, source: Path, tsdb: Path) -> None:
    """OpenMetrics into blocks in ``tsdb``: one block for the week (2 h blocks would make promtool
    read the file once per block)."""
    _promtool(
        role,
        "tsdb",
        "create-blocks-from",
        "openmetrics",
        "--max-block-duration=504h",
        "-q",
        str(source),
        str(tsdb),
    )


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The week's series as OpenMetrics, and the end of the data (a whole hour, the dashboard's "now")."""
    end = int(time.time() // 3600 * 3600)
    path = tmp_path_factory.mktemp("week") / "week.om"
    with path.open("w") as out:
        for line in component_series.openmetrics(SCRAPES, end - WEEK - 2 * 3600, end, SCRAPE):
            out.write(line + "\n")
    return path, end


@pytest.fixture(scope="module", params=["newest", "minimum"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, week: tuple[Path, int]
) -> Iterator[tuple[PrometheusServer, int]]:
    """The pin's Prometheus on the week's raw blocks and the recorded blocks its rules made."""
    role, (data, end) = request.param, week
    tmp = tmp_path_factory.mktemp(f"over-days-{role}")
    _blocks(role, data, tmp / "tsdb")
    config = {"global": {"scrape_interval": f"{SCRAPE}s", "evaluation_interval": "1m"}}
    retention = "--storage.tsdb.retention.time=30d"
    prom = PrometheusServer(tmp, config, retention, role=role)
    try:
        # Each rule as a group evaluates it: at an offset into the minute (17 s here).
        start = end - WEEK - 2 * 3600 + RULE_OFFSET
        (tmp / "recorded.om").write_text("\n".join(_recorded(prom, start, end)) + "\n")
    finally:
        prom.stop()
    _blocks(role, tmp / "recorded.om", tmp / "tsdb")
    prom = PrometheusServer(tmp, config, retention, role=role)
    try:
        yield prom, end
    finally:
        prom.stop()


def _data_source_scrape_interval() -> str:
    """The scrape interval the shipped data source tells Grafana (``jsonData.timeInterval``)."""
    provisioned = yaml.safe_load(
        (DASHBOARDS / "provisioning" / "datasources" / "store-metrics.yml").read_text()
    )
    # Beside it, the trace data source its exemplars link to.
    (source,) = [s for s in provisioned["datasources"] if s["type"] == "prometheus"]
    return str(source["jsonData"]["timeInterval"])


def _query(panel: dict[str, Any], target: dict[str, Any], end: int, span: int) -> GrafanaQuery:
    """What Grafana sends for ``target`` of ``panel`` over ``[end - span, end]``."""
    return grafana_query(
        end - span,
        end,
        panel["gridPos"]["w"] * PIXELS_PER_COLUMN,
        query_interval=target.get("interval", ""),
        scrape_interval=_data_source_scrape_interval(),
    )


def _run(prom: PrometheusServer, panel: dict[str, Any], target: dict[str, Any], end: int, span: int) -> Any:
    """``target`` as Grafana sends it for ``panel`` over ``[end - span, end]``: the result."""
    q = _query(panel, target, end, span)
    expr = interpolate(target["expr"], SCOPE, interval=q.interval, rate_interval=q.rate_interval, rng=q.range)
    if target["instant"]:
        return prom.api("query", query=expr, time=str(end))["result"]
    return prom.api("query_range", query=expr, start=str(q.start), end=str(q.end), step=str(q.step))["result"]


SPANS = [pytest.param(3600, id="1h"), pytest.param(DAY, id="24h"), pytest.param(WEEK, id="7d")]


@pytest.mark.parametrize("span", SPANS)
def test_every_panel_returns_data(served: tuple[PrometheusServer, int], span: int) -> None:
    prom, end = served
    empty = [
        (row, panel["title"])
        for row, panels in _rows().items()
        for panel in panels
        if not any(
            any(s.get("values") or s.get("value") for s in _run(prom, panel, t, end, span))
            for t in panel["targets"]
        )
    ]
    assert empty == []


@pytest.mark.parametrize("span", SPANS)
def test_stat_panels_equal_the_calls_of_the_range(served: tuple[PrometheusServer, int], span: int) -> None:
    prom, end = served
    made = Model()
    made.counts.update(component_series.calls(("tasks", "watchers"), span / 60))
    by_ref = {(title, ref): target for title, ref, target in specs(RenderContext())}
    stats = [p for p in dashboard()["panels"] if p["type"] == "stat"]
    assert stats
    for panel in stats:
        for target in panel["targets"]:
            spec = by_ref[(panel["title"], target["refId"])].spec
            (wanted,) = expected(spec, made, {}).values()
            result = _run(prom, panel, target, end, span)
            (series,) = result
            got = float(series["value"][1] if target["instant"] else series["values"][-1][1])
            assert got == pytest.approx(wanted, rel=1e-9), panel["title"]


@pytest.mark.parametrize("span", SPANS)
def test_per_second_panels_equal_the_calls_at_every_step(
    served: tuple[PrometheusServer, int], span: int
) -> None:
    """Every point of every per-second query of the task-side and Triggers rows: the week's calls per
    minute / 60, whatever step Grafana chose for the panel's width and range (a step shorter than the
    rule interval would read no recorded sample, one not a multiple would read a varying number)."""
    prom, end = served
    per_minute = Model()
    per_minute.counts.update(component_series.calls(("tasks", "watchers"), 1))
    by_ref = {
        (title, ref): target
        for title, ref, target in [*specs(RenderContext()), *trigger_specs(RenderContext())]
    }
    checked = 0
    for panel in dashboard_panels():
        for target in panel["targets"]:
            found = by_ref.get((panel["title"], target["refId"]))
            if found is None or target["instant"] or found.spec.kind != "rate":
                continue
            wanted = expected(found.spec, per_minute, {}, seconds=60)
            q = _query(panel, target, end, span)
            for series in _run(prom, panel, target, end, span):
                key = tuple(series["metric"].get(label, "") for label in found.spec.by)
                values = [float(v) for _, v in series["values"]]
                # A point at every step: a step that read no recorded sample would leave a gap.
                assert len(values) == (q.end - q.start) // q.step + 1, (panel["title"], q)
                assert values == pytest.approx([wanted[key]] * len(values), rel=1e-9), (panel["title"], key)
                checked += 1
    assert checked > 20
