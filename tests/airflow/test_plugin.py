"""The plugin's own decisions, without running a task: tags, noticing a native Airflow, its
"counts go nowhere" warning, and the task-end flush bounded by the emitter's flush_timeout.

The task instance here is a stand-in with the attributes the plugin reads (``stats_tags``,
``dag_id``, ``task_id``, ``task``, ``get_template_context``); the real RuntimeTaskInstance is
exercised end to end in test_airflow_scenarios.py and test_through_the_peers.py. Multi-team
deployments cannot be set up under dag.test() here, which is why team_name is checked at this
level. The listener tests run in a fresh process each (Airflow's configuration is read from its
environment, and "say it once" is per process), through the real backends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from store_metrics import native
from store_metrics.integration import compatibility, plugin, task_listener
from testbed.airflow import clean_environ
from testbed.endpoints import SilentTcpServer
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until


class KubernetesPodOperator:
    """Only its name matters: the operator tag is the task's class name."""


class DagRunType:
    value = "scheduled"


def ti(**stats_tags: str) -> Any:
    return SimpleNamespace(
        stats_tags=stats_tags, dag_id="fallback_dag", task_id="fallback_task", task=KubernetesPodOperator()
    )


def test_tags_come_from_the_task_instance_and_the_dag_run() -> None:
    context = {"dag_run": SimpleNamespace(run_type=DagRunType())}
    tags = task_listener.tags_for(ti(dag_id="etl", task_id="load"), context)
    assert tags == {
        "dag_id": "etl",
        "task_id": "load",
        "run_type": "scheduled",
        "operator": "KubernetesPodOperator",
    }


def test_team_name_is_a_tag_only_when_the_run_has_one() -> None:
    context = {"dag_run": SimpleNamespace(run_type="manual")}
    tags = task_listener.tags_for(ti(dag_id="etl", task_id="load", team_name="payments"), context)
    assert tags["team_name"] == "payments"
    assert list(tags) == ["dag_id", "task_id", "run_type", "operator", "team_name"]
    assert "team_name" not in task_listener.tags_for(ti(dag_id="etl", task_id="load", team_name=""), context)


def test_a_missing_dag_run_is_run_type_unknown() -> None:
    assert task_listener.tags_for(ti(), {})["run_type"] == "<unknown>"
    assert task_listener.tags_for(ti(), {})["dag_id"] == "fallback_dag"


def test_airflow_3_3_2_does_not_count_the_state_store_itself() -> None:
    native.airflow_emits_state_store_metrics.cache_clear()
    assert native.airflow_emits_state_store_metrics() is False


def test_an_airflow_whose_accessor_takes_stats_tags_counts_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """The upstream proposal passes ``stats_tags`` into the accessor: that Airflow counts on its own."""
    from airflow.sdk.execution_time import context

    class TaskStateStoreAccessor:
        def __init__(self, ti_id: Any, scope: Any, stats_tags: dict[str, str] | None = None) -> None:
            pass

    monkeypatch.setattr(context, "TaskStateStoreAccessor", TaskStateStoreAccessor)
    native.airflow_emits_state_store_metrics.cache_clear()
    try:
        assert native.airflow_emits_state_store_metrics() is True
    finally:
        native.airflow_emits_state_store_metrics.cache_clear()


def test_check_names_this_airflow_release_and_what_counts_on_it(tmp_path: Path) -> None:
    """``store-metrics check`` as a user runs it: the release, whether it is tested, the triggerer."""
    release = compatibility.airflow_version()
    assert release is not None
    environ = {**clean_environ(), "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__STORE_METRICS__BACKEND": "none"}

    def check(**env: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "store_metrics.commands.cli", "check"],
            env={**environ, **env}, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 4, proc.stdout + proc.stderr  # backend none: sends nowhere
        return proc

    proc = check()
    lines = proc.stdout.splitlines()
    tested = ", ".join(compatibility.TESTED)
    if release in compatibility.TESTED:
        assert f"airflow: apache-airflow {release}, a tested release (tested: {tested})" in lines
    else:  # a newer release the matrix picked from the index before TESTED names it
        assert f"airflow: apache-airflow {release}, supported (>=3.3.0,<3.5) but not a tested release" in (
            proc.stdout
        )
    assert "triggerer: asset watchers' state store calls are counted (the trigger runner is forked)" in lines
    assert not any(line.startswith("multi-team") for line in lines)  # [core] multi_team is off
    multi_team = check(AIRFLOW__CORE__MULTI_TEAM="True").stdout.splitlines()
    assert (
        "multi-team: the API server adds store-metrics' middleware ([core] multi_team is on; the "
        "store_metrics plugin is global, with no team_name)"
    ) in multi_team


def test_the_plugin_registers_the_listener_and_the_server_middleware() -> None:
    assert plugin.StoreMetricsPlugin.name == "store_metrics"
    assert plugin.listener in plugin.StoreMetricsPlugin.listeners
    middlewares = plugin.StoreMetricsPlugin.fastapi_root_middlewares
    assert [m["middleware"].__name__ for m in middlewares] == ["StateStoreRouteMetrics"]


# -- the listener, driven as the Task SDK drives it ---------------------------------------------

#: Runs ``argv[1]`` tasks through the listener's hooks in this process: running (configure on
#: first use, wrap the context's store), one set() through the wrapped store, then success (the
#: task-end flush). Prints what each end hook cost and every store_metrics log record.
_TASKS = textwrap.dedent(
    """
    import json, logging, os, sys, time
    from types import SimpleNamespace

    from store_metrics.counting import accessors, runtime
    from store_metrics.integration import plugin, task_listener

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append([record.levelname, record.getMessage()])

    logger = logging.getLogger("store_metrics")
    logger.addHandler(Keep())
    logger.setLevel(logging.INFO)

    class Store:  # the task store accessor's supervisor round trip, in memory
        def __init__(self):
            self.data = {}
        def get(self, key, default=None):
            return self.data.get(key, default)
        def set(self, key, value, *, retention=None):
            self.data[key] = value
        def delete(self, key):
            self.data.pop(key, None)
        def clear(self):
            self.data.clear()

    class PythonOperator:
        pass

    # The plugin only instruments the Task SDK's RuntimeTaskInstance; these stand-ins have
    # every attribute it reads from one.
    task_listener._is_task_runner_ti = lambda ti: True
    tasks = []
    for i in range(int(sys.argv[1])):
        context = {"task_state_store": Store(), "dag_run": SimpleNamespace(run_type="manual")}
        ti = SimpleNamespace(
            stats_tags={}, dag_id="d", task_id=f"t{i}", task=PythonOperator(),
            get_template_context=lambda context=context: context,
        )
        plugin.listener.on_task_instance_running(None, ti)
        context["task_state_store"].set("k", 1)
        started = time.monotonic()
        plugin.listener.on_task_instance_success(None, ti)
        tasks.append({
            "end_hook_seconds": time.monotonic() - started,
            "instrumented": accessors.is_instrumented(context["task_state_store"]),
        })
    emitter = runtime.get_emitter()
    counted = {}
    for (name, _), total in (emitter.snapshot() if runtime.is_configured() else {}).items():
        counted[name] = counted.get(name, 0) + total
    print(json.dumps({
        "tasks": tasks,
        "records": records,
        "flush_timeout": getattr(emitter, "flush_timeout", None),
        "backend": emitter.backend.describe() if runtime.is_configured() else None,
        "counted": counted,
    }), flush=True)
    # A hung OTLP export may still hold the worker: leave without the exit flush's wait.
    os._exit(0)
    """
)

NOWHERE = (
    "store-metrics: Airflow's [metrics] enables no backend, so the counts go nowhere. Set "
    "[metrics] statsd_on, statsd_datadog_enabled or otel_on, or [store_metrics] backend."
)


def run_tasks(tmp_path: Path, count: int, **env: str) -> dict[str, Any]:
    """``count`` tasks through the listener in a fresh process configured by ``env`` only."""
    environ = {**clean_environ(), "AIRFLOW_HOME": str(tmp_path), **env}
    done = subprocess.run(
        [sys.executable, "-c", _TASKS, str(count)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def problems(result: dict[str, Any]) -> list[list[str]]:
    """The [level, message] records at WARNING or above."""
    return [r for r in result["records"] if r[0] in ("WARNING", "ERROR", "CRITICAL")]


def test_the_airflow_backend_with_no_metrics_backend_warns_once_that_counts_go_nowhere(
    tmp_path: Path,
) -> None:
    result = run_tasks(
        tmp_path,
        3,
        AIRFLOW__STORE_METRICS__BACKEND="airflow",
        AIRFLOW__METRICS__STATSD_ON="False",
        AIRFLOW__METRICS__STATSD_DATADOG_ENABLED="False",
        AIRFLOW__METRICS__OTEL_ON="False",
    )
    # Three tasks, each instrumented and counted...
    assert [t["instrumented"] for t in result["tasks"]] == [True, True, True]
    assert result["counted"] == {"task_state_store.write": 3}
    # ...and the warning exactly once, in these words, and nothing else at WARNING or above.
    assert problems(result) == [["WARNING", NOWHERE]]
    assert not any("sending to" in message for _, message in result["records"])


def test_the_airflow_backend_following_statsd_does_not_warn(tmp_path: Path) -> None:
    """The control: the same run with [metrics] statsd_on says where counts go, and no warning."""
    receiver = UdpReceiver()
    try:
        result = run_tasks(
            tmp_path,
            3,
            AIRFLOW__STORE_METRICS__BACKEND="airflow",
            AIRFLOW__METRICS__STATSD_ON="True",
            AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED="True",
            AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
            AIRFLOW__METRICS__STATSD_PORT=str(receiver.port),
        )
    finally:
        receiver.close()
    assert result["counted"] == {"task_state_store.write": 3}
    assert problems(result) == []
    assert ["INFO", "store-metrics: counting state store calls, sending to " + result["backend"]] in result[
        "records"
    ]
    assert result["backend"] == "airflow: Airflow's StatsD client ([metrics] statsd_on)"


def test_with_no_configuration_on_the_charts_metrics_the_plugin_sends_its_own_tagged_lines(
    tmp_path: Path,
) -> None:
    """The Helm chart's [metrics] (StatsD, no tag flag) and no [store_metrics]: auto, said once at INFO."""
    receiver = UdpReceiver()
    try:
        result = run_tasks(
            tmp_path,
            2,
            AIRFLOW__METRICS__STATSD_ON="True",
            AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
            AIRFLOW__METRICS__STATSD_PORT=str(receiver.port),
        )
    finally:
        receiver.close()
    assert result["backend"] == f"statsd udp://127.0.0.1:{receiver.port} (InfluxDB tags) prefix='airflow'"
    assert result["counted"] == {"task_state_store.write": 2}
    assert problems(result) == []
    said = [m for _, m in result["records"] if "sending to" in m]
    assert said == [
        f"store-metrics: counting state store calls, sending to {result['backend']} (backend = auto: through "
        "Airflow's StatsD client ([metrics] statsd_on) every tag is dropped ([metrics] statsd_on without "
        "statsd_influxdb_enabled): store-metrics sends its own tagged lines)"
    ]


def test_an_explicit_airflow_backend_that_would_drop_the_tags_counts_nothing_and_says_why_once(
    tmp_path: Path,
) -> None:
    result = run_tasks(
        tmp_path,
        3,
        AIRFLOW__STORE_METRICS__BACKEND="airflow",
        AIRFLOW__METRICS__STATSD_ON="True",
        AIRFLOW__METRICS__STATSD_PORT=str(free_port()),
    )
    assert [t["instrumented"] for t in result["tasks"]] == [False, False, False]
    assert result["counted"] == {}
    [(level, message)] = problems(result)
    assert level == "ERROR"
    assert message.startswith(
        "store-metrics is off for this process: [store_metrics] backend = 'airflow' would send the counts "
        "without their tags"
    )


def test_the_task_end_flush_to_a_backend_that_never_answers_is_bounded_by_flush_timeout(
    tmp_path: Path,
) -> None:
    silent = SilentTcpServer()  # an OTLP/HTTP endpoint that accepts and never answers
    try:
        started = time.monotonic()
        result = run_tasks(
            tmp_path,
            1,
            AIRFLOW__STORE_METRICS__BACKEND="otel",
            AIRFLOW__STORE_METRICS__OTEL_EXPORTER="otlp",
            AIRFLOW__STORE_METRICS__FLUSH_TIMEOUT="0.5",
            AIRFLOW__STORE_METRICS__FLUSH_INTERVAL="60",
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=f"http://127.0.0.1:{silent.port}/v1/metrics",
            OTEL_EXPORTER_OTLP_METRICS_TIMEOUT="120",  # the exporter itself waits far longer
        )
        whole_run = time.monotonic() - started
        # The export reached the endpoint and got no answer: its request is in one connection's
        # buffer (the process has exited, so each read ends).
        sent: dict[int, bytes] = {}

        def export_arrived() -> bool:
            for i, conn in enumerate(list(silent.accepted)):
                if i not in sent:
                    conn.settimeout(5)
                    sent[i] = conn.recv(65536)
            return any(request.startswith(b"POST /v1/metrics ") for request in sent.values())

        wait_until(export_arrived, timeout=10)
    finally:
        silent.close()
    assert result["flush_timeout"] == 0.5
    assert result["counted"] == {"task_state_store.write": 1}
    (task,) = result["tasks"]
    assert task["instrumented"]
    # The end hook waited for the hung export, for the emitter's own flush_timeout and no longer
    # (the upper bound: far below the exporter's 120 s, far above what a loaded machine needs).
    assert 0.5 <= task["end_hook_seconds"] < 0.5 + 10.0, task
    assert whole_run < 100  # and the process did not wait for the exporter's own 120 s timeout
    # It did not raise (the hook would have logged "could not flush at task end").
    assert [r for r in problems(result) if r[0] != "WARNING"] == []
