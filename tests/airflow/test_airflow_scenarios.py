"""The plugin on real Airflow 3.3 under dag.test(): the upstream proposal's scenarios and beyond.

Every DAG here runs in a fresh process through the installed plugin (entry point
``airflow.plugins``), configured only by ``AIRFLOW__STORE_METRICS__*`` variables, and the
counts are read from what a real backend sent: DogStatsD / StatsD lines on a real UDP socket,
or the Prometheus exposition the demo scrapes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.deploy import SERVER_PLUGINS
from support.totals import by_name, totals
from testbed.airflow import AirflowHome, make_home
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

PYOP = "_PythonDecoratedOperator"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    return make_home(tmp_path_factory.mktemp("airflow-home"))


def dogstatsd_env(home: AirflowHome, udp_receiver: UdpReceiver, **extra: str) -> dict[str, str]:
    return home.env(
        AIRFLOW__STORE_METRICS__BACKEND="dogstatsd",
        AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
        AIRFLOW__STORE_METRICS__PORT=str(udp_receiver.port),
        **extra,
    )


def tags(dag_id: str, task_id: str, operator: str = PYOP, **more: str) -> tuple[tuple[str, str], ...]:
    return (
        ("dag_id", dag_id),
        ("task_id", task_id),
        ("run_type", "manual"),
        ("operator", operator),
        *more.items(),
    )


# -- the upstream proposal's four scenarios, through `store-metrics demo` ---------------------------

PROPOSAL_SERIES = {
    # 1. plain @task, both read outcomes
    ("task", "read_absent", "state_store_metrics_01", "touch_store", PYOP): 1,
    ("task", "read_found", "state_store_metrics_01", "touch_store", PYOP): 1,
    ("task", "write", "state_store_metrics_01", "touch_store", PYOP): 1,
    # 2. asset store alongside task store, run twice
    ("asset", "read_absent", "state_store_metrics_02", "touch_asset_store", PYOP): 1,
    ("asset", "read_found", "state_store_metrics_02", "touch_asset_store", PYOP): 1,
    ("asset", "write", "state_store_metrics_02", "touch_asset_store", PYOP): 2,
    ("task", "read_absent", "state_store_metrics_02", "touch_asset_store", PYOP): 2,
    # 3. delete and clear
    ("task", "write", "state_store_metrics_03", "delete_and_clear", PYOP): 2,
    ("task", "delete", "state_store_metrics_03", "delete_and_clear", PYOP): 1,
    ("task", "clear", "state_store_metrics_03", "delete_and_clear", PYOP): 1,
    ("asset", "write", "state_store_metrics_03", "delete_and_clear", PYOP): 1,
    ("asset", "delete", "state_store_metrics_03", "delete_and_clear", PYOP): 1,
    # 4. ResumableJobMixin operator
    ("task", "read_absent", "example_resumable_job", "run_batch_job", "MockBatchOperator"): 1,
    ("task", "write", "example_resumable_job", "run_batch_job", "MockBatchOperator"): 1,
}
_SERIES_LINE = re.compile(
    r'^airflow_(task|asset)_state_store_([a-z_]+)_total\{dag_id="([^"]+)",operator="([^"]+)",'
    r'run_type="manual",task_id="([^"]+)"\} ([0-9.]+)$'
)


def test_demo_reproduces_the_proposal_series_exactly(home: AirflowHome, tmp_path: Path) -> None:
    """`store-metrics demo`, run as a user runs it, prints exactly the proposal's series and counts."""
    env = {k: v for k, v in home.env().items() if not k.startswith("AIRFLOW")}
    proc = subprocess.run(
        [sys.executable, "-m", "store_metrics.commands.cli", "demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "[1/3]" in out and "[2/3]" in out and "[3/3]" in out  # it tells the user what it does
    seen = {}
    for line in out.splitlines():
        match = _SERIES_LINE.match(line.strip())
        if match:
            scope, outcome, dag_id, operator, task_id, value = match.groups()
            seen[(scope, outcome, dag_id, task_id, operator)] = float(value)
    assert seen == {k: float(v) for k, v in PROPOSAL_SERIES.items()}
    # Airflow's own resumable_job family still counts, side by side, nothing shared.
    assert "airflow.resumable_job.fresh_submit,operator=MockBatchOperator:1|c" in out
    # The same endpoint feeds the dashboard's other rows: the watcher's watermark (read absent,
    # read found, write: three series), the retried tasks and the failing call (nine: each task's
    # calls, a retry resumed, one not), the API server's route metrics, the footprint.
    rows = re.search(
        r"series (\d+) for asset watchers, (\d+) for retries and errors, (\d+) for the API server, "
        r"(\d+) for the footprint",
        out,
    )
    assert rows is not None, out
    watchers, retries, api_server, footprint = map(int, rows.groups())
    assert watchers == 3 and retries == 9 and api_server > 0 and footprint > 0


# -- beyond the proposal ------------------------------------------------------------------------------


def test_mapped_two_assets_and_errors(home: AirflowHome, udp_receiver: UdpReceiver, tmp_path: Path) -> None:
    # The async accessors are exercised under `airflow standalone` (test_through_the_peers.py):
    # under dag.test() Airflow 3.3.2's in-process comms have no `asend`, wrapped or not.
    caught_file = tmp_path / "caught.json"
    env = dogstatsd_env(home, udp_receiver, STORE_METRICS_TEST_OUT=str(caught_file))
    result = home.run(
        tmp_path, ["store_metrics_mapped", "store_metrics_two_assets", "store_metrics_errors"], env
    )
    assert result["runs"] == [
        ["store_metrics_mapped", "success"],
        ["store_metrics_two_assets", "success"],
        ["store_metrics_errors", "failed"],  # fail_on_none fails with the accessor's own error
    ]
    expected = {
        # three mapped instances, one series (no map_index tag): 3 x one instance
        ("airflow.task_state_store.read_absent", tags("store_metrics_mapped", "resume_or_start")): 3,
        ("airflow.task_state_store.write", tags("store_metrics_mapped", "resume_or_start")): 3,
        ("airflow.asset_state_store.write", tags("store_metrics_two_assets", "sync_both")): 1,
        ("airflow.asset_state_store.read_absent", tags("store_metrics_two_assets", "sync_both")): 1,
        ("airflow.asset_state_store.read_found", tags("store_metrics_two_assets", "sync_both")): 1,
        ("airflow.asset_state_store.delete", tags("store_metrics_two_assets", "sync_both")): 1,
        ("airflow.task_state_store.error", tags("store_metrics_errors", "refuse", operation="set")): 1,
        ("airflow.asset_state_store.error", tags("store_metrics_errors", "refuse", operation="get")): 1,
        ("airflow.task_state_store.error", tags("store_metrics_errors", "fail_on_none", operation="set")): 1,
    }
    wait_until(lambda: sum(totals(udp_receiver.lines(), "dogstatsd").values()) >= sum(expected.values()), 10)
    assert dict(totals(udp_receiver.lines(), "dogstatsd")) == expected
    # The task saw the real accessor's exception, unchanged.
    caught = json.loads(caught_file.read_text())
    assert caught["set"] == [
        "ValueError",
        "Cannot set value as None",
        "ValueError",
        "Cannot set value as None",
    ]
    assert caught["asset_get"][0] == "ValueError"
    assert "use context['asset_state_store'][MY_ASSET]" in caught["asset_get"][1]


def test_with_no_configuration_on_the_helm_charts_metrics_the_counts_arrive_tagged(
    home: AirflowHome, udp_receiver: UdpReceiver, tmp_path: Path
) -> None:
    """`pip install` and nothing else, on the Helm chart's [metrics]: StatsD on, no tag flag.

    Airflow's own StatsD client would send every DAG's calls as one label-less series; the
    plugin's default (backend = auto) sends its own InfluxDB-tagged lines to the same receiver.
    """
    chart_metrics = {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(udp_receiver.port),
    }
    result = home.run(tmp_path, ["state_store_metrics_01"], home.env(**chart_metrics))
    assert result["runs"] == [["state_store_metrics_01", "success"]]
    ours = ("airflow.task_state_store.", "airflow.asset_state_store.")
    wait_until(lambda: sum(line.startswith(ours) for line in udp_receiver.lines()) >= 3, 10)
    received = totals([line for line in udp_receiver.lines() if line.startswith(ours)], "influx")
    assert dict(received) == {
        ("airflow.task_state_store.read_absent", tags("state_store_metrics_01", "touch_store")): 1,
        ("airflow.task_state_store.read_found", tags("state_store_metrics_01", "touch_store")): 1,
        ("airflow.task_state_store.write", tags("state_store_metrics_01", "touch_store")): 1,
    }
    # Airflow's own metrics reached the same receiver, untagged, as the chart's [metrics] says.
    assert any(line.startswith("airflow.") and "," not in line.split(":")[0] for line in udp_receiver.lines())
    assert "backend = auto: through Airflow's StatsD client" in result["log"]


def test_backend_none_and_disabled_emit_nothing(
    home: AirflowHome, udp_receiver: UdpReceiver, tmp_path: Path
) -> None:
    # Control: the same DAG with the statsd backend does reach the socket.
    statsd = home.env(
        AIRFLOW__STORE_METRICS__BACKEND="statsd",
        AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
        AIRFLOW__STORE_METRICS__PORT=str(udp_receiver.port),
    )
    assert home.run(tmp_path, ["state_store_metrics_01"], statsd)["runs"] == [
        ["state_store_metrics_01", "success"]
    ]
    wait_until(lambda: len(udp_receiver.lines()) >= 3)
    assert by_name(totals(udp_receiver.lines(), "influx"), dag_id="state_store_metrics_01") == {
        "airflow.task_state_store.read_absent": 1,
        "airflow.task_state_store.write": 1,
        "airflow.task_state_store.read_found": 1,
    }
    udp_receiver.clear()

    none = {**statsd, "AIRFLOW__STORE_METRICS__BACKEND": "none"}
    result = home.run(tmp_path, ["state_store_metrics_01"], none)
    assert result["runs"] == [["state_store_metrics_01", "success"]]
    assert result["configured"] is True and result["emitter"] == "AggregatingEmitter"

    disabled = {**statsd, "AIRFLOW__STORE_METRICS__ENABLED": "false"}
    result = home.run(tmp_path, ["state_store_metrics_01"], disabled)
    assert result["runs"] == [["state_store_metrics_01", "success"]]
    assert result["configured"] is False
    assert "store-metrics is disabled" in result["log"]
    # Both runs have exited: anything they sent is ahead of a marker sent now.
    assert udp_receiver.lines_before_marker() == []


def test_bad_configuration_is_logged_once_and_tasks_run(home: AirflowHome, tmp_path: Path) -> None:
    env = home.env(AIRFLOW__STORE_METRICS__BACKEND="prometheus")
    result = home.run(tmp_path, ["state_store_metrics_01", "state_store_metrics_03"], env)
    assert result["runs"] == [["state_store_metrics_01", "success"], ["state_store_metrics_03", "success"]]
    message = (
        "[store_metrics] backend = 'prometheus' is not valid: accepted values are "
        "auto, airflow, otel, dogstatsd, statsd, none"
    )
    assert result["log"].count(message) == 1
    assert result["configured"] is False


def test_stays_out_of_the_way_when_airflow_counts_itself(
    home: AirflowHome, udp_receiver: UdpReceiver, tmp_path: Path
) -> None:
    env = dogstatsd_env(home, udp_receiver, STORE_METRICS_TEST_SIMULATE_NATIVE="1")
    result = home.run(tmp_path, ["state_store_metrics_01", "state_store_metrics_01"], env)
    assert result["runs"] == [["state_store_metrics_01", "success"]] * 2
    assert result["configured"] is False
    assert result["log"].count("counts state store calls itself; the plugin stays out of the way") == 1
    # The runs have exited: anything they sent is ahead of a marker sent now.
    assert udp_receiver.lines_before_marker() == []


#: Airflow's own API server setup of plugins (``init_plugins``) on a fresh FastAPI app: which root
#: middlewares it added, and what store-metrics logged while Airflow loaded the plugins.
_INIT_PLUGINS = """
import json, logging
records = []

class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.levelname, record.getMessage()])

logging.getLogger("store_metrics").addHandler(Keep())
from fastapi import FastAPI
from airflow.api_fastapi.app import init_plugins
from airflow.plugins_manager import AirflowPlugin

app = FastAPI()
init_plugins(app)
print(json.dumps({"middlewares": [m.cls.__name__ for m in app.user_middleware], "records": records,
                  "team_scoped_plugins": hasattr(AirflowPlugin, "team_name")}))
"""


def test_with_multi_team_on_the_api_server_keeps_the_global_plugins_middleware(
    home: AirflowHome, tmp_path: Path
) -> None:
    """``[core] multi_team`` on, store-metrics' own plugin (global) beside a copy given a team_name.

    Airflow 3.4 skips a team-scoped plugin's root middleware: the copy's is skipped and store-metrics
    says once why that plugin counts nothing in the API server; the global plugin's is added. Airflow
    3.3 has no team-scoped plugins: both are added, and nothing is said.
    """
    shutil.copy(SERVER_PLUGINS / "store_metrics_test_team_scoped.py", tmp_path)
    env = home.env(AIRFLOW__CORE__MULTI_TEAM="True", AIRFLOW__CORE__PLUGINS_FOLDER=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", _INIT_PLUGINS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    ours = result["middlewares"].count("StateStoreRouteMetrics")
    if result["team_scoped_plugins"]:
        assert ours == 1, result
        assert result["records"] == [
            [
                "WARNING",
                "store-metrics: server-side counting is off: plugin 'store_metrics_test_team_scoped' has "
                "team_name = 'payments' and [core] multi_team is on: Airflow skips the root middlewares of "
                "team-scoped plugins, so the API server counts no state store request (no route metrics, "
                "and with count_at = api_server nothing at all). Leave team_name unset: the plugin is "
                "global, and calls still carry their own team_name tag",
            ]
        ]
    else:
        assert ours == 2, result
        assert result["records"] == []


def test_the_plugin_is_listed_by_airflow(home: AirflowHome) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "airflow", "plugins", "-o", "json"],
        env=home.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    plugins = json.loads(proc.stdout[proc.stdout.index("[") :])
    ours = [p for p in plugins if p["name"] == "store_metrics"]
    assert ours, proc.stdout
    listed = json.dumps(ours[0])
    assert "store_metrics.integration.task_listener.StateStoreListener" in listed
    assert "store_metrics.integration.plugin.StateStoreRouteMetrics" in listed  # the API server's middleware
