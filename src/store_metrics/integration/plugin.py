"""The Airflow plugin: instruments every task's state store, with no change to any DAG.

Registered under the ``airflow.plugins`` entry point, so ``pip install airflow-store-metrics``
is the whole installation. Every Airflow process loads it, so importing it costs little and loads
no other part of the package: its listener (``store_metrics.integration.task_listener``) imports what a
task needs when a task starts; the API server's middleware and the UI's views are imported when the
API server builds its app. In the triggerer, ``on_starting`` hooks the trigger runner
(``triggerer``): the state store calls of asset watchers' triggers are counted too.

In the API server, its FastAPI root middleware (``StateStoreRouteMetrics``)
counts the Execution API's state store requests and watches each worker's event loop. The plugin is
global (no ``team_name``): Airflow 3.4 with ``[core] multi_team`` on skips the root middlewares of
team-scoped plugins, so a subclass given a ``team_name`` says once, when Airflow loads it, that the
API server counts nothing (``skipped_middleware_reason``). With
``[store_metrics] count_at = api_server`` it also counts the calls on the task side's counters, with
the task's tags (``store_metrics.api_server.attribution``), and task processes count nothing.

Nothing here may break a task: every hook catches everything and logs it once.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import logs
from .task_listener import listener

try:  # the Task SDK's class (workers may have the SDK without airflow-core)
    from airflow.sdk.plugins_manager import AirflowPlugin
except ImportError:  # pragma: no cover - core-only installs
    from airflow.plugins_manager import AirflowPlugin  # type: ignore[assignment]


class StateStoreRouteMetrics:
    """The API server's root middleware (``store_metrics.api_server.StateStoreRouteMetrics``),
    imported when the API server builds its app: never in a task process, where the plugin loads too."""

    def __new__(cls, app: Any, *args: Any, **kwargs: Any) -> Any:
        from ..api_server import StateStoreRouteMetrics as Middleware

        return Middleware(app, *args, **kwargs)


def _ui() -> Any:
    from .. import ui

    return ui


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
    fastapi_apps = property(lambda self: _ui().fastapi_apps())
    external_views = property(lambda self: _ui().external_views())

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
