"""The State store views in a running Airflow: the numbers, who sees them, the calls, a real browser.

One deployment for the module (``support.ui``): Airflow's api-server, scheduler and
dag-processor with an auth manager that has per-DAG permissions, three DAGs that write task and
asset state (one run each, every task its own process), the API server counting their calls
(``count_at = api_server``) for a real Prometheus that the UI queries. Then:

* the tab's numbers (entries, bytes, expired, oldest, newest) equal what the metadata tables hold
  for each DAG, read here row by row; the deployment page lists the DAGs by bytes;
* a user who may not read a DAG gets 403 from its data (as from Airflow's own API), and the
  deployment page neither shows nor counts it; no route answers without authentication;
* the tab's calls equal the calls the DAGs made, and what the committed Grafana dashboard's
  "Calls by DAG and task" queries return from the same Prometheus;
* every DAG keeps its own name: ``données_2024`` and ``donn_es_2024`` (one series under the old tag
  rule) are two, and a viewer who may read only the second is shown only its calls; a DAG named
  ``unknown`` is not shown the calls nobody could attribute;
* Debian's Chromium logs in through Airflow's login page, opens the DAG, opens the *State store*
  tab and reads those numbers in Airflow's iframe, in the light and in the dark theme; the viewer
  sees the refusal for the DAG it may not read.

Why not ``airflow standalone``: it replaces the configured auth manager by the Simple one, which has
no per-DAG permission; the components here are those standalone starts (LocalExecutor too), one by one.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store_metrics import catalogue
from support import e2e
from support.browser import Browser
from support.e2e import CALLS as RECORDED_CALLS
from support.ui import (
    API_SERVER_JOB,
    CALLS,
    DAG_ASSETS,
    DAG_IDS,
    DONN_ES,
    DONNEES,
    ORDERS,
    PASSWORDS,
    SECRET,
    SMALL,
    UNATTRIBUTED,
    UNKNOWN_DAG,
    UiDeployment,
    start_deployment,
)

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.prometheus]

ROUTES = (
    "/store-metrics/",
    f"/store-metrics/dags/{ORDERS}",
    "/store-metrics/static/common.js",
    f"/store-metrics/api/dags/{ORDERS}/footprint",
    f"/store-metrics/api/dags/{ORDERS}/calls",
    "/store-metrics/api/deployment",
)


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiDeployment]:
    deployment = start_deployment(tmp_path_factory.mktemp("ui"))
    try:
        deployment.run_dags()
        deployment.wait_for_calls()
        yield deployment
    finally:
        deployment.stop()


# -- what the metadata tables hold, read row by row ----------------------------------------------------


def _utc(text: Any) -> dt.datetime | None:
    if text is None:
        return None
    value = dt.datetime.fromisoformat(str(text))
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value


def _group(rows: list[tuple[Any, ...]], at: dt.datetime, expiry: bool) -> dict[str, Any]:
    written = [_utc(r[1]) for r in rows]
    return {
        "entries": len(rows),
        "bytes": sum(len(str(r[0]).encode()) for r in rows),
        "expired": sum(1 for r in rows if (e := _utc(r[2])) is not None and e < at) if expiry else None,
        "external": 0,
        "oldest": min(w for w in written if w),
        "newest": max(w for w in written if w),
    }


def tables(ui: UiDeployment, dag_id: str, at: dt.datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    """(per task, per asset the DAG uses) as the metadata database holds them at ``at``."""
    by_task: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for task_id, *row in ui.airflow.query(
        "select task_id, value, updated_at, expires_at from task_state_store where dag_id = ?", dag_id
    ):
        by_task[task_id].append(tuple(row))
    by_asset: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for name, *row in ui.airflow.query(
        "select a.name, s.value, s.updated_at, null "
        "from asset_state_store s join asset a on a.id = s.asset_id"
    ):
        if name in DAG_ASSETS[dag_id]:
            by_asset[name].append(tuple(row))
    return (
        {task: _group(rows, at, True) for task, rows in by_task.items()},
        {name: _group(rows, at, False) for name, rows in by_asset.items()},
    )


def shown(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    fields = ("entries", "bytes", "expired", "external", "oldest", "newest")
    return {
        row[key]: {f: _utc(row[f]) if f in ("oldest", "newest") else row[f] for f in fields} for row in rows
    }


# -- the numbers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dag_id", DAG_IDS)
def test_the_tab_shows_exactly_what_the_metadata_tables_hold_for_the_dag(
    ui: UiDeployment, dag_id: str
) -> None:
    status, body = ui.get(f"/store-metrics/api/dags/{dag_id}/footprint", "admin")
    assert status == 200, body
    tasks, assets = tables(ui, dag_id, _utc(body["read_at"]))  # type: ignore[arg-type]
    assert shown(body["tasks"], "task_id") == tasks
    assert shown(body["assets"], "asset") == assets
    assert body["totals"]["task"]["entries"] == sum(t["entries"] for t in tasks.values())
    assert body["totals"]["task"]["bytes"] == sum(t["bytes"] for t in tasks.values())
    # Largest first; no key and no value anywhere in the answer.
    assert [r["bytes"] for r in body["tasks"]] == sorted((r["bytes"] for r in body["tasks"]), reverse=True)
    assert "cursor" not in str(body) and "job-7f3a" not in str(body) and "SSSS" not in str(body)


def test_the_numbers_are_those_the_dag_wrote(ui: UiDeployment) -> None:
    """By hand, from store_metrics_ui_orders.py: what the tab must say whatever the tables say."""
    _, body = ui.get(f"/store-metrics/api/dags/{ORDERS}/footprint", "admin")
    tasks = {row["task_id"]: row for row in body["tasks"]}
    assert set(tasks) == {"extract", "transform"}  # enrich deleted its only key
    assert (tasks["transform"]["entries"], tasks["transform"]["bytes"]) == (3, 102 + 202 + 302)
    assert (tasks["extract"]["entries"], tasks["extract"]["expired"]) == (3, 1)
    assert [row["asset"] for row in body["assets"]] == ["ui/customers", "ui/orders"]
    assert body["grafana_url"] == (
        "http://grafana.example:3000/d/store-metrics-state-store?var-dag_id=store_metrics_ui_orders"
    )


def test_the_deployment_page_lists_the_dags_by_bytes_with_their_expired_entries(ui: UiDeployment) -> None:
    status, page = ui.get("/store-metrics/api/deployment", "admin")
    assert status == 200, page
    sizes = {
        dag_id: sum(
            len(str(v).encode())
            for (v,) in ui.airflow.query("select value from task_state_store where dag_id = ?", dag_id)
        )
        for dag_id in DAG_IDS
    }
    assert [row["dag_id"] for row in page["dags"]] == sorted(sizes, key=lambda d: -sizes[d])
    assert [row["bytes"] for row in page["dags"]] == sorted(sizes.values(), reverse=True)
    assert [(row["dag_id"], row["expired"]) for row in page["expired"]] == [(SECRET, 2), (ORDERS, 1)]
    assets = {row["asset"]: row["used_by"] for row in page["assets"]}
    assert assets == {"ui/customers": [ORDERS, SECRET], "ui/orders": [ORDERS]}
    # Prometheus holds no inventory gauges here (no `store-metrics inventory` runs): it says so.
    assert page["inventory"] == {"configured": True, "problem": None, "stores": {}}


# -- who sees what -------------------------------------------------------------------------------------


def test_a_user_who_may_not_read_a_dag_gets_nothing_of_it(ui: UiDeployment) -> None:
    for path in (f"/store-metrics/api/dags/{SECRET}/footprint", f"/store-metrics/api/dags/{SECRET}/calls"):
        status, body = ui.get(path, "viewer")
        assert (status, body) == (403, {"detail": "Forbidden"}), path
    # The same auth manager refuses it in Airflow's own API, and lets the viewer read the others.
    assert ui.get(f"/api/v2/dags/{SECRET}", "viewer")[0] == 403
    assert ui.get(f"/store-metrics/api/dags/{ORDERS}/footprint", "viewer")[0] == 200
    status, page = ui.get("/store-metrics/api/deployment", "viewer")
    assert status == 200
    assert SECRET not in str(page) and DONNEES not in str(page)
    assert [row["dag_id"] for row in page["dags"]] == [ORDERS, UNKNOWN_DAG, DONN_ES, SMALL]
    assert page["dag_count"] == 4
    _, admin = ui.get("/store-metrics/api/deployment", "admin")
    hidden = [row for row in admin["dags"] if row["dag_id"] in (SECRET, DONNEES)]
    for field in ("entries", "expired"):
        assert page["totals"]["task"][field] == admin["totals"]["task"][field] - sum(r[field] for r in hidden)


@pytest.mark.parametrize("path", ROUTES)
def test_no_route_answers_without_authentication(ui: UiDeployment, path: str) -> None:
    assert ui.get(path) == (401, {"detail": "Not authenticated"})


def test_the_app_serves_no_docs_and_refuses_unknown_windows(ui: UiDeployment) -> None:
    for path in ("/store-metrics/docs", "/store-metrics/openapi.json", "/store-metrics/static/../app.py"):
        assert ui.get(path, "admin")[0] == 404, path
    status, body = ui.get(f"/store-metrics/api/dags/{ORDERS}/calls?window=2h", "admin")
    assert (status, body) == (400, {"detail": "window must be one of 1h, 6h, 1d, 7d"})


# -- the calls -----------------------------------------------------------------------------------------


def _series(counter: str) -> str:
    return catalogue.get(counter).prometheus_name()


def test_the_tabs_calls_are_the_calls_the_dag_made_and_what_the_dashboard_shows(ui: UiDeployment) -> None:
    status, calls = ui.get(f"/store-metrics/api/dags/{ORDERS}/calls?window=1h", "admin")
    assert status == 200 and calls["problem"] is None, calls
    tab = {row["task_id"]: row["calls"] for row in calls["tasks"]}
    assert tab == {task: counts for (dag, task), counts in CALLS.items() if dag == ORDERS}
    ratios = {row["task_id"]: row["found_ratio"] for row in calls["tasks"]}
    assert ratios["extract"] == {"task_state_store": 0.5, "asset_state_store": None}
    assert ratios["load"] == {"task_state_store": None, "asset_state_store": 0.0}
    # The committed dashboard's table of calls by DAG and task, filtered on the DAG over the same
    # window, run against the same Prometheus: the same numbers, column by column.
    targets = e2e.dashboard_targets(ui.exported)
    panel = [(t, spec) for title, t, spec in targets if title == "Calls by DAG and task"]
    assert len(panel) == 5
    for target, spec in panel:
        expr = e2e.interpolate(
            target["expr"], {"dag_id": [ORDERS]}, rng="1h", interval="1h", job=API_SERVER_JOB
        )
        per_task: Counter[str] = Counter()
        for key, value in e2e.as_groups(ui.prom.query(expr), spec.by).items():
            per_task[key[spec.by.index("task_id")]] += value
        from_tab = Counter(
            {
                task: sum(n for c, n in counts.items() if _series(c) in spec.series)
                for task, counts in tab.items()
            }
        )
        assert +per_task == +from_tab, target["refId"]


# -- every DAG keeps its own name ----------------------------------------------------------------------


def calls_shown(ui: UiDeployment, dag_id: str, user: str) -> dict[str, dict[str, float]]:
    status, body = ui.get(f"/store-metrics/api/dags/{dag_id}/calls?window=1h", user)
    assert status == 200 and body["problem"] is None, body
    return {row["task_id"]: row["calls"] for row in body["tasks"]}


def test_two_dags_the_old_tag_rule_made_one_are_two_and_a_viewer_sees_only_the_one_it_may_read(
    ui: UiDeployment,
) -> None:
    """``données_2024`` and ``donn_es_2024`` (tasks ``tâche`` and ``t_che``) were one series: the
    viewer, who may read only ``donn_es_2024``, was shown the calls of both."""
    assert calls_shown(ui, DONN_ES, "viewer") == {"t_che": CALLS[(DONN_ES, "t_che")]}
    for path in (f"/store-metrics/api/dags/{DONNEES}/footprint", f"/store-metrics/api/dags/{DONNEES}/calls"):
        assert ui.get(path, "viewer") == (403, {"detail": "Forbidden"}), path
    assert calls_shown(ui, DONNEES, "admin") == {"t\u00e2che": CALLS[(DONNEES, "t\u00e2che")]}
    # Prometheus holds each DAG and task under its own id, exactly as Airflow has it.
    held = ui.prom.query(
        f'sum by (dag_id, task_id) (sum_over_time({RECORDED_CALLS}{{dag_id=~"donn.*"}}[1h]))'
    )
    assert {(s["metric"]["dag_id"], s["metric"]["task_id"]): float(s["value"][1]) for s in held} == {
        (DONNEES, "t\u00e2che"): 4.0,
        (DONN_ES, "t_che"): 1.0,
    }


def test_a_dag_named_unknown_is_not_shown_the_calls_nobody_could_attribute(ui: UiDeployment) -> None:
    assert calls_shown(ui, UNKNOWN_DAG, "viewer") == {"note": CALLS[(UNKNOWN_DAG, "note")]}
    # The refused call is there, under the plugin's own value, which no DAG id can take.
    held = ui.prom.query(f'sum by (dag_id, task_id) (sum_over_time({RECORDED_CALLS}{{outcome="error"}}[1h]))')
    assert [(s["metric"], float(s["value"][1])) for s in held] == [
        ({"dag_id": catalogue.UNKNOWN, "task_id": catalogue.UNKNOWN}, float(sum(UNATTRIBUTED.values())))
    ]


# -- a real browser ------------------------------------------------------------------------------------


@pytest.fixture
def browser(ui: UiDeployment, tmp_path: Path) -> Iterator[Browser]:
    b = Browser(ui.base)
    try:
        yield b
    finally:
        b.screenshot(tmp_path / "last.png")  # what the browser showed last, for a failing test
        b.close()


def test_a_user_logs_in_opens_the_dag_and_sees_its_state_store_tab(
    ui: UiDeployment, browser: Browser
) -> None:
    browser.login("admin", PASSWORDS["admin"])
    browser.open_tab(ORDERS)
    assert browser.state() == "ready"
    _, body = ui.get(f"/store-metrics/api/dags/{ORDERS}/footprint", "admin")
    wanted = {
        row["task_id"]: {
            "entries": str(row["entries"]),
            "bytes": str(row["bytes"]),
            "expired": str(row["expired"]),
        }
        for row in body["tasks"]
    }
    rows = browser.table("task_id")
    assert {task: {k: rows[task][k] for k in ("entries", "bytes", "expired")} for task in wanted} == wanted
    assert set(rows) == {*wanted, "(total)"}
    assert {name: rows["entries"] for name, rows in browser.table("asset").items()} == {
        "ui/customers": "2",
        "ui/orders": "2",
        "(total)": "4",
    }
    browser.wait(lambda d: browser.table("calls"))
    calls = browser.table("calls")
    assert (calls["extract/task"]["read_found"], calls["extract/task"]["write"]) == ("1", "3")
    assert calls["extract/task"]["found_ratio"] == "50.0 %"
    assert calls["load/asset"]["read_absent"] == "1"
    assert "Grafana dashboard for this DAG" in browser.text("#links")


def test_the_tab_follows_airflows_dark_theme(ui: UiDeployment, browser: Browser) -> None:
    browser.login("admin", PASSWORDS["admin"])
    for theme, text in (("light", "rgb(24, 24, 27)"), ("dark", "rgb(244, 244, 245)")):
        browser.set_theme(theme)
        browser.open_tab(SMALL)
        html = browser.driver.execute_script(
            "return [document.documentElement.dataset.theme, getComputedStyle(document.body).color];"
        )
        assert html == [theme, text]


def test_a_viewer_sees_the_refusal_for_a_dag_it_may_not_read(ui: UiDeployment, browser: Browser) -> None:
    browser.login("viewer", PASSWORDS["viewer"])
    # The page Airflow's iframe loads for that DAG's tab, opened directly (Airflow's own DAG page
    # refuses the viewer before any tab is drawn).
    browser.driver.get(f"{ui.base}/store-metrics/dags/{SECRET}")
    browser.wait(lambda d: browser.state() != "loading")
    assert browser.state() == "refused"
    assert f"You may not read DAG {SECRET}" in browser.text("#problems")
    browser.open_page("store-metrics")
    assert list(browser.table("dags")) == [ORDERS, UNKNOWN_DAG, DONN_ES, SMALL]


def test_check_says_how_many_counters_the_uis_prometheus_holds(ui: UiDeployment) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "store_metrics.commands.cli", "check", "--process", "api-server"],
        env={**ui.airflow.env, "AIRFLOW__STORE_METRICS__BACKEND": "none"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # The runs made six of the twelve counters (task: found, absent, write, delete; asset: absent,
    # write), the refused call a seventh (task: error).
    assert f"ui: Prometheus at {ui.prom.url} answers; it holds 7 of the 12 counters" in done.stdout, (
        done.stdout
    )
