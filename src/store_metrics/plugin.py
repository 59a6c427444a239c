"""The Airflow plugin: instruments every task's state store, with no change to any DAG.

Registered under the ``airflow.plugins`` entry point, so ``pip install airflow-store-metrics``
is the whole installation. Its listener runs in each task process:

* ``on_task_instance_running`` (after the Task SDK built and cached the task's context, before
  ``execute``): configure the emitter from ``[store_metrics]`` on first use in the process, then
  replace ``context["task_state_store"]`` and ``context["asset_state_store"]`` in the cached
  context with instrumented wrappers tagged from the task instance;
* ``on_task_instance_success|failed|skipped`` and ``before_stopping``: flush, bounded by
  ``flush_timeout``, without closing the emitter (``dag.test()`` runs many tasks in one process).

In the triggerer, ``on_starting`` hooks the trigger runner (:mod:`store_metrics.triggers`): the
state store calls of asset watchers' triggers are counted too.

In the API server, its FastAPI root middleware (:class:`~store_metrics.server.StateStoreRouteMetrics`)
counts the Execution API's state store requests and watches each worker's event loop. The plugin is
global (no ``team_name``): Airflow 3.4 with ``[core] multi_team`` on skips the root middlewares of
team-scoped plugins, so a subclass given a ``team_name`` says once, when Airflow loads it, that the
API server counts nothing (:func:`skipped_middleware_reason`). With
``[store_metrics] count_at = api_server`` it also counts the calls on the task side's counters, with
the task's tags (:mod:`store_metrics.server.attribution`), and task processes count nothing.

Nothing here may break a task: every hook catches everything and logs it once.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from pathlib import Path
from typing import Any

import pluggy

from . import logs, runtime, triggers, ui
from .accessors import instrument_asset_store, instrument_task_store
from .catalogue import task_tags
from .config import load_settings
from .errors import ConfigError, MissingExtraError
from .server import StateStoreRouteMetrics

try:  # the Task SDK's class (workers may have the SDK without airflow-core)
    from airflow.sdk.plugins_manager import AirflowPlugin
except ImportError:  # pragma: no cover - core-only installs
    from airflow.plugins_manager import AirflowPlugin  # type: ignore[assignment]

hookimpl = pluggy.HookimplMarker("airflow")

_TASK_RUNNER = "airflow.sdk.execution_time.task_runner"
_NATIVE_METRIC = "task_state_store.read_found"


@functools.cache
def airflow_emits_state_store_metrics() -> bool:
    """Whether the installed Airflow counts state store calls itself (the upstream proposal merged).

    Two signs, either is enough: the accessor takes the ``stats_tags`` the proposal passes in,
    or Airflow's metrics registry lists ``task_state_store.read_found``.
    """
    try:
        from airflow.sdk.execution_time import context as sdk_context

        accessor = getattr(sdk_context, "TaskStateStoreAccessor", None)
        if accessor is not None and "stats_tags" in inspect.signature(accessor).parameters:
            return True
        from airflow.sdk._shared.observability import metrics as shared_metrics

        registry = Path(shared_metrics.__file__).with_name("metrics_template.yaml")
        return registry.is_file() and _NATIVE_METRIC in registry.read_text(encoding="utf-8")
    except Exception:
        return False


def _run_type(context: Any) -> str:
    dag_run = context.get("dag_run")
    run_type = getattr(dag_run, "run_type", None)
    if run_type is None:
        return "unknown"
    return str(getattr(run_type, "value", run_type))


def tags_for(task_instance: Any, context: Any) -> dict[str, str]:
    """The tag set for one task instance: dag_id, task_id, run_type, operator, team_name if set."""
    stats_tags = dict(getattr(task_instance, "stats_tags", None) or {})
    return task_tags(
        dag_id=str(stats_tags.get("dag_id") or task_instance.dag_id),
        task_id=str(stats_tags.get("task_id") or task_instance.task_id),
        run_type=_run_type(context),
        operator=type(task_instance.task).__name__,
        team_name=stats_tags.get("team_name") or None,
    )


class _Active:
    """Per-process state of the listener."""

    ready: bool | None = None  # None: not decided yet in this process
    flushed: bool = True
    counts_tasks: bool | None = None  # [store_metrics] count_at; None: not read yet in this process


_state = _Active()


def _ensure_emitter() -> bool:
    """Configure the emitter on first use in this process; False when tasks stay uninstrumented."""
    if _state.ready is not None:
        return _state.ready
    _state.ready = False
    if airflow_emits_state_store_metrics():
        logs.once(
            "native",
            logging.INFO,
            "store-metrics: this Airflow counts state store calls itself; the plugin stays out of the way",
        )
        return False
    try:
        settings = load_settings()
    except ConfigError as exc:
        logs.once("config", logging.ERROR, "store-metrics is off for this process: %s", exc)
        return False
    if not settings.enabled:
        logs.once("disabled", logging.INFO, "store-metrics is disabled ([store_metrics] enabled = false)")
        return False
    if not runtime.is_configured():  # a test may have installed its own (store_metrics.testing)
        try:
            emitter = runtime.configure(**settings.configure_kwargs())
        except (ConfigError, MissingExtraError) as exc:
            logs.once("config", logging.ERROR, "store-metrics is off for this process: %s", exc)
            return False
        if settings.sends_nowhere or getattr(emitter.backend, "sends_nowhere", False):
            logs.once(
                "nowhere",
                logging.WARNING,
                "store-metrics: Airflow's [metrics] enables no backend, so the counts go nowhere. Set "
                "[metrics] statsd_on, statsd_datadog_enabled or otel_on, or [store_metrics] backend.",
            )
        else:
            logs.once(
                "target",
                logging.INFO,
                "store-metrics: counting state store calls, sending to %s%s",
                emitter.backend.describe(),
                f" (backend = auto: {settings.backend_reason})" if settings.backend_reason else "",
            )
    _state.ready = True
    return True


def _task_side_counts() -> bool:
    """False with ``count_at = api_server``: the API server counts this process's calls, so it counts none.

    Decided once per process, before anything is configured: such a task process opens no backend.
    A configuration that does not load is left to :func:`_ensure_emitter` to report.
    """
    if _state.counts_tasks is None:
        try:
            _state.counts_tasks = not load_settings().counts_at_api_server
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


def instrument_context(task_instance: Any, context: Any) -> bool:
    """Replace the context's accessors with instrumented ones; return whether anything was wrapped."""
    emitter = runtime.get_emitter()
    tags = tags_for(task_instance, context)
    wrapped = False
    store = context.get("task_state_store")
    if store is not None:
        context["task_state_store"] = instrument_task_store(store, emitter, tags)
        wrapped = True
    assets = context.get("asset_state_store")
    if assets is not None:
        context["asset_state_store"] = instrument_asset_store(assets, emitter, tags)
        wrapped = True
    return wrapped


def _is_task_runner_ti(task_instance: Any) -> bool:
    # Core's TaskInstance (scheduler, API server) also reaches listeners; only the Task SDK's
    # RuntimeTaskInstance runs user code. Never import the task runner where it is not loaded.
    runner = sys.modules.get(_TASK_RUNNER)
    cls = getattr(runner, "RuntimeTaskInstance", None)
    return cls is not None and isinstance(task_instance, cls)


def _flush() -> None:
    # Once per task: the state hook and before_stopping both end a task.
    if not _state.ready or _state.flushed:
        return
    _state.flushed = True
    runtime.get_emitter().flush()  # bounded by the emitter's own flush_timeout


class StateStoreListener:
    """Task SDK listener hooks. Each one swallows and logs its own errors."""

    @hookimpl
    def on_starting(self, component: Any) -> None:
        # In the triggerer (its Job is being made, before the trigger runner subprocess starts):
        # count the state store calls of triggers (store_metrics.triggers). Elsewhere: nothing.
        try:
            triggers.install(_ensure_emitter)
        except Exception:
            logs.once("starting", logging.ERROR, "store-metrics could not hook the triggerer", exc_info=True)

    @hookimpl
    def on_task_instance_running(self, previous_state: Any, task_instance: Any) -> None:
        try:
            if not _is_task_runner_ti(task_instance) or not _task_side_counts() or not _ensure_emitter():
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


def skipped_middleware_reason(plugin_class: Any) -> str | None:
    """Why the API server skips this plugin class's root middleware, or ``None`` when it adds it.

    Airflow 3.4 with ``[core] multi_team`` on skips the root middlewares of plugins that have a
    ``team_name`` (``init_plugins`` in ``airflow/api_fastapi/app.py``): a root middleware sees every
    team's requests. Airflow 3.3 has no team-scoped plugins.
    """
    team = getattr(plugin_class, "team_name", None)
    if not team or not getattr(plugin_class, "fastapi_root_middlewares", None):
        return None
    if not hasattr(AirflowPlugin, "team_name"):
        return None
    from airflow.configuration import conf

    if not conf.getboolean("core", "multi_team", fallback=False):
        return None
    return (
        f"plugin {plugin_class.name!r} has team_name = {team!r} and [core] multi_team is on: Airflow skips "
        "the root middlewares of team-scoped plugins, so the API server counts no state store request "
        "(no route metrics, and with count_at = api_server nothing at all). Leave team_name unset: the "
        "plugin is global, and calls still carry their own team_name tag"
    )


def describe_server_registration() -> str | None:
    """For ``store-metrics check``, with ``[core] multi_team`` on: does the API server add the middleware."""
    from airflow.configuration import conf

    if not conf.getboolean("core", "multi_team", fallback=False):
        return None
    reason = skipped_middleware_reason(StoreMetricsPlugin)
    if reason:
        return f"warning: multi-team: server-side counting is off: {reason}"
    return (
        "multi-team: the API server adds store-metrics' middleware ([core] multi_team is on; the "
        "store_metrics plugin is global, with no team_name)"
    )


class StoreMetricsPlugin(AirflowPlugin):
    """Counts every state store call of every task (see the store-metrics README)."""

    name = "store_metrics"
    listeners = [listener]  # noqa: RUF012 - Airflow reads the class attribute
    # The API server adds it to its core app (which mounts the Execution API at /execution).
    fastapi_root_middlewares = [  # noqa: RUF012
        {"name": "store_metrics_state_store_routes", "middleware": StateStoreRouteMetrics}
    ]
    # The State store tab and page in Airflow's UI (store_metrics.ui): read when the API server (or
    # `airflow plugins`) asks, so `[store_metrics] ui = false` can leave them out.
    fastapi_apps = property(lambda self: ui.fastapi_apps())
    external_views = property(lambda self: ui.external_views())

    @classmethod
    def on_load(cls, *args: Any, **kwargs: Any) -> None:
        # Airflow calls it once per process that loads plugins, the API server among them.
        try:
            reason = skipped_middleware_reason(cls)
            if reason:
                logs.once(
                    "multi_team", logging.WARNING, "store-metrics: server-side counting is off: %s", reason
                )
        except Exception:
            logs.once(
                "on_load", logging.ERROR, "store-metrics could not check its registration", exc_info=True
            )
