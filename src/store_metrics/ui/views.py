"""What the plugin registers in Airflow's UI: two external views, and the FastAPI app that serves them.

* destination ``dag``: a *State store* tab on every DAG's page. Airflow's UI puts the view's
  ``href`` in an iframe, with ``{DAG_ID}`` replaced by the DAG's id (URL-encoded);
* destination ``nav``: a *State store* page under *Browse*.

Both hrefs are relative (no leading ``/``): the UI resolves them against its ``<base href>``, i.e.
the API server's base URL, so they also work behind a path prefix. The pages and their data are
served by ``store_metrics.ui.app.create_app``, mounted by the API server at ``URL_PREFIX``.

``[store_metrics] ui = false`` removes both views and the app. ``enabled`` and ``server_metrics``
do not: they are about counting calls, and the tab shows the footprint without any counting.
The app is built once, when the API server first asks for the plugin's apps, never at import
(task processes load this plugin too, and never ask).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Final

from .. import logs
from ..config.reader import read_options
from ..errors import ConfigError
from .routes import NAME, PAGE_ROUTE, TAB_ROUTE, URL_PREFIX

_BASE: Final = URL_PREFIX.lstrip("/")


@functools.cache
def enabled() -> bool:
    """``[store_metrics] ui``. A configuration that does not load leaves the views on: the pages say
    what is wrong, and the footprint needs none of the other options."""
    try:
        return read_options().ui
    except ConfigError as exc:
        logs.once("ui:views", logging.ERROR, "store-metrics UI: %s; the State store views stay on", exc)
        return True


def external_views() -> list[dict[str, Any]]:
    """The plugin's ``external_views``: the DAG tab and the deployment page (none with ``ui = false``)."""
    if not enabled():
        return []
    icons = {"icon": f"{_BASE}/static/icon.svg", "icon_dark_mode": f"{_BASE}/static/icon-dark.svg"}
    return [
        {
            "name": NAME,
            "href": f"{_BASE}/dags/{{DAG_ID}}",
            "destination": "dag",
            "url_route": TAB_ROUTE,
            **icons,
        },
        {
            "name": NAME,
            "href": f"{_BASE}/",
            "destination": "nav",
            "category": "browse",
            "url_route": PAGE_ROUTE,
            **icons,
        },
    ]


@functools.cache
def _app() -> Any:
    from .app import create_app

    return create_app()


def fastapi_apps() -> list[dict[str, Any]]:
    """The plugin's ``fastapi_apps``: the pages and their data under ``URL_PREFIX``."""
    if not enabled():
        return []
    return [{"app": _app(), "url_prefix": URL_PREFIX, "name": "store_metrics_ui"}]
