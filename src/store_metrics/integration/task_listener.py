"""What a task process runs: the plugin's listener, configuring and instrumenting on first use.

* ``on_task_instance_running`` (after the Task SDK built and cached the task's context, before
  ``execute``): configure the emitter from ``[store_metrics]`` on first use in the process, then
  replace ``context["task_state_store"]`` and ``context["asset_state_store"]`` in the cached
  context with instrumented wrappers tagged from the task instance (a retried attempt's task store
  also says, at its first read, whether the retry resumed: ``starts_a_retried_attempt``);
* ``on_task_instance_success|failed|skipped`` and ``before_stopping``: flush, bounded by
  ``flush_timeout``, without closing the emitter (``dag.test()`` runs many tasks in one process);
* ``on_starting``, in the triggerer only: hook the trigger runner (``triggerer``).

Importing it loads nothing but this module and ``store_metrics.logs``: every Airflow process
loads the plugin, most never run a task, and a task pays for the emitter, the accessors and one
backend only when its first task starts. Nothing here may break a task: every hook catches
everything and logs it once.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

import pluggy

from .. import logs

hookimpl = pluggy.HookimplMarker("airflow")

_TASK_RUNNER = "airflow.sdk.execution_time.task_runner"
#: Loaded in the triggerer (and only there) when its Job is made.
_TRIGGERER = "airflow.jobs.triggerer_job_runner"


class _Active:
    """Per-process state of the listener."""

    flushed: bool = True  # False from a task's start (its store instrumented) to its flush
    counts_tasks: bool | None = None  # [store_metrics] count_at; None: not read yet in this process


_state = _Active()


def _task_side_counts() -> bool:
    """False with ``count_at = api_server``: the API server counts this process's calls, so it counts none.

    Decided once per process, before anything is configured: such a task process opens no backend.
    A configuration that does not load is left to ``startup.ensure_emitter`` to report.
    """
    if _state.counts_tasks is None:
        from ..config.reader import read_options
        from ..errors import ConfigError

        try:
            _state.counts_tasks = not read_options().counts_at_api_server
        except ConfigError:
            _state.counts_tasks = True
        if not _state.counts_tasks:
            logs.once(
                "count_at",
                logging.INFO,
                "store-metrics: count_at = api_server: this task's state store calls are counted by the "
                "API server as they arrive; the task process counts nothing",
            )
    return _state.counts_tasks


def tags_for(task_instance: Any, context: Any) -> dict[str, str]:
    """The tag set for one task instance: dag_id, task_id, run_type, operator, team_name if set."""
    from .task_tags import task_instance_tags

    return task_instance_tags(task_instance, context, type(task_instance.task).__name__)


def starts_a_retried_attempt(task_instance: Any, context: Any) -> bool:
    """Whether this process starts a retried attempt: ``try_number >= 2``, and not resumed.

    An attempt can span several task processes: the one that starts it, then one per resumption
    after a deferral (the Execution API hands it ``next_method``) or a reschedule (a sensor in
    reschedule mode: ``task_reschedule_count`` > 0, counted per attempt). Only the first can tell
    which read of the attempt came first, so only its store decides ``retry_resumed`` /
    ``retry_not_resumed``: a resumed process cannot know whether the one before it read.
    """
    try_number = getattr(task_instance, "try_number", None)
    if not isinstance(try_number, int) or try_number < 2:
        return False
    from_server = getattr(task_instance, "_ti_context_from_server", None)
    if getattr(from_server, "next_method", None):
        return False
    reschedules = context.get("task_reschedule_count") if isinstance(context, Mapping) else None
    return not reschedules


def instrument_context(task_instance: Any, context: Any) -> bool:
    """Replace the context's accessors with instrumented ones; return whether anything was wrapped."""
    from ..counting import runtime
    from ..counting.accessors import instrument_asset_store, instrument_task_store

    emitter = runtime.get_emitter()
    tags = tags_for(task_instance, context)
    from .traces_choice import traces_wanted

    traced, keys = traces_wanted()
    tracer: Any = None
    task_span: Any = None
    if traced:
        from opentelemetry import trace

        from ..counting import tracing

        tracer = tracing.tracer_from()
        # The listener runs inside the task runner's `worker.<task_id>` span: the task's span.
        task_span = trace.get_current_span()
    wrapped = False
    store = context.get("task_state_store")
    if store is not None:
        retried = starts_a_retried_attempt(task_instance, context)
        context["task_state_store"] = instrument_task_store(
            store, emitter, tags, retried=retried, tracer=tracer, trace_keys=keys, task_span=task_span
        )
        wrapped = True
    assets = context.get("asset_state_store")
    if assets is not None:
        context["asset_state_store"] = instrument_asset_store(
            assets, emitter, tags, tracer=tracer, trace_keys=keys
        )
        wrapped = True
    return wrapped


def _is_task_runner_ti(task_instance: Any) -> bool:
    # Core's TaskInstance (scheduler, API server) also reaches listeners; only the Task SDK's
    # RuntimeTaskInstance runs user code. Never import the task runner where it is not loaded.
    runner = sys.modules.get(_TASK_RUNNER)
    cls = getattr(runner, "RuntimeTaskInstance", None)
    return cls is not None and isinstance(task_instance, cls)


def _flush() -> None:
    # Once per task: the state hook and before_stopping both end a task. `flushed` is False only
    # after a task's store was instrumented, so the emitter is configured then.
    if _state.flushed:
        return
    _state.flushed = True
    from ..counting import runtime

    runtime.get_emitter().flush()  # bounded by the emitter's own flush_timeout


class StateStoreListener:
    """Task SDK listener hooks. Each one swallows and logs its own errors."""

    @hookimpl
    def on_starting(self, component: Any) -> None:
        # In the triggerer (its Job is being made, before the trigger runner subprocess starts):
        # count the state store calls of triggers (store_metrics.integration.triggerer). Elsewhere: nothing.
        try:
            if _TRIGGERER not in sys.modules:  # not the triggerer: nothing to hook, nothing to import
                return
            from . import triggerer

            triggerer.install()
        except Exception:
            logs.once("starting", logging.ERROR, "store-metrics could not hook the triggerer", exc_info=True)

    @hookimpl
    def on_task_instance_running(self, previous_state: Any, task_instance: Any) -> None:
        try:
            if not _is_task_runner_ti(task_instance) or not _task_side_counts():
                return
            from . import startup

            if not startup.ensure_emitter():
                return
            _state.flushed = False
            instrument_context(task_instance, task_instance.get_template_context())
        except Exception:
            logs.once("running", logging.ERROR, "store-metrics could not instrument a task", exc_info=True)

    @hookimpl
    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        self._end()

    @hookimpl
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        self._end()

    @hookimpl
    def on_task_instance_skipped(self, previous_state: Any, task_instance: Any) -> None:
        self._end()

    @hookimpl
    def before_stopping(self, component: Any) -> None:
        self._end()

    def _end(self) -> None:
        try:
            _flush()
        except Exception:
            logs.once("end", logging.ERROR, "store-metrics could not flush at task end", exc_info=True)


listener = StateStoreListener()
