"""The triggerer hook in process: Airflow 3.3.2's own ``TriggerRunner.run_trigger`` runs each trigger.

What is real here: Airflow's ``TriggerRunner`` (its ``run_trigger`` coroutine, with the greenback
portal, span, logging and event queue it sets up), Airflow's ``BaseEventTrigger``, and Airflow's
``AssetStateStoreAccessors`` / ``AssetStateStoreAccessor`` (how they build messages, treat a
not-found answer and raise on an error answer). What is not: the round trip behind
``SUPERVISOR_COMMS``. In the triggerer it is a socket to the ``TriggerRunnerSupervisor`` process
and its database, which cannot exist inside the test process; ``InMemorySupervisor``
(support/trigger_runs.py) answers the same messages from a dict instead. The real round trip is
tested under ``airflow standalone`` in tests/airflow/test_triggerer_standalone.py.

Counts go to ``store_metrics.testing.capture_metrics`` (an in-memory emitter), except where a
test runs a fresh process to see what a triggerer process logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from store_metrics import logs
from store_metrics.counting.accessors import is_instrumented
from store_metrics.integration import triggerer
from store_metrics.testing import capture_metrics
from support.stores import DictStore
from support.trigger_runs import (
    WATCHER_TAGS,
    InMemorySupervisor,
    event_trigger_class,
    run_in_airflows_runner,
    watcher,
)
from testbed.airflow import clean_environ
from testbed.repository import python_path
from testbed.udp import UdpReceiver

pytestmark = pytest.mark.airflow


@pytest.fixture
def supervisor(monkeypatch: pytest.MonkeyPatch) -> InMemorySupervisor:
    from airflow.sdk.execution_time import task_runner

    answering = InMemorySupervisor()
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", answering, raising=False)
    return answering


@pytest.fixture
def hooked() -> Iterator[None]:
    """Airflow's TriggerRunner with the hook installed, as the plugin's on_starting leaves it."""
    import airflow.jobs.triggerer_job_runner  # noqa: F401 - the triggerer has it loaded

    logs.forget("trigger")
    assert triggerer.install()
    yield
    triggerer.uninstall()
    logs.forget("trigger")


# -- the hook points ----------------------------------------------------------------------------------


def test_this_airflow_has_the_two_methods_the_hook_wraps() -> None:
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    points = triggerer.hook_points(TriggerRunner)
    assert not isinstance(points, str), points
    run, run_trigger = points
    assert run is TriggerRunner.__dict__["run"] and run_trigger is TriggerRunner.__dict__["run_trigger"]


def test_install_wraps_once_and_uninstall_puts_airflows_methods_back() -> None:
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    run, run_trigger = TriggerRunner.__dict__["run"], TriggerRunner.__dict__["run_trigger"]
    try:
        assert triggerer.install() and triggerer.install()
        assert TriggerRunner.__dict__["run_trigger"].__wrapped__ is run_trigger
        assert TriggerRunner.__dict__["run"].__wrapped__ is run
        assert asyncio.iscoroutinefunction(TriggerRunner.run_trigger)
    finally:
        triggerer.uninstall()
    assert TriggerRunner.__dict__["run"] is run and TriggerRunner.__dict__["run_trigger"] is run_trigger


def test_processes_without_the_triggerer_are_left_alone(tmp_path: Path) -> None:
    """The scheduler, the DAG processor and task processes call on_starting too: nothing happens there."""
    script = textwrap.dedent(
        """
        import json, sys
        from store_metrics.integration import plugin, triggerer
        plugin.listener.on_starting(component=object())
        print(json.dumps({"loaded": "airflow.jobs.triggerer_job_runner" in sys.modules,
                          "installed": triggerer._hook.installed}))
        """
    )
    result, _ = _fresh_process(script, tmp_path)
    assert result == {"loaded": False, "installed": False}


# -- counting, through Airflow's run_trigger -----------------------------------------------------------


def test_a_watchers_calls_are_counted_exactly_with_the_watcher_tags(
    hooked: None, supervisor: InMemorySupervisor
) -> None:
    with capture_metrics() as metrics:
        (payload,) = asyncio.run(run_in_airflows_runner(watcher()))
    # The trigger saw what Airflow's accessor returns, untouched: None for absent, the caller's
    # default, the stored value (also when it equals the default), None from set.
    assert payload == {"seen": [None, None, "v1", "dflt", None, 2], "wrapped": True}
    tags = {**WATCHER_TAGS, "operator": "Watermarks"}
    assert metrics.counts(**tags) == {
        "asset_state_store.read_absent": 2,
        "asset_state_store.read_found": 2,
        "asset_state_store.write": 2,
        "asset_state_store.delete": 1,
        "asset_state_store.clear": 1,
    }
    assert {dict(t)["dag_id"] for _, t in metrics.series()} == {"<none>"}
    assert {tuple(sorted(dict(t))) for _, t in metrics.series()} == {
        ("dag_id", "operator", "run_type", "task_id")
    }
    # The supervisor got the same messages it gets without the plugin.
    assert supervisor.messages.count("GetAssetStateStoreByName") == 4


def test_an_exception_from_the_store_reaches_the_trigger_unchanged_and_counts_as_error(
    hooked: None, supervisor: InMemorySupervisor
) -> None:
    from airflow.triggers.base import BaseEventTrigger, TriggerEvent

    broken = BrokenPipeError("supervisor went away")
    supervisor.fail_with = broken
    seen: list[BaseException] = []

    class Raising(BaseEventTrigger):
        def serialize(self) -> tuple[str, dict[str, Any]]:
            return "tests.Raising", {}

        async def run(self) -> AsyncIterator[TriggerEvent]:
            try:
                store: Any = self.asset_state_store
                store.set("w", 1)
            except BrokenPipeError as exc:
                seen.append(exc)
            await self.asset_state_store.aget("w")  # raises out of the trigger
            yield TriggerEvent({})

    with capture_metrics() as metrics, pytest.raises(BrokenPipeError) as raised:
        asyncio.run(run_in_airflows_runner(watcher(Raising)))
    assert raised.value is broken and seen == [broken]
    assert metrics.series() == {
        ("asset_state_store.error", (*_tags("Raising"), ("operation", "set"))): 1,
        ("asset_state_store.error", (*_tags("Raising"), ("operation", "get"))): 1,
    }


def test_airflows_error_answer_raises_airflows_error_and_counts_as_error(
    hooked: None, supervisor: InMemorySupervisor
) -> None:
    """An error answer from the supervisor (as for the API server's 422) is Airflow's own exception."""
    from airflow.sdk.exceptions import AirflowRuntimeError, ErrorType
    from airflow.sdk.execution_time import comms
    from airflow.triggers.base import BaseEventTrigger, TriggerEvent

    answer = comms.ErrorResponse(error=ErrorType.API_SERVER_ERROR, detail={"status_code": 422})
    supervisor._answer = lambda msg: answer  # type: ignore[method-assign]

    class Rejected(BaseEventTrigger):
        def serialize(self) -> tuple[str, dict[str, Any]]:
            return "tests.Rejected", {}

        async def run(self) -> AsyncIterator[TriggerEvent]:
            try:
                await self.asset_state_store.aget("")
            except AirflowRuntimeError as exc:
                yield TriggerEvent({"error": exc.error.error.value})

    with capture_metrics() as metrics:
        (payload,) = asyncio.run(run_in_airflows_runner(watcher(Rejected)))
    assert payload == {"error": "API_SERVER_ERROR"}
    assert metrics.counts(operator="Rejected") == {"asset_state_store.error": 1}
    assert metrics.value("asset_state_store.error", operation="get") == 1


def test_a_trigger_watching_several_assets_names_them_all_sorted(
    hooked: None, supervisor: InMemorySupervisor
) -> None:
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import AssetStateStoreAccessors

    b, a = Asset(name="queue/b", uri="s3://q/b"), Asset(name="queue/a", uri="s3://q/a")
    trigger = event_trigger_class()()
    trigger.asset_state_store = AssetStateStoreAccessors(inlets=[b, a])
    with capture_metrics() as metrics:
        triggerer.instrument_trigger(trigger)
        trigger.asset_state_store[a].set("k", 1)
        trigger.asset_state_store[b].get("k")
    assert metrics.counts(task_id="queue/a,queue/b") == {
        "asset_state_store.write": 1,
        "asset_state_store.read_absent": 1,
    }
    assert metrics.series().keys() == {
        ("asset_state_store.write", (("dag_id", "<none>"), ("task_id", "queue/a%2Cqueue/b"),
                                     ("run_type", "asset_watcher"), ("operator", "Watermarks"))),
        ("asset_state_store.read_absent", (("dag_id", "<none>"), ("task_id", "queue/a%2Cqueue/b"),
                                           ("run_type", "asset_watcher"), ("operator", "Watermarks"))),
    }  # fmt: skip


def test_a_deferred_tasks_trigger_counts_under_the_tasks_own_tags(hooked: None) -> None:
    """Airflow 3.3.2 gives a deferred task's trigger no task store; a later Airflow may.

    The hook wraps ``trigger.task_state_store`` wherever an Airflow sets it, tagged as the task.
    The store here is ``DictStore`` (no Airflow sets a real one on a trigger
    yet); the task instance is the real ``TaskInstanceDTO`` the triggerer gives a deferred trigger,
    and the context the kind Airflow builds for ``start_from_trigger`` tasks.
    """
    from airflow.executors.workloads.task import TaskInstanceDTO

    trigger = _wait_for_job()
    trigger.task_instance = TaskInstanceDTO(
        id=uuid.uuid4(), task_id="wait", dag_id="etl", run_id="r1", try_number=1,
        dag_version_id=uuid.uuid4(), pool_slots=1, priority_weight=1,
    )  # fmt: skip
    with capture_metrics() as metrics:
        (payload,) = asyncio.run(run_in_airflows_runner(trigger, context={"dag_run": _ScheduledRun()}))
    assert payload == {"job": None, "wrapped": True}
    assert metrics.series() == {
        ("task_state_store.read_absent", (("dag_id", "etl"), ("task_id", "wait"),
                                          ("run_type", "scheduled"), ("operator", "<unknown>"))): 1,
    }  # fmt: skip
    # With the task the triggerer deserialises for start_from_trigger (a RuntimeTaskInstance, here
    # a stand-in with the attributes read), the operator is known: the task's task_type.
    trigger.task_instance = SimpleNamespace(dag_id="etl", task_id="wait", task=_KubernetesPodOperator())
    assert triggerer.deferred_task_tags(trigger, None) == {
        "dag_id": "etl", "task_id": "wait", "run_type": "<unknown>", "operator": "KubernetesPodOperator",
    }  # fmt: skip


def test_a_deferred_task_of_a_teams_dag_counts_under_its_team(hooked: None) -> None:
    """On a multi-team deployment the task instance's ``stats_tags`` carry its run's team.

    The task instance is a stand-in for the ``RuntimeTaskInstance`` the triggerer deserialises for
    ``start_from_trigger`` tasks, with what ``run_trigger`` and the hook read: its ``stats_tags``
    are what Task SDK 1.3's give (``dag_id``, ``task_id``, and ``team_name`` from the run).
    """
    trigger = _wait_for_job()
    trigger.task_instance = SimpleNamespace(
        id=uuid.uuid4(), dag_id="etl", task_id="wait", run_id="r1", try_number=1, map_index=-1,
        context_carrier=None, task=_KubernetesPodOperator(),
        stats_tags={"dag_id": "etl", "task_id": "wait", "team_name": "payments"},
    )  # fmt: skip
    with capture_metrics() as metrics:
        (payload,) = asyncio.run(run_in_airflows_runner(trigger, context={"dag_run": _ScheduledRun()}))
    assert payload == {"job": None, "wrapped": True}
    tags = (("dag_id", "etl"), ("task_id", "wait"), ("run_type", "scheduled"),
            ("operator", "KubernetesPodOperator"), ("team_name", "payments"))  # fmt: skip
    assert metrics.series() == {("task_state_store.read_absent", tags): 1}


def _wait_for_job() -> Any:
    """A deferred task's trigger that reads its task store once (an in-memory one: DictStore)."""
    from airflow.triggers.base import BaseTrigger, TriggerEvent

    class WaitForJob(BaseTrigger):
        def serialize(self) -> tuple[str, dict[str, Any]]:
            return "tests.WaitForJob", {}

        async def run(self) -> AsyncIterator[TriggerEvent]:
            store = self.task_state_store
            yield TriggerEvent({"job": store.get("job_id"), "wrapped": is_instrumented(store)})

    trigger = WaitForJob()
    trigger.task_state_store = DictStore()
    return trigger


class _KubernetesPodOperator:
    task_type = "KubernetesPodOperator"
    template_ext: tuple[str, ...] = ()
    template_fields: tuple[str, ...] = ()
    start_trigger_args = None


class _ScheduledRun:
    run_type = "scheduled"


def test_with_no_emitter_configured_triggers_keep_their_own_store(
    hooked: None, supervisor: InMemorySupervisor
) -> None:
    """``enabled = false``, bad configuration, or an Airflow that counts itself: nothing is wrapped."""
    (payload,) = asyncio.run(run_in_airflows_runner(watcher()))
    assert payload["wrapped"] is False


# -- never break a trigger ---------------------------------------------------------------------------


def test_a_store_that_cannot_be_replaced_leaves_the_trigger_running_with_one_log_line(
    hooked: None, supervisor: InMemorySupervisor, caplog: pytest.LogCaptureFixture
) -> None:
    """A trigger that only accepts Airflow's exact accessor type: the hook's assignment raises."""
    from airflow.sdk.execution_time.context import AssetStateStoreAccessors

    base = event_trigger_class()

    class Strict(base):  # type: ignore[misc, valid-type]
        @property
        def asset_state_store(self) -> Any:
            return self.__dict__.get("_store")

        @asset_state_store.setter
        def asset_state_store(self, value: Any) -> None:
            if value is not None and type(value) is not AssetStateStoreAccessors:
                raise TypeError(f"not an AssetStateStoreAccessors: {type(value).__name__}")
            self.__dict__["_store"] = value

    caplog.set_level(logging.INFO, logger="store_metrics")
    with capture_metrics() as metrics:
        first = asyncio.run(run_in_airflows_runner(watcher(Strict), trigger_id=1))
        second = asyncio.run(run_in_airflows_runner(watcher(Strict), trigger_id=2))
    assert first == second == [{"seen": [None, None, "v1", "dflt", None, 2], "wrapped": False}]
    assert metrics.series() == {}
    lines = [r.getMessage() for r in caplog.records if r.name == "store_metrics"]
    assert len(lines) == 1, lines
    assert "could not instrument trigger" in lines[0] and "runs uninstrumented" in lines[0]
    assert "Strict" in lines[0] and "TypeError" in lines[0]


def test_an_airflow_without_the_hook_points_gets_one_log_line_and_triggers_run_as_usual(
    monkeypatch: pytest.MonkeyPatch, supervisor: InMemorySupervisor, caplog: pytest.LogCaptureFixture
) -> None:
    """Airflow changed: ``run_trigger`` no longer takes ``(trigger_id, trigger, ...)``.

    The change is made here by replacing Airflow's method with one of another shape that does the
    same (a later Airflow would ship its own); tests/airflow/test_triggerer_standalone.py does the same in a
    real triggerer.
    """
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    original = TriggerRunner.run_trigger

    async def run_trigger(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(TriggerRunner, "run_trigger", run_trigger)
    logs.forget("trigger")
    caplog.set_level(logging.INFO, logger="store_metrics")
    try:
        assert triggerer.install() is False
        assert triggerer.install() is False
        assert TriggerRunner.__dict__["run_trigger"] is run_trigger
        assert not hasattr(TriggerRunner.__dict__["run"], "__wrapped__")
        with capture_metrics() as metrics:
            (payload,) = asyncio.run(run_in_airflows_runner(watcher()))
    finally:
        triggerer.uninstall()
        logs.forget("trigger")
    assert payload == {"seen": [None, None, "v1", "dflt", None, 2], "wrapped": False}
    assert metrics.series() == {}
    lines = [r.getMessage() for r in caplog.records if r.name == "store_metrics"]
    assert lines == [
        "store-metrics: triggers' state store calls are not counted in this triggerer: TriggerRunner."
        "run_trigger does not take (trigger_id, trigger, ...) (the hook fits Airflow 3.3's and 3.4's "
        "trigger runner); triggers run as usual"
    ]


def test_the_runner_entry_point_configures_before_the_loop_and_passes_airflows_errors_on(
    tmp_path: Path,
) -> None:
    """Airflow's real ``TriggerRunner.run`` in a fresh process whose stdin is no socket.

    The wrapper configures the emitter from ``[store_metrics]`` first (here a bad value: one line,
    counting off), then Airflow's ``run`` fails to open its comms exactly as it would without the
    plugin, and the same exception leaves ``run``.
    """
    script = textwrap.dedent(
        """
        import json, logging, sys
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
        import airflow.jobs.triggerer_job_runner as m
        from store_metrics.counting import runtime
        from store_metrics.integration import plugin
        plugin.listener.on_starting(component=object())
        try:
            m.TriggerRunner().run()
        except Exception as exc:
            raised = type(exc).__name__
        print(json.dumps({"raised": raised, "configured": runtime.is_configured(),
                          "wrapped": hasattr(m.TriggerRunner.run, "__wrapped__")}))
        """
    )
    result, output = _fresh_process(script, tmp_path, AIRFLOW__STORE_METRICS__BACKEND="prometheus")
    assert result == {"raised": "OSError", "configured": False, "wrapped": True}
    off = [line for line in output.splitlines() if "store-metrics is off for this process" in line]
    assert len(off) == 1 and "backend = 'prometheus' is not valid" in off[0], output


def test_the_triggerer_counts_its_triggers_also_with_count_at_api_server(tmp_path: Path) -> None:
    """``count_at = api_server`` silences task processes: the API server counts their requests.

    A trigger's calls never reach the API server: the triggerer's supervisor answers them through
    an Execution API app of its own, in process (``TriggerRunnerSupervisor.make_client``), which has
    no plugin middleware. So the triggerer keeps counting them itself: here a fresh process with
    ``count_at = api_server`` and a StatsD backend does what the trigger runner process does (the
    listener's ``on_starting``, then Airflow's ``TriggerRunner.run``, which configures the emitter
    before failing to open its comms on a stdin that is no socket), runs one watcher through
    Airflow's ``run_trigger`` and flushes; its exact lines are read from a real UDP socket.
    """
    script = textwrap.dedent(
        """
        import asyncio, json
        import airflow.jobs.triggerer_job_runner as m
        from store_metrics.counting import runtime
        from store_metrics.integration import plugin
        from support.trigger_runs import (
            answer_from_memory, run_in_airflows_runner, sync_trigger_class, watcher,
        )
        plugin.listener.on_starting(component=object())
        try:
            m.TriggerRunner().run()
        except OSError:
            pass
        configured = runtime.is_configured()
        answer_from_memory()
        payloads = asyncio.run(run_in_airflows_runner(watcher(sync_trigger_class())))
        flushed = runtime.get_emitter().flush(5)
        print(json.dumps({"configured": configured, "payloads": payloads, "flushed": flushed}))
        """
    )
    receiver = UdpReceiver()
    try:
        result, _ = _fresh_process(
            script,
            tmp_path,
            AIRFLOW__STORE_METRICS__COUNT_AT="api_server",
            AIRFLOW__STORE_METRICS__BACKEND="statsd",
            AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
            AIRFLOW__STORE_METRICS__PORT=str(receiver.port),
            PYTHONPATH=python_path(),
        )
        lines = receiver.lines_before_marker()  # the process has exited: everything it sent is here
    finally:
        receiver.close()
    assert result == {
        "configured": True,
        "payloads": [{"seen": [None, None, "v1"], "wrapped": True}],
        "flushed": True,
    }
    tags = (
        "dag_id=<none>,task_id=store_metrics_test/in_process,run_type=asset_watcher,operator=SyncWatermarks"
    )
    assert sorted(lines) == [
        f"airflow.asset_state_store.{outcome},{tags}:1|c"
        for outcome in ("delete", "read_absent", "read_found", "write")
    ]


# -- a trigger runner started as a fresh interpreter (Airflow 3.4's use_exec) ----------------------------

#: The triggerer's process: the plugin's on_starting, on an Airflow whose platform gate for a fresh
#: interpreter (supervisor._should_use_exec, Airflow 3.4: true on macOS) says ``argv[1]``, and whose
#: runner entry point is a plain function when ``argv[2]`` says so. Prints what Airflow would start
#: the runner with (``module:qualname``, as TriggerRunnerSupervisor.start derives it for use_exec),
#: what ``store-metrics check`` says, and every store_metrics log line.
_TRIGGERER = textwrap.dedent(
    """
    import json, logging, sys
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append([record.levelname, record.getMessage()])

    logging.getLogger("store_metrics").addHandler(Keep())
    logging.getLogger("store_metrics").setLevel(logging.INFO)
    import airflow.jobs.triggerer_job_runner as m
    from airflow.sdk.execution_time import supervisor
    from store_metrics.integration import plugin, triggerer

    supervisor._should_use_exec = lambda: sys.argv[1] == "exec"
    if sys.argv[2] == "changed":
        m.TriggerRunnerSupervisor.run_in_process = staticmethod(lambda: m.TriggerRunner().run())
    plugin.listener.on_starting(component=object())
    target = m.TriggerRunnerSupervisor.run_in_process
    print(json.dumps({"target": f"{target.__module__}:{target.__qualname__}", "records": records,
                      "check": triggerer.describe_triggerer()}))
    """
)


OURS = "store_metrics.integration.triggerer:run_trigger_runner"
COUNTING = "store-metrics: counting the state store calls of triggers in this triggerer"
FRESH = (
    "store-metrics: this triggerer starts its trigger runner as a fresh interpreter (use_exec); "
    f"store-metrics hooks it from the runner's entry point ({OURS})"
)
NO_ENTRY = (
    "its trigger runner starts as a fresh interpreter (use_exec), which loads no plugin, and "
    "TriggerRunnerSupervisor.run_in_process is not a classmethod without arguments"
)
NOT_COUNTED = (
    f"store-metrics: triggers' state store calls are not counted in this triggerer: {NO_ENTRY} "
    "(the hook fits Airflow 3.3's and 3.4's trigger runner); triggers run as usual"
)
CHECK_FORKED = "triggerer: asset watchers' state store calls are counted (the trigger runner is forked)"
CHECK_FRESH = (
    "triggerer: asset watchers' state store calls are counted; the trigger runner starts as a fresh "
    "interpreter (use_exec) and is hooked from its entry point"
)
CHECK_NOT_COUNTED = "triggerer: asset watchers' state store calls are NOT counted: " + NO_ENTRY.replace(
    "its trigger runner", "the trigger runner"
)


@pytest.mark.parametrize(
    ("start", "entry", "expected"),
    [
        pytest.param(
            "fork", "airflows",
            {"target": OURS, "records": [["INFO", COUNTING]], "check": CHECK_FORKED},
            id="forked",
        ),
        pytest.param(
            "exec", "airflows",
            {"target": OURS, "records": [["INFO", FRESH]], "check": CHECK_FRESH},
            id="fresh-interpreter",
        ),
        pytest.param(
            "exec", "changed",
            {"target": "__main__:<lambda>", "records": [["WARNING", NOT_COUNTED]],
             "check": CHECK_NOT_COUNTED},
            id="fresh-interpreter-entry-changed",
        ),
    ],
)  # fmt: skip
def test_the_triggerer_says_once_how_its_runner_is_hooked_and_check_says_the_same(
    tmp_path: Path, start: str, entry: str, expected: dict[str, Any]
) -> None:
    environ = {**clean_environ(), "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__STORE_METRICS__BACKEND": "none"}
    proc = subprocess.run(
        [sys.executable, "-c", _TRIGGERER, start, entry],
        env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == expected


def test_a_runner_started_as_a_fresh_interpreter_hooks_itself_from_its_entry_point(tmp_path: Path) -> None:
    """What a fresh interpreter (``use_exec``) runs: the target Airflow names in ``_AIRFLOW_CHILD_TARGET``,
    resolved with ``pkgutil.resolve_name`` as Airflow 3.4's ``_child_exec_main`` does, in a process
    that loaded no plugin. It hooks that process (configures the emitter, wraps the runner), then
    Airflow's own entry point runs and fails to open its comms on a stdin that is no socket, exactly
    as it would without the plugin. (tests/airflow/test_triggerer_standalone.py starts a real one.)"""
    script = textwrap.dedent(
        """
        import json, logging, pkgutil, sys
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
        from store_metrics.counting import runtime
        from store_metrics.integration import triggerer
        raised = None
        try:
            pkgutil.resolve_name("store_metrics.integration.triggerer:run_trigger_runner")()
        except Exception as exc:
            raised = type(exc).__name__
        import airflow.jobs.triggerer_job_runner as m
        print(json.dumps({"raised": raised, "hooked": triggerer._hook.installed,
                          "configured": runtime.is_configured(),
                          "wrapped": hasattr(m.TriggerRunner.run, "__wrapped__")}))
        """
    )
    result, output = _fresh_process(script, tmp_path, AIRFLOW__STORE_METRICS__BACKEND="none")
    assert result == {"raised": "OSError", "hooked": True, "configured": True, "wrapped": True}
    assert output.count("counting the state store calls of triggers in this triggerer") == 1


def _fresh_process(script: str, home: Path, **env: str) -> tuple[Any, str]:
    """Run ``script`` in a fresh interpreter (stdin a pipe); return its last stdout line as JSON, and
    everything it printed (Airflow's logging may go to either stream)."""
    environ = {**clean_environ(), "AIRFLOW_HOME": str(home), **env}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=environ, input="", capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1]), proc.stdout + proc.stderr


def _tags(operator: str) -> tuple[tuple[str, str], ...]:
    return (("dag_id", "<none>"), ("task_id", "store_metrics_test/in_process"),
            ("run_type", "asset_watcher"), ("operator", operator))  # fmt: skip
