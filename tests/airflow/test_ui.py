"""The State store views, piece by piece: options, registration, cache, PromQL, who sees what.

What runs here needs no Airflow server: the options as ``[store_metrics]`` reads them, the views as
``airflow plugins`` lists them (a real Airflow in a fresh process), the per-worker cache under
real threads, the PromQL the tab sends (checked against the dashboards' own building blocks and
the committed dashboard's uid), a Prometheus that does not answer, and the deployment page's data
for users who may read some DAGs only. The whole thing against a running Airflow, a real
Prometheus and a real browser is tests/airflow/test_ui_deployment.py; the statements on SQLite and
PostgreSQL are in test_inventory*.py (``check_ui_reading``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from store_metrics import logs
from store_metrics.config.reader import OptionValues, environment_reader, read_options
from store_metrics.errors import ConfigError
from store_metrics.inventory.footprint import Group
from store_metrics.shipped import export, records
from store_metrics.ui.cache import TtlCache
from store_metrics.ui.calls import COUNTERS, calls_expr, dag_selector, found_ratio
from store_metrics.ui.payload import NO_PROMETHEUS, deployment_payload, grafana_link
from store_metrics.ui.reading import Deployment
from store_metrics.ui.sources import Answer, Sources
from testbed.airflow import clean_environ
from testbed.ports import free_port
from testbed.repository import ROOT

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)


def settings(**env: str) -> OptionValues:
    environ = {f"AIRFLOW__STORE_METRICS__{k.upper()}": v for k, v in env.items()}
    return read_options(environment_reader(environ), environ=environ)


# -- options -----------------------------------------------------------------------------------------


def test_the_ui_options_default_to_on_with_no_prometheus_and_no_grafana() -> None:
    s = settings()
    assert (s.ui, s.ui_cache_ttl, s.ui_timeout, s.ui_prometheus_url, s.ui_grafana_url) == (
        True,
        30.0,
        5.0,
        "",
        "",
    )


def test_the_deployment_s_matchers_are_kept_as_given_and_added_to_every_query_of_the_tab() -> None:
    s = settings(ui_prometheus_selector=' cluster="east", job=~"airflow-.*", ')
    assert s.ui_prometheus_selector == 'cluster="east", job=~"airflow-.*"'
    assert settings().ui_prometheus_selector == ""
    # a value may hold anything a PromQL string holds, a comma and a name-like text included
    assert settings(ui_prometheus_selector='team="a,__name__=\\"x\\""').ui_prometheus_selector == (
        'team="a,__name__=\\"x\\""'
    )
    assert calls_expr("orders", "1d", "airflow", 'cluster="east"') == (
        "sum by (task_id, store, outcome) (sum_over_time(task:airflow_store_metrics_calls:increase"
        '{dag_id="orders",run_type!="asset_watcher",cluster="east"}[1d]))\n'
        "or sum by (task_id, store, outcome) (sum_over_time(task:airflow_store_metrics_retries:increase"
        '{dag_id="orders",run_type!="asset_watcher",cluster="east"}[1d]))'
    )


def test_urls_are_kept_without_their_trailing_slash() -> None:
    s = settings(ui_prometheus_url="http://prometheus:9090/", ui_grafana_url="https://grafana.example/g/")
    assert (s.ui_prometheus_url, s.ui_grafana_url) == ("http://prometheus:9090", "https://grafana.example/g")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("ui_prometheus_url", "prometheus:9090"),
        ("ui_prometheus_url", "ftp://prometheus:9090"),
        ("ui_prometheus_url", "http://prometheus:9090/?x=1"),
        ("ui_grafana_url", "http:///nohost"),
        ("ui_grafana_url", "http://grafana:99999"),
        ("ui", "maybe"),
        ("ui_cache_ttl", "0"),
        ("ui_timeout", "-1"),
        # pasted into a selector: only matchers, nothing PromQL would read as more
        ("ui_prometheus_selector", "cluster=east"),
        ("ui_prometheus_selector", 'cluster="east"} or vector(1'),
        ("ui_prometheus_selector", 'cluster="east" job="a"'),
        ("ui_prometheus_selector", 'cluster="east",,job="a"'),
        ("ui_prometheus_selector", '__name__="up"'),
        ("ui_prometheus_selector", '{cluster="east"}'),
    ],
)
def test_a_bad_ui_option_is_refused_naming_it_and_what_it_accepts(option: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings(**{option: value})
    assert f"[store_metrics] {option}" in str(err.value)
    assert err.value.accepted


# -- registration: what `airflow plugins` lists ------------------------------------------------------------


def _plugin_listing(tmp_path: Path, **settings: str) -> dict[str, object]:
    env = clean_environ()
    env.update(AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    env.update({f"AIRFLOW__STORE_METRICS__{k.upper()}": v for k, v in settings.items()})
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "plugins", "--output", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    (plugin,) = [p for p in json.loads(done.stdout) if p["name"] == "store_metrics"]
    return dict(plugin)


@pytest.mark.airflow
@pytest.mark.slow
def test_airflow_lists_the_tab_the_page_and_their_app_unless_ui_is_false(tmp_path: Path) -> None:
    plugin = _plugin_listing(tmp_path)
    assert plugin["external_views"] == [
        {
            "name": "State store",
            "href": "store-metrics/dags/{DAG_ID}",
            "destination": "dag",
            "url_route": "state-store",
            "icon": "store-metrics/static/icon.svg",
            "icon_dark_mode": "store-metrics/static/icon-dark.svg",
        },
        {
            "name": "State store",
            "href": "store-metrics/",
            "destination": "nav",
            "category": "browse",
            "url_route": "store-metrics",
            "icon": "store-metrics/static/icon.svg",
            "icon_dark_mode": "store-metrics/static/icon-dark.svg",
        },
    ]
    assert plugin["fastapi_apps"] == [
        {"app": "fastapi.applications.FastAPI", "url_prefix": "/store-metrics", "name": "store_metrics_ui"}
    ]
    # Counting off, server metrics off: the views stay (they need no counting).
    assert (
        _plugin_listing(tmp_path, enabled="false", server_metrics="false")["external_views"]
        == plugin["external_views"]
    )
    # The dedicated option removes them, and the app.
    off = _plugin_listing(tmp_path, ui="false")
    assert (off["external_views"], off["fastapi_apps"]) == ([], [])
    assert off["fastapi_root_middlewares"] == plugin["fastapi_root_middlewares"]


def test_loading_the_plugin_builds_no_app_and_reads_no_table() -> None:
    # Task processes load the plugin too: the views, the app (FastAPI, Airflow's API modules) and
    # the inventory are only imported when the API server asks for the plugin's apps.
    script = (
        "import sys\n"
        "import store_metrics.integration.plugin\n"
        "ours = ('store_metrics.ui', 'store_metrics.inventory')\n"
        "print(sorted(m for m in sys.modules if m.startswith(ours)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=clean_environ(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(done.stdout.replace("'", '"')) == []
    # ... and when it asks, the views are there (the API server's view of the plugin).
    from store_metrics.integration import plugin

    assert [v["name"] for v in plugin.StoreMetricsPlugin().external_views]


# -- the per-worker cache ----------------------------------------------------------------------------------


def test_many_requests_for_the_same_dag_at_once_cost_one_query() -> None:
    cache: TtlCache[int] = TtlCache(ttl=60)
    asking = threading.Semaphore(0)
    release = threading.Event()

    def slow_load() -> int:
        assert release.wait(10)  # the first request's query: still running while the others ask
        return 42

    def request() -> None:
        asking.release()
        results.append(cache.get("dag", slow_load).value)

    results: list[int] = []
    threads = [threading.Thread(target=request) for _ in range(8)]
    for t in threads:
        t.start()
    for _ in threads:
        assert asking.acquire(timeout=10)
    release.set()
    for t in threads:
        t.join(10)
    assert results == [42] * 8
    assert cache.loads == 1


def test_an_answer_is_kept_for_the_ttl_then_read_again_and_old_keys_are_dropped() -> None:
    now = [0.0]
    cache: TtlCache[str] = TtlCache(ttl=30, size=2, clock=lambda: now[0])
    assert cache.get("a", lambda: "a1").value == "a1"
    now[0] = 29.9
    assert cache.get("a", lambda: "a2").value == "a1"
    now[0] = 30.0
    assert cache.get("a", lambda: "a3").value == "a3"
    cache.get("b", lambda: "b1")
    cache.get("c", lambda: "c1")  # a is the least recently used of three: dropped
    assert cache.peek("a") is None and cache.peek("b") is not None
    assert cache.loads == 4


# -- the calls: the dashboards' PromQL, for one DAG ----------------------------------------------------------


def test_the_calls_query_sums_the_recorded_calls_the_dashboards_read_for_the_dags_series() -> None:
    expr = calls_expr("orders", "1d", "airflow")
    assert expr == (
        "sum by (task_id, store, outcome) (sum_over_time(task:airflow_store_metrics_calls:increase"
        '{dag_id="orders",run_type!="asset_watcher"}[1d]))\n'
        "or sum by (task_id, store, outcome) (sum_over_time(task:airflow_store_metrics_retries:increase"
        '{dag_id="orders",run_type!="asset_watcher"}[1d]))'
    )
    # The series the shipped rules record for the configured prefix, under that name.
    for prefix in ("airflow", "myco.airflow"):
        rules = export.render_all(prefix)[export.COLLECTOR / "rules.yml"]
        assert f"- record: {records.name(records.CALLS, prefix)}\n" in rules
        assert f"- record: {records.name(records.RETRIES, prefix)}\n" in rules
    assert "task:myco_airflow_store_metrics_calls:increase" in calls_expr("orders", "1d", "myco.airflow")
    assert len(COUNTERS) == 12
    # The DAG's id exactly as Airflow has it and its counters carry it (Unicode included), two ids the
    # old tag rule made one apart; a DAG named like a value the plugin makes up selects its own series.
    assert dag_selector("donn\u00e9es_2024") == '{dag_id="donn\u00e9es_2024",run_type!="asset_watcher"}'
    assert dag_selector("donn_es_2024") == '{dag_id="donn_es_2024",run_type!="asset_watcher"}'
    assert dag_selector("unknown") == '{dag_id="unknown",run_type!="asset_watcher"}'
    # Whatever reaches it, one PromQL string: the rule's escapes, then PromQL's for " and \\.
    assert dag_selector('a b"c\\') == '{dag_id="a%20b\\"c\\\\",run_type!="asset_watcher"}'


def test_the_found_ratio_is_found_over_all_reads_and_none_without_reads() -> None:
    from store_metrics.catalogue import Store

    calls = {"task_state_store.read_found": 3.0, "task_state_store.read_absent": 1.0}
    assert found_ratio(calls, Store.TASK) == 0.75
    assert found_ratio(calls, Store.ASSET) is None


def test_the_resume_rate_is_resumed_over_all_retried_attempts_and_apart_from_the_calls() -> None:
    from store_metrics.ui.calls import Calls, resume_rate
    from store_metrics.ui.payload import calls_payload
    from store_metrics.ui.sources import Answer

    assert resume_rate({"retry_resumed": 3.0, "retry_not_resumed": 1.0}) == 0.75
    assert resume_rate({"retry_not_resumed": 2.0}) == 0.0
    assert resume_rate({}) is None
    calls = Calls(
        window="1d",
        expr="q",
        tasks={"load": {"task_state_store.read_found": 4.0}, "extract": {"task_state_store.write": 1.0}},
        at=0.0,
        retries={"load": {"retry_resumed": 3.0, "retry_not_resumed": 1.0}},
    )
    rows = {row["task_id"]: row for row in calls_payload("1d", Answer(calls, "", 0.0))["tasks"]}
    assert rows["load"]["total"] == 4.0  # retried attempts are not calls
    assert rows["load"]["retries"] == {"resumed": 3.0, "started_over": 1.0, "resume_rate": 0.75}
    assert rows["extract"]["retries"] == {"resumed": 0.0, "started_over": 0.0, "resume_rate": None}


def test_the_grafana_link_opens_the_committed_dashboard_on_the_dag() -> None:
    dashboard = json.loads((ROOT / "dashboards" / "store-metrics.json").read_text())
    s = settings(ui_grafana_url="https://grafana.example/sub/")
    assert (
        grafana_link(s, "orders.daily")
        == f"https://grafana.example/sub/d/{dashboard['uid']}?var-dag_id=orders.daily"
    )
    assert grafana_link(s, "donn\u00e9es_2024").endswith("?var-dag_id=donn%C3%A9es_2024")
    assert "dag_id" in [v["name"] for v in dashboard["templating"]["list"]]
    assert grafana_link(settings(), "orders") is None


def test_a_prometheus_that_does_not_answer_is_one_problem_said_once(caplog: pytest.LogCaptureFixture) -> None:
    logs.forget("ui:")
    closed = f"http://127.0.0.1:{free_port()}"
    sources = Sources(settings(ui_prometheus_url=closed, ui_timeout="1", ui_cache_ttl="0.01"))
    with caplog.at_level(logging.WARNING, logger="store_metrics"):
        for _ in range(3):
            answer = sources.calls("orders", "1h")
            assert answer is not None and answer.value is None
            assert answer.problem == "Prometheus could not be reached"  # the details: in the log
            time.sleep(0.02)  # past the TTL: every call asks again
    lines = [r.getMessage() for r in caplog.records if "querying Prometheus" in r.getMessage()]
    assert len(lines) == 1 and closed in lines[0] and "Connection refused" in lines[0]
    assert Sources(settings()).calls("orders", "1h") is None  # no Prometheus configured: nothing to ask


# -- the deployment page: only what the user may read -------------------------------------------------------


def _g(entries: int, stored: int, expired: int | None = 0) -> Group:
    return Group(entries, stored, 0, NOW - dt.timedelta(hours=1), NOW, expired)


DEPLOYMENT = Deployment(
    dags=(("secret", _g(3, 20000, 2)), ("orders", _g(6, 949, 1)), ("small", _g(1, 1)), ("idle", _g(1, 0))),
    assets=(("ui/customers", _g(2, 54, None)), ("ui/orders", _g(2, 31, None))),
    asset_count=2,
    asset_users={"ui/customers": ("orders", "secret"), "ui/orders": ("orders",)},
    read_at=NOW,
    duration_ms=3.0,
)


def test_the_deployment_page_shows_and_counts_only_the_dags_the_user_may_read() -> None:
    answer = Answer(DEPLOYMENT, "", 1.0)
    page = deployment_payload(answer, {"orders", "small", "idle"}, True, None, settings(inventory_top="2"))
    assert [row["dag_id"] for row in page["dags"]] == ["orders", "small"]  # top 2 of the readable ones
    assert page["dag_count"] == 3
    assert page["totals"]["task"]["entries"] == 8 and page["totals"]["task"]["bytes"] == 950
    assert page["totals"]["task"]["expired"] == 1
    assert page["expired"] == [{"dag_id": "orders", "expired": 1, "entries": 6}]
    assert [(a["asset"], a["used_by"]) for a in page["assets"]] == [
        ("ui/customers", ["orders"]),
        ("ui/orders", ["orders"]),
    ]
    assert "secret" not in json.dumps(page)
    assert page["inventory"] == {"configured": False, "problem": None, "stores": {}}


def test_a_user_who_may_not_read_assets_sees_no_asset_and_nobody_sees_a_dag_they_may_not_read() -> None:
    page = deployment_payload(Answer(DEPLOYMENT, "", 0.0), set(), False, None, settings())
    assert (page["dags"], page["dag_count"], page["expired"], page["totals"]["task"]) == ([], 0, [], None)
    assert (page["assets"], page["asset_count"]) == (None, None)


def test_without_prometheus_the_tab_says_in_one_line_what_it_would_show_and_how() -> None:
    assert (
        NO_PROMETHEUS.count(".") == 1
        and "ui_prometheus_url" in NO_PROMETHEUS
        and "ui_grafana_url" in NO_PROMETHEUS
    )


def test_check_says_whether_the_views_are_on_and_whether_their_prometheus_answers() -> None:
    from store_metrics.ui.status import check_lines

    assert check_lines(settings(ui="false")) == [
        "ui: off (ui = false): no State store tab or page in Airflow's UI"
    ]
    lines = check_lines(settings())
    assert lines[0].startswith("ui: a State store tab on each DAG's page (dags/<dag_id>/plugin/state-store)")
    assert lines[1] == "ui: no ui_prometheus_url: the tab shows what the state store holds, not the calls"
    closed = f"http://127.0.0.1:{free_port()}"
    refused = check_lines(settings(ui_prometheus_url=closed, ui_grafana_url="http://grafana:3000"))
    assert refused[1].startswith(f"ui: warning: Prometheus at {closed} does not answer (URLError")
    assert refused[2] == "ui: the tab links to Grafana at http://grafana:3000"


def test_every_file_the_pages_load_is_shipped_and_served_and_nothing_else() -> None:
    from importlib import resources

    from store_metrics.ui.app import STATIC

    shipped = {p.name for p in (resources.files("store_metrics.ui") / "static").iterdir()}
    assert shipped == set(STATIC)
    loaded = set()
    for name in shipped:
        text = (resources.files("store_metrics.ui") / "static" / name).read_text()
        loaded |= set(re.findall(r'(?:href|src)="(?:\.\./)?static/([\w.-]+)"', text))
        loaded |= set(re.findall(r'from "\./([\w.-]+)"', text))
    assert loaded == {"store-metrics.css", "dag.js", "deployment.js", "common.js"}
    assert loaded <= shipped
