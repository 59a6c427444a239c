"""The triggerer: count the state store calls that triggers make, the way tasks' calls are counted.

Airflow 3.3 gives every event-driven trigger behind an ``AssetWatcher`` an asset state store: the
triggerer's trigger runner sets ``trigger.asset_state_store = AssetStateStoreAccessors(inlets=[...
the watched assets ...])`` before it runs the trigger (``TriggerRunner.create_triggers`` in
``airflow/jobs/triggerer_job_runner.py``). A watcher that polls a queue or a bucket keeps its
watermark there.

**Why an internal hook.** Airflow 3.3.2 offers plugins no documented way in: the listener specs
(lifecycle, task instance, DAG run, asset, import errors) have no trigger hook, the trigger runner
subprocess calls no listener at all, and ``AirflowPlugin`` has no trigger attribute. So this module,
and only this module, wraps two methods of Airflow's internal ``TriggerRunner`` class:

* ``run()``, the sync entry point of the trigger runner subprocess, before its event loop exists:
  the emitter is configured there (``startup.ensure_emitter``, as in a task process; off the
  loop: opening a backend may import modules or resolve names), and flushed there when the loop
  has ended (bounded by ``flush_timeout``; the emitter's own exit flush follows). In between, the
  emitter's worker thread flushes every ``flush_interval``: nothing is sent from the event loop.
* ``run_trigger(trigger_id, trigger, ...)``, the coroutine that runs one trigger, before it calls
  the trigger's ``run()``: ``trigger.asset_state_store`` (and ``trigger.task_state_store``, on an
  Airflow that sets one on a deferred task's trigger) is replaced by the instrumented wrappers of
  ``store_metrics.counting.accessors``, with the same exactness as in a task (a private sentinel decides
  found vs absent, exceptions pass unchanged and count as ``error``, sync and async methods).

``install`` does it, called from the plugin's ``on_starting`` listener, which Airflow calls in
the triggerer's main process when the triggerer's ``Job`` is made (``airflow/jobs/job.py``), before
the trigger runner subprocess is started from that process. In every other process (scheduler, DAG
processor, task processes) the trigger runner module is not loaded and ``install`` does nothing.

**Forked or a fresh interpreter.** On Linux the trigger runner subprocess is forked: it inherits
the wrapped class. Airflow 3.4 may start it as a fresh interpreter instead
(``TriggerRunnerSupervisor.start(use_exec=supervisor._should_use_exec())``, true on macOS): the
child is ``python -c <bootstrap>`` running the ``module:qualname`` named in
``_AIRFLOW_CHILD_TARGET``, which Airflow derives from ``TriggerRunnerSupervisor.run_in_process``.
It loads no plugin and no listener, so a hook made in the parent would be lost silently. So
``install`` also makes ``run_trigger_runner`` the runner's entry point (it replaces
``run_in_process``): a fresh interpreter then imports this module by name, and
``run_trigger_runner`` hooks that process before it calls Airflow's own entry point. Forked or
fresh, the same calls are counted. Where the entry point cannot be taken over (its shape changed)
and the runner starts fresh, one line says that watcher calls are not counted, and
``store-metrics check`` says so too (``describe_triggerer``).

What would make this hook unnecessary: a listener spec for triggers (say
``on_trigger_starting(trigger, trigger_id, task_instance)``, called by the trigger runner in its
own subprocess before ``trigger.run()``, with ``on_starting``/``before_stopping`` there too), or a
configurable factory for the accessors the triggerer hands out.

The triggerer counts its triggers' calls whatever ``[store_metrics] count_at`` says: they reach
Airflow's Execution API inside the triggerer (its supervisor's in-process client), never the API
server.

**Never breaks a trigger.** If this Airflow's ``TriggerRunner`` lacks either method, or their shape
changed, nothing is wrapped and one line is logged; triggers then run exactly as without the
plugin. If wrapping one trigger's store fails, that trigger runs with its own store, and one line
is logged.

**Traces.** Where this process's calls are spans (``[store_metrics] traces``, decided as in a task),
a trigger's calls are CLIENT spans under Airflow's own ``trigger.<name>`` span, current while the
trigger runs: an asset watcher's is a root span (a watcher belongs to no task), a deferred task's
continues the task's trace.

**Tags.** A deferred task's trigger carries the task's tags (``dag_id``, ``task_id``, ``run_type``,
``operator``, ``team_name``), as far as the triggerer knows them (``<unknown>`` where it does not).
A watcher belongs to no DAG and no task: an asset may schedule any number of DAGs. Its calls are
tagged ``dag_id="<none>"``, ``task_id=<the watched asset's name>`` (names joined by ``,`` when one
trigger watches several assets; the tag value rule writes it ``%2C``), ``run_type="asset_watcher"``
and ``operator=<the trigger's class name>``: as many series as watched assets, never a key.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from .. import logs
from ..catalogue import DAG_ID_NONE, RUN_TYPE_ASSET_WATCHER, UNKNOWN, task_tags
from ..counting import runtime
from ..counting.accessors import instrument_asset_store, instrument_task_store, is_instrumented
from . import startup
from .task_tags import task_instance_tags

#: The module of Airflow's triggerer that holds the trigger runner.
RUNNER_MODULE: Final = "airflow.jobs.triggerer_job_runner"
#: Its class whose methods are wrapped.
RUNNER_CLASS: Final = "TriggerRunner"
#: The positional parameters ``run_trigger`` must start with.
_RUN_TRIGGER_PARAMS: Final = ("self", "trigger_id", "trigger")
#: The class whose ``run_in_process`` is the trigger runner subprocess's entry point.
SUPERVISOR_CLASS: Final = "TriggerRunnerSupervisor"
ENTRY: Final = "run_in_process"
#: Where Airflow 3.4 decides whether a subprocess starts as a fresh interpreter.
SUPERVISOR_MODULE: Final = "airflow.sdk.execution_time.supervisor"
#: Set on our wrappers, so a second ``install`` sees them.
_MARK: Final = "__store_metrics_hook__"


_lock = threading.Lock()


class _Hook:
    """What ``install`` decided in this process."""

    installed: bool = False
    absent: str | None = None  # why the hook points are missing, when they are
    #: Airflow's own ``run_in_process`` (bound to its class) once ``run_trigger_runner`` replaced it.
    entry: Callable[[], Any] | None = None


_hook = _Hook()


# -- tags -------------------------------------------------------------------------------------------


def watched_asset_names(store: Any) -> list[str]:
    """The names (or URIs) of the assets an ``AssetStateStoreAccessors`` serves, sorted.

    Airflow 3.3 keeps them in the accessors' private ``_by_name`` / ``_by_uri`` maps; an accessor
    without them (a later Airflow, one asset's accessor) gives an empty list.
    """
    names: set[str] = set()
    for attribute in ("_by_name", "_by_uri"):
        mapping = getattr(store, attribute, None)
        if isinstance(mapping, Mapping):
            names.update(str(k) for k in mapping)
    return sorted(names)


def watcher_tags(trigger: Any, store: Any) -> dict[str, str]:
    """Tags of an asset watcher's calls: no DAG, the watched asset(s), ``asset_watcher``, the class."""
    assets = watched_asset_names(store)
    return task_tags(
        dag_id=DAG_ID_NONE,
        task_id=",".join(assets) or UNKNOWN,
        run_type=RUN_TYPE_ASSET_WATCHER,
        operator=type(trigger).__name__,
    )


def deferred_task_tags(trigger: Any, context: Any) -> dict[str, str]:
    """Tags of a deferred task's trigger: the task's own, as far as the triggerer knows them.

    ``dag_id`` and ``task_id`` come from the trigger's task instance. ``run_type`` comes from the
    context Airflow builds for ``start_from_trigger`` tasks (``<unknown>`` otherwise), ``operator``
    from the task the triggerer deserialised for them (its ``task_type``: the operator's class
    name, as in the task process; ``<unknown>`` otherwise).
    """
    ti = trigger.task_instance
    task = getattr(ti, "task", None)
    operator = getattr(task, "task_type", None) or (type(task).__name__ if task is not None else UNKNOWN)
    return task_instance_tags(ti, context, str(operator))


# -- instrumenting one trigger ----------------------------------------------------------------------


def instrument_trigger(trigger: Any, context: Any = None) -> int:
    """Replace the trigger's state stores with instrumented wrappers; return how many were wrapped.

    Counts into the active emitter (``store_metrics.counting.runtime.get_emitter``). A trigger with no
    store, or whose stores are already wrapped, is left as it is. May raise (the caller logs).
    """
    emitter = runtime.get_emitter()
    assets = getattr(trigger, "asset_state_store", None)
    tasks = getattr(trigger, "task_state_store", None)
    if (assets is None or is_instrumented(assets)) and (tasks is None or is_instrumented(tasks)):
        return 0
    if getattr(trigger, "task_instance", None) is not None:
        tags = deferred_task_tags(trigger, context)
    else:
        tags = watcher_tags(trigger, assets)
    tracer, keys = _tracer()
    wrapped = 0
    if tasks is not None and not is_instrumented(tasks):
        trigger.task_state_store = instrument_task_store(tasks, emitter, tags, tracer=tracer, trace_keys=keys)
        wrapped += 1
    if assets is not None and not is_instrumented(assets):
        trigger.asset_state_store = instrument_asset_store(
            assets, emitter, tags, tracer=tracer, trace_keys=keys
        )
        wrapped += 1
    return wrapped


def _tracer() -> tuple[Any, bool]:
    """This process's tracer and ``traces_keys`` where its calls are spans (decided once, as in a
    task: ``traces_choice.traces_wanted``), else ``(None, False)``. A trigger's calls are then
    spans under the span current while it runs: Airflow's ``trigger.<name>`` (a watcher's is a
    root span: it belongs to no task's trace; a deferred task's continues the task's trace)."""
    from .traces_choice import traces_wanted

    traced, keys = traces_wanted()
    if not traced:
        return None, False
    from ..counting import tracing

    return tracing.tracer_from(), keys


def _instrument_safely(trigger: Any, trigger_id: Any, context: Any) -> None:
    if not runtime.is_configured():
        return
    try:
        instrument_trigger(trigger, context)
    except Exception as exc:
        logs.once(
            f"trigger_instrument:{type(trigger).__qualname__}",
            logging.ERROR,
            "store-metrics could not instrument trigger %s (ID %s); it runs uninstrumented: %r",
            type(trigger).__qualname__,
            trigger_id,
            exc,
        )


# -- the hook -----------------------------------------------------------------------------------------


def hook_points(runner_class: Any) -> tuple[Callable[..., Any], Callable[..., Any]] | str:
    """``(run, run_trigger)`` of Airflow's ``TriggerRunner``, or why they are not what we wrap."""
    if not inspect.isclass(runner_class):
        return f"{RUNNER_MODULE} has no {RUNNER_CLASS} class"
    run = inspect.getattr_static(runner_class, "run", None)
    run_trigger = inspect.getattr_static(runner_class, "run_trigger", None)
    if not inspect.isfunction(run) or inspect.iscoroutinefunction(run):
        return f"{RUNNER_CLASS}.run is not a plain method"
    if not inspect.isfunction(run_trigger) or not inspect.iscoroutinefunction(run_trigger):
        return f"{RUNNER_CLASS}.run_trigger is not a coroutine method"
    positional = [
        p.name
        for p in inspect.signature(run_trigger).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if tuple(positional[:3]) != _RUN_TRIGGER_PARAMS:
        return f"{RUNNER_CLASS}.run_trigger does not take (trigger_id, trigger, ...)"
    return run, run_trigger


def _wrap_run(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The trigger runner subprocess, before asyncio.run(): configuring here keeps it off the loop.
        try:
            startup.ensure_emitter()
        except Exception as exc:
            logs.once("trigger_configure", logging.ERROR, "store-metrics is off in the triggerer: %r", exc)
        try:
            return original(self, *args, **kwargs)
        finally:
            # The loop has ended (stop, SIGTERM): hand over what the last interval counted.
            if runtime.is_configured():
                runtime.get_emitter().flush()  # bounded by flush_timeout, never raises

    setattr(run, _MARK, True)
    return run


def _wrap_run_trigger(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    async def run_trigger(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind_partial(self, *args, **kwargs).arguments
        except TypeError:
            bound = {}  # the original will say what is wrong with the call
        if "trigger" in bound:
            _instrument_safely(bound["trigger"], bound.get("trigger_id"), bound.get("context"))
        return await original(self, *args, **kwargs)

    setattr(run_trigger, _MARK, True)
    return run_trigger


def runner_starts_fresh() -> bool:
    """Whether this Airflow starts the trigger runner as a fresh interpreter (``use_exec``) here.

    Airflow 3.4 asks ``supervisor._should_use_exec()`` (true on macOS); Airflow 3.3 always forks.
    """
    supervisor = sys.modules.get(SUPERVISOR_MODULE)
    should = getattr(supervisor, "_should_use_exec", None)
    if not callable(should):
        return False
    try:
        return bool(should())
    except Exception:
        return False


def entry_point(supervisor_class: Any) -> Callable[[], Any] | str:
    """Airflow's ``TriggerRunnerSupervisor.run_in_process`` (bound), or why it cannot be taken over."""
    if not inspect.isclass(supervisor_class):
        return f"{RUNNER_MODULE} has no {SUPERVISOR_CLASS} class"
    entry = inspect.getattr_static(supervisor_class, ENTRY, None)
    if isinstance(entry, staticmethod) and getattr(entry.__func__, _MARK, False):
        return "taken over already"
    if not isinstance(entry, classmethod) or len(inspect.signature(entry.__func__).parameters) != 1:
        return f"{SUPERVISOR_CLASS}.{ENTRY} is not a classmethod without arguments"
    bound: Callable[[], Any] = getattr(supervisor_class, ENTRY)
    return bound


def _take_over_entry(module: Any) -> str | None:
    """Make ``run_trigger_runner`` the runner's entry point; return why not, or ``None``."""
    supervisor_class = getattr(module, SUPERVISOR_CLASS, None)
    entry = entry_point(supervisor_class)
    if isinstance(entry, str):
        return None if _hook.entry is not None else entry
    _hook.entry = entry
    # A staticmethod, so ``cls.run_in_process`` is the plain function: Airflow names it
    # ``store_metrics.integration.triggerer:run_trigger_runner`` for a fresh interpreter, or calls it
    # after a fork.
    setattr(supervisor_class, ENTRY, staticmethod(run_trigger_runner))
    return None


def run_trigger_runner() -> None:
    """The trigger runner subprocess's entry point while the hook is installed.

    After a fork, the hook came along: call Airflow's own entry point. In a fresh interpreter
    (``use_exec``) nothing came along: hook this process as the plugin hooks a triggerer, then call
    Airflow's entry point, which in this interpreter is still the class's own.
    """
    module = importlib.import_module(RUNNER_MODULE)
    if _hook.entry is None:
        try:
            install(in_runner=True)
        except Exception as exc:
            logs.once(
                "trigger_hook_failed", logging.ERROR, "store-metrics could not hook the triggerer: %r", exc
            )
    entry = _hook.entry or getattr(getattr(module, SUPERVISOR_CLASS), ENTRY)
    entry()


setattr(run_trigger_runner, _MARK, True)


def install(*, in_runner: bool = False) -> bool:
    """Wrap ``TriggerRunner.run`` and ``run_trigger`` if this process loaded Airflow's triggerer.

    The wrapped ``run`` sets the trigger runner subprocess up (``startup.ensure_emitter``)
    before its loop exists. Returns whether the hook is in place. Idempotent; never
    raises. Where the trigger runner module is not loaded (every process but the triggerer), it
    does nothing. Where its shape is not the one wrapped here, it logs one line and does nothing.
    ``in_runner``: called by ``run_trigger_runner`` in a freshly started trigger runner.
    """
    module = sys.modules.get(RUNNER_MODULE)
    if module is None:
        return False
    fresh = False
    with _lock:
        if _hook.installed:
            return True
        try:
            runner_class: Any = getattr(module, RUNNER_CLASS, None)
            points = hook_points(runner_class)
            if isinstance(points, str):
                return _absent(points)
            fresh = not in_runner and runner_starts_fresh()
            problem = _take_over_entry(module)
            if problem is not None and fresh:
                return _absent(
                    f"its trigger runner starts as a fresh interpreter (use_exec), which loads no plugin, "
                    f"and {problem}"
                )
            run, run_trigger = points
            if not getattr(run, _MARK, False):
                runner_class.run = _wrap_run(run)
            if not getattr(run_trigger, _MARK, False):
                runner_class.run_trigger = _wrap_run_trigger(run_trigger)
            _hook.installed = True
        except Exception as exc:
            logs.once(
                "trigger_hook_failed", logging.ERROR, "store-metrics could not hook the triggerer: %r", exc
            )
            return False
    if fresh:
        # The runner says "counting" itself, once it is hooked in its own interpreter.
        logs.once(
            "trigger_hook_fresh",
            logging.INFO,
            "store-metrics: this triggerer starts its trigger runner as a fresh interpreter (use_exec); "
            "store-metrics hooks it from the runner's entry point (%s:%s)",
            __name__,
            run_trigger_runner.__qualname__,
        )
    else:
        logs.once(
            "trigger_hook",
            logging.INFO,
            "store-metrics: counting the state store calls of triggers in this triggerer",
        )
    return True


def _absent(why: str) -> bool:
    _hook.absent = why
    logs.once(
        "trigger_hook_absent",
        logging.WARNING,
        "store-metrics: triggers' state store calls are not counted in this triggerer: %s "
        "(the hook fits Airflow 3.3's and 3.4's trigger runner); triggers run as usual",
        why,
    )
    return False


def describe_triggerer() -> str:
    """One line for ``store-metrics check``: whether this Airflow's triggerer would count triggers' calls."""
    try:
        module = importlib.import_module(RUNNER_MODULE)
    except Exception as exc:
        return f"triggerer: cannot tell whether triggers' calls are counted ({RUNNER_MODULE}: {exc!r})"
    points = hook_points(getattr(module, RUNNER_CLASS, None))
    if isinstance(points, str):
        return f"triggerer: asset watchers' state store calls are NOT counted: {points}"
    entry = entry_point(getattr(module, SUPERVISOR_CLASS, None))
    if runner_starts_fresh():
        if isinstance(entry, str) and _hook.entry is None:
            return (
                "triggerer: asset watchers' state store calls are NOT counted: the trigger runner starts "
                f"as a fresh interpreter (use_exec), which loads no plugin, and {entry}"
            )
        return (
            "triggerer: asset watchers' state store calls are counted; the trigger runner starts as a "
            "fresh interpreter (use_exec) and is hooked from its entry point"
        )
    return "triggerer: asset watchers' state store calls are counted (the trigger runner is forked)"


def uninstall() -> None:
    """Put Airflow's own methods back (tests)."""
    module = sys.modules.get(RUNNER_MODULE)
    runner_class = getattr(module, RUNNER_CLASS, None)
    supervisor_class = getattr(module, SUPERVISOR_CLASS, None)
    with _lock:
        for name in ("run", "run_trigger"):
            method = inspect.getattr_static(runner_class, name, None) if runner_class else None
            if method is not None and getattr(method, _MARK, False):
                setattr(runner_class, name, method.__wrapped__)
        if _hook.entry is not None and supervisor_class is not None:
            setattr(supervisor_class, ENTRY, classmethod(_hook.entry.__func__))  # type: ignore[attr-defined]
        _hook.installed = False
        _hook.absent = None
        _hook.entry = None
