"""``count_at = api_server`` scraped: the series Prometheus holds are the task side's, to the call.

The scraped deployment (``conftest.py``): ``count_at = api_server``, the OpenTelemetry backend with
its Prometheus exporter, two API server workers each serving its own endpoint, a real Prometheus
scraping both workers directly (no Collector, no StatsD). The series it holds, summed across
workers, are exactly those the task side sent in the switching deployment's first phase; every
dashboard query returns what the calls say; calls made by a raw HTTP client with a task token
minted by Airflow's own JWT generator are counted with that task instance's tags; a task cleared
and re-run is counted as itself, and so are calls still made as its archived attempt (a write
Airflow refuses with 410 Gone on 3.4: ``error``; a read answered 404: ``read_absent``); requests
the API server refuses fire the error alert on Prometheus 3.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from store_metrics import catalogue
from support import e2e
from support.count_at_runs import (
    JOB,
    MOCK,
    PYOP,
    TASKS,
    WORKERS,
    Calls,
    Scraped,
    Switching,
    airflow_version,
    api,
    as_prometheus,
    execution_client,
    held,
    in_deployment,
    mint_token,
    series_of,
    task_series,
    uuid_of,
    wait_for_delta,
)
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.peers]


def test_each_worker_serves_its_own_endpoint_and_prometheus_scrapes_them_directly(scraped: Scraped) -> None:
    up = {s["metric"]["instance"]: s["value"][1] for s in scraped.prom.query(f'up{{job="{JOB}"}}')}
    ports = range(scraped.first_port, scraped.first_port + WORKERS)
    assert up == {f"127.0.0.1:{port}": "1" for port in ports}
    log = scraped.airflow.log_path.read_text(errors="replace")
    workers = set(re.findall(r"count_at = api_server: API server worker (\S+) counts", log))
    assert len(workers) == WORKERS, workers


def test_the_api_server_gives_exactly_the_series_the_task_side_gave(
    scraped: Scraped, switching: Switching
) -> None:
    """The same runs: summed across workers, the series and values equal the task side's own totals."""
    task_side = as_prometheus(switching.phases["tasks"][1])
    assert held(scraped.prom, scraped.end) == task_side == scraped.calls.counts
    # Every call was attributed to its task instance: no unknown caller.
    assert scraped.prom.query('{__name__=~"airflow_.*_state_store_.*", dag_id="<unknown>"}') == []


@pytest.mark.prometheus
@pytest.mark.parametrize(
    "variables", [*e2e.DEMO_VARIABLES, pytest.param({"operator": [MOCK]}, id="operator")]
)
def test_every_dashboard_query_returns_the_calls(scraped: Scraped, variables: dict[str, list[str]]) -> None:
    """Counts over the whole run are the calls; per-second queries the recorded calls' means, summed
    over workers, in exactly the groups the runs made."""
    prom, model = scraped.prom, scraped.calls
    rng = f"{math.ceil(scraped.end - prom.started) + 60}s"
    filters = e2e.filters_of(variables)
    means = e2e.recorded(prom, scraped.end, rng, e2e.mean)
    rate_groups = 0
    for title, target, spec in e2e.dashboard_targets(scraped.exported):
        expr = e2e.interpolate(target["expr"], variables, rng=rng, interval=rng, job=JOB)
        actual = e2e.as_groups(prom.query(expr, scraped.end), spec.by)
        what = f"{title} [{target['refId']}] with {variables or 'All'}"
        if spec.kind == "count":
            e2e.assert_groups(actual, e2e.expected(spec, model, filters), rel=1e-9, what=what)
        else:
            wanted = e2e.expected(spec, means, filters, seconds=1.0)
            e2e.assert_exact_groups(actual, wanted, what)
            rate_groups += len(wanted)
    assert rate_groups > 0


def test_a_raw_http_client_with_a_task_token_is_counted_as_that_task(scraped: Scraped) -> None:
    airflow, prom = scraped.airflow, scraped.prom
    rows = airflow.home.query(
        "select id, task_id from task_instance where dag_id = 'state_store_metrics_01' and state = 'success'"
    )
    assert rows, "no task instance of state_store_metrics_01"
    ti_id = str(uuid_of(rows[0][0]))
    other = airflow.home.query("select id from task_instance where dag_id = 'state_store_metrics_03'")[0][0]
    token = mint_token(airflow, ti_id)
    before = held(prom)
    asset = {"name": "state_store_metrics/asset"}
    with execution_client(airflow, token) as client:
        answers = [
            client.put(f"store/ti/{ti_id}/raw", json={"value": {"n": 1}}).status_code,
            client.get(f"store/ti/{ti_id}/raw").status_code,
            client.get(f"store/ti/{ti_id}/raw-missing").status_code,
            client.delete(f"store/ti/{ti_id}/raw").status_code,
            client.delete(f"store/ti/{ti_id}").status_code,
            client.put(
                "store/asset/by-name/value", params={**asset, "key": "raw"}, json={"value": 1}
            ).status_code,
            client.get("store/asset/by-name/value", params={**asset, "key": "raw"}).status_code,
            client.delete("store/asset/by-name/value", params={**asset, "key": "raw"}).status_code,
            client.get("store/asset/by-name/value", params={"name": "no/such/asset", "key": "k"}).status_code,
            client.put(f"store/ti/{ti_id}/bad", json={"not_value": 1}).status_code,  # 422
            client.get(f"store/ti/{uuid_of(other)}/k").status_code,  # another task's path: 403
            client.get(f"store/ti/{ti_id}/k", headers={"Authorization": "Bearer nonsense"}).status_code,
        ]
        # A last request on the same connection (so the same API server worker), as the same task
        # instance (so counted after the others, even those waiting for its metadata query), on a
        # series of its own: clearing another task's store (403, an error of operation clear).
        marker = client.delete(f"store/ti/{uuid_of(other)}").status_code
    assert answers == [204, 200, 404, 204, 204, 204, 200, 204, 404, 422, 403, 403]
    assert marker == 403
    tags = dict(task_series("state_store_metrics_01", "touch_store", PYOP))
    unknown = dict.fromkeys(("dag_id", "task_id", "run_type", "operator"), catalogue.UNKNOWN)
    key = series_of
    wanted = {
        key("task", "write", tags): 1,
        key("task", "read_found", tags): 1,
        key("task", "read_absent", tags): 1,
        key("task", "delete", tags): 1,
        key("task", "clear", tags): 1,
        key("asset", "write", tags): 1,
        key("asset", "read_found", tags): 1,
        key("asset", "delete", tags): 1,
        key("asset", "read_absent", tags): 1,
        key("task", "error", {**tags, "operation": "set"}): 1,
        # The token is valid but names another task instance than the path: its own task's error.
        key("task", "error", {**tags, "operation": "get"}): 1,
        # No valid token: no task instance to name.
        key("task", "error", {**unknown, "operation": "get"}): 1,
    }
    wait_for_delta(prom, before, wanted, marker=key("task", "error", {**tags, "operation": "clear"}))


# -- a cleared task: its new attempt, and calls still made as the archived one ---------------------------


def test_a_cleared_task_reruns_as_itself_and_its_archived_attempt_counts_as_it(
    scraped: Scraped,
) -> None:
    """Clearing a finished task makes a new attempt with a new task instance id and archives the old
    one: Airflow 3.4 keeps it in ``task_instance`` outside the working set (hidden from ORM queries
    without ``include_all_attempts``), 3.3 moves it to ``task_instance_history``. The re-run counts as
    the task, and so do calls made with the old attempt's token: the write Airflow refuses (410 Gone
    on 3.4, 404 on 3.3) as ``error{operation=set}``, the read it answers 404 as ``read_absent``."""
    airflow, prom = scraped.airflow, scraped.prom
    dag_id, (task_id, operator) = "state_store_metrics_03", TASKS["state_store_metrics_03"]
    ((old, run_id),) = airflow.home.query(
        "select id, run_id from task_instance where dag_id = ? and task_id = ?", dag_id, task_id
    )
    before = held(prom)
    api(
        airflow,
        "POST",
        f"/api/v2/dags/{dag_id}/clearTaskInstances",
        {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False},
    )

    def rerun() -> bool:
        attempts = airflow.home.query(
            "select count(*) from task_instance where dag_id = ? and task_id = ? and id != ? and state = ?",
            dag_id, task_id, old, "success",
        )  # fmt: skip
        runs = airflow.home.query("select state from dag_run where run_id = ?", run_id)
        return attempts == [(1,)] and runs == [("success",)]

    wait_until(lambda: rerun() or airflow._died(), 120, interval=0.5)
    assert rerun(), airflow.log_tail()

    archived = str(uuid_of(old))
    token = mint_token(airflow, archived)
    other = airflow.home.query("select id from task_instance where dag_id = 'state_store_metrics_01'")[0][0]
    with execution_client(airflow, token) as client:
        answers = [
            client.put(f"store/ti/{archived}/late", json={"value": 1}).status_code,
            client.get(f"store/ti/{archived}/late").status_code,
        ]
        # The marker (wait_for_delta): clearing another task's store, refused (403, or 410 from 3.4's
        # live-attempt check), an error of operation clear under the archived attempt's own tags.
        assert client.delete(f"store/ti/{uuid_of(other)}").status_code in (403, 410)
    archives_in_place = airflow_version() >= (3, 4)
    assert answers == [410 if archives_in_place else 404, 404]

    tags = dict(task_series(dag_id, task_id, operator))
    rerun_calls = Calls()
    rerun_calls.run(dag_id)
    wanted = {
        **as_prometheus(rerun_calls.totals),
        series_of("task", "error", {**tags, "operation": "set"}): 1,
        series_of("task", "read_absent", tags): 1,
    }
    wait_for_delta(prom, before, wanted, marker=series_of("task", "error", {**tags, "operation": "clear"}))

    # The query a cold API server worker makes finds the archived attempt, where a plain ORM query
    # on TaskInstance (working set only on 3.4; the row has moved on 3.3) finds nothing.
    found = json.loads(
        in_deployment(
            airflow,
            "import json, uuid\n"
            "from sqlalchemy import select\n"
            "from airflow.models.taskinstance import TaskInstance\n"
            "from airflow.utils.session import create_session\n"
            "from store_metrics.api_server.attribution import lookup_task_instance\n"
            f"ti = uuid.UUID({archived!r})\n"
            "with create_session() as session:\n"
            "    plain = session.scalar(select(TaskInstance.task_id).where(TaskInstance.id == ti))\n"
            "print(json.dumps({'plain': plain, 'tags': lookup_task_instance(ti)}))\n",
        )
    )
    assert found == {"plain": None, "tags": tags}


# -- a failing scenario: the error alert ----------------------------------------------------------------


def test_requests_the_api_server_refuses_fire_the_error_alert(scraped: Scraped) -> None:
    """Calls that fail at the API server are counted there as errors, and the error alert fires on
    Prometheus 3 for the DAG they are counted under: here ten requests without a valid token, all
    refused (403), counted under ``dag_id="<unknown>"`` -- a ratio of 1 over at least 10 calls."""
    airflow, prom = scraped.airflow, scraped.prom
    ((ti_id,),) = airflow.home.query(
        "select id from task_instance where dag_id = 'state_store_metrics_01' and state = 'success' limit 1"
    )
    with execution_client(airflow, "nonsense") as client:
        answers = [client.get(f"store/ti/{uuid_of(ti_id)}/k{n}").status_code for n in range(10)]
    assert answers == [403] * 10

    def firing() -> set[str]:
        return {
            a["labels"]["dag_id"]
            for a in prom.api("alerts")["alerts"]
            if a["labels"]["alertname"] == "StateStoreErrorRateHigh" and a["state"] == "firing"
        }

    wait_until(lambda: catalogue.UNKNOWN in firing(), 60, interval=0.5)
    assert catalogue.UNKNOWN in firing(), prom.api("alerts")["alerts"]
