"""Asset watchers in a real triggerer, under ``airflow standalone``: their state store calls counted.

The DAG file ``testbed/dags/watchers/store_metrics_watchers.py`` declares three assets with
``AssetWatcher`` triggers (``tests/deploy/modules/store_metrics_test_triggers.py``, put on the
``PYTHONPATH`` of every Airflow process, as a triggerer needs): one makes ``aget`` (absent), ``aset``,
``aget`` (found), one the same with the sync methods, one makes a ``get`` the API server rejects and a
``set`` the accessor refuses. Each fires once; the asset event starts a consumer DAG whose task reads
the watermark (one ``read_found``, tagged as that task).

* DogStatsD to a real UDP socket, ``flush_interval = 1``: the triggerer, which keeps running, sends
  its counts on the interval; every series, watchers' and tasks', exactly as expected.
* OpenTelemetry over OTLP/HTTP to a real in-test receiver, ``flush_interval = 300``: the tasks' counts
  arrive at task end, the triggerer's only when it stops (its shutdown flush), exactly.
* A plugin that makes this Airflow's trigger runner look changed: one log line, the watchers run and
  fire as before, with what they saw (values and exceptions) identical, and nothing counted for them.
* Airflow 3.4 only: a plugin that makes this Linux triggerer start its trigger runner as a fresh
  interpreter (``use_exec``, what macOS does): the runner hooks itself from its entry point, and the
  watchers' calls are counted exactly as with a forked runner.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.airflow import Standalone
from support.deploy import MODULES, TRIGGERER_PLUGINS
from support.totals import Key, totals
from support.watchers import CONSUMERS, DAG_FILE, TASKS, WATCHERS
from testbed.otlp import OtlpReceiver
from testbed.ports import free_port
from testbed.repository import python_path
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

#: What the watchers' events carry, with or without the plugin: the values their calls returned,
#: and what the failing calls raised (Airflow's own exceptions, unchanged).
PAYLOADS = [
    {"before": None, "after": "w-async"},
    {"before": None, "after": "w-sync"},
    {
        "raised": {
            "get": "airflow.sdk.exceptions.AirflowRuntimeError",
            "set": "builtins.ValueError: Cannot set value as None",
        }
    },
]


def deploy(root: Path, settings: dict[str, str], plugin: Path | None = None) -> Standalone:
    """``airflow standalone`` with only the watchers' DAG file, the trigger module importable."""
    path = python_path(MODULES)
    if plugin is not None:
        (root / "plugins").mkdir()
        shutil.copy(plugin, root / "plugins")
        settings = {**settings, "AIRFLOW__CORE__PLUGINS_FOLDER": str(root / "plugins")}
    airflow = Standalone(root, free_port(), {**settings, "PYTHONPATH": path})
    for dag_file in airflow.home.dags.glob("*.py"):  # the suite's other DAGs are not needed here
        dag_file.unlink()
    shutil.copy(DAG_FILE, airflow.home.dags)
    return airflow


def to_dogstatsd(receiver: UdpReceiver) -> dict[str, str]:
    """DogStatsD to ``receiver``, flushed every second (the triggerer keeps running)."""
    return {
        "AIRFLOW__STORE_METRICS__BACKEND": "dogstatsd",
        "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
        "AIRFLOW__STORE_METRICS__PORT": str(receiver.port),
        "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "1",
    }


def run_consumers(airflow: Standalone) -> None:
    """Start Airflow and wait until each watcher fired and its consumer DAG run finished."""
    airflow.start(list(CONSUMERS))
    for dag_id in CONSUMERS:
        assert airflow.wait_for_runs(dag_id, 1, timeout=240) == ["success"], airflow.log_tail()


def payloads(airflow: Standalone) -> list[dict[str, Any]]:
    """The watchers' event payloads, from the asset events Airflow recorded (minus the store's type)."""
    rows = airflow.home.query("select extra from asset_event order by id")
    out = []
    for (extra,) in rows:
        data = json.loads(extra)
        assert data["from_trigger"] is True
        out.append({k: v for k, v in data["payload"].items() if k != "store"})
    return sorted(out, key=json.dumps)


def store_types(airflow: Standalone) -> set[str]:
    rows = airflow.home.query("select extra from asset_event")
    return {json.loads(e)["payload"]["store"] for (e,) in rows if "store" in json.loads(e)["payload"]}


def triggerer_lines(airflow: Standalone, text: str) -> list[str]:
    log = airflow.log_path.read_text(errors="replace").splitlines()
    return [line for line in log if line.startswith("triggerer") and text in line]


# -- DogStatsD, counts on the interval ------------------------------------------------------------------


@pytest.fixture(scope="module")
def dogstatsd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Standalone, UdpReceiver]]:
    receiver = UdpReceiver()
    airflow = deploy(
        tmp_path_factory.mktemp("triggerer-dogstatsd"),
        to_dogstatsd(receiver),
    )
    try:
        run_consumers(airflow)
        yield airflow, receiver
    finally:
        airflow.stop()
        receiver.close()


def test_watchers_calls_are_counted_exactly_next_to_the_consumer_tasks_dogstatsd(
    dogstatsd: tuple[Standalone, UdpReceiver],
) -> None:
    airflow, receiver = dogstatsd
    expected = {**WATCHERS, **TASKS}

    def received() -> Counter[Key]:
        return totals(receiver.lines(), "dogstatsd")

    # The triggerer keeps running: its counts come on the 1 s interval, not at an exit.
    wait_until(lambda: sum(received().values()) >= sum(expected.values()), 20)
    assert dict(received()) == expected
    # ... and nothing more comes later (the watchers are not restarted, the sentinel never leaks).
    got = totals(receiver.lines_before_marker(), "dogstatsd")
    assert dict(got) == expected
    assert airflow.proc is not None and airflow.proc.poll() is None


def test_watchers_see_the_values_and_exceptions_airflow_gives_them(
    dogstatsd: tuple[Standalone, UdpReceiver],
) -> None:
    airflow, _ = dogstatsd
    assert payloads(airflow) == sorted(PAYLOADS, key=json.dumps)
    # The store the watchers were given was the instrumented one (its type; isinstance is fooled).
    assert store_types(airflow) == {"InstrumentedAsyncAssetMapping"}


def test_the_triggerer_says_once_that_it_counts_triggers(dogstatsd: tuple[Standalone, UdpReceiver]) -> None:
    airflow, _ = dogstatsd
    assert len(triggerer_lines(airflow, "counting the state store calls of triggers")) == 1
    assert len(triggerer_lines(airflow, "counting state store calls, sending to dogstatsd")) == 1
    log = airflow.log_path.read_text(errors="replace")
    # Only the triggerer hooks anything: the scheduler, DAG processor and API server never load it.
    assert log.count("counting the state store calls of triggers") == 1
    assert "could not instrument trigger" not in log and "are not counted" not in log


# -- OpenTelemetry, counts at the triggerer's shutdown ----------------------------------------------------


def test_watchers_calls_reach_otlp_at_the_triggerers_shutdown(tmp_path: Path) -> None:
    receiver = OtlpReceiver()
    airflow = deploy(
        tmp_path,
        {
            "AIRFLOW__STORE_METRICS__BACKEND": "otel",
            "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "300",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": receiver.endpoint,
        },
    )

    def received() -> Counter[Key]:
        # The state store series (the API server's own, exported when it stops, are not asked about).
        out: Counter[Key] = Counter()
        for point in receiver.points():
            if (
                point.name.startswith(("airflow.task_state_store.", "airflow.asset_state_store."))
                and point.value
            ):
                out[(point.name, tuple(point.attributes.items()))] += point.value
        return out

    try:
        run_consumers(airflow)
        # The consumer tasks' counts leave with each task process ...
        wait_until(lambda: all(received()[k] == v for k, v in TASKS.items()), 20)
        # ... the triggerer's wait for its interval (300 s) or its shutdown.
        assert not any(received()[k] for k in WATCHERS)
    finally:
        airflow.stop()
    try:
        wait_until(lambda: sum(received().values()) >= sum({**WATCHERS, **TASKS}.values()), 20)
        assert dict(received()) == {**WATCHERS, **TASKS}
        points = [p for p in receiver.points() if p.attributes.get("run_type") == "asset_watcher"]
        assert {p.monotonic for p in points} == {True}
        assert len(triggerer_lines(airflow, "counting the state store calls of triggers")) == 1
    finally:
        receiver.close()


# -- an Airflow whose trigger runner changed ----------------------------------------------------------------


def test_a_changed_trigger_runner_leaves_watchers_unharmed_with_one_log_line(tmp_path: Path) -> None:
    receiver = UdpReceiver()
    airflow = deploy(
        tmp_path,
        to_dogstatsd(receiver),
        plugin=TRIGGERER_PLUGINS / "store_metrics_test_changed_triggerer.py",
    )
    try:
        run_consumers(airflow)  # every watcher fired, every consumer ran
        # The tasks are still counted; the watchers are not.
        wait_until(lambda: sum(totals(receiver.lines(), "dogstatsd").values()) >= sum(TASKS.values()), 20)
        assert dict(totals(receiver.lines_before_marker(), "dogstatsd")) == TASKS
        # The watchers saw exactly what they see with the hook in place, through Airflow's own store.
        assert payloads(airflow) == sorted(PAYLOADS, key=json.dumps)
        assert store_types(airflow) == {"AssetStateStoreAccessors"}
        lines = triggerer_lines(airflow, "store-metrics: triggers' state store calls are not counted")
        assert len(lines) == 1, airflow.log_tail()
        assert "run_trigger does not take (trigger_id, trigger, ...)" in lines[0]
        assert not triggerer_lines(airflow, "counting the state store calls of triggers")
    finally:
        airflow.stop()
        receiver.close()


# -- a trigger runner started as a fresh interpreter (Airflow 3.4's use_exec) -------------------------------


def _starts_runner_with_use_exec() -> bool:
    """Whether this Airflow has the gate its triggerer asks (``supervisor._should_use_exec``, 3.4 on)."""
    from airflow.sdk.execution_time import supervisor

    return hasattr(supervisor, "_should_use_exec")


def test_a_runner_started_as_a_fresh_interpreter_counts_the_watchers_exactly(tmp_path: Path) -> None:
    if not _starts_runner_with_use_exec():
        pytest.skip("this Airflow always forks its trigger runner (use_exec came with Airflow 3.4)")
    receiver = UdpReceiver()
    airflow = deploy(
        tmp_path,
        to_dogstatsd(receiver),
        plugin=TRIGGERER_PLUGINS / "store_metrics_test_exec_triggerer.py",
    )
    expected = {**WATCHERS, **TASKS}
    try:
        run_consumers(airflow)
        wait_until(lambda: sum(totals(receiver.lines(), "dogstatsd").values()) >= sum(expected.values()), 20)
        assert dict(totals(receiver.lines_before_marker(), "dogstatsd")) == expected
        assert payloads(airflow) == sorted(PAYLOADS, key=json.dumps)
        assert store_types(airflow) == {"InstrumentedAsyncAssetMapping"}
        # The triggerer says how its runner is hooked; the runner, once hooked, that it counts.
        assert len(triggerer_lines(airflow, "starts its trigger runner as a fresh interpreter")) == 1
        assert len(triggerer_lines(airflow, "counting the state store calls of triggers")) == 1
        assert not triggerer_lines(airflow, "are not counted")
    finally:
        airflow.stop()
        receiver.close()
