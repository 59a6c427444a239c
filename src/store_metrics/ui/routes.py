"""Where the State store views live: the app's mount point, the views' routes in Airflow's UI, their name.

Plain constants, so that what links to the views (the pages' JSON, ``store-metrics check``) does not
import ``views``, which builds the app (``app``), which serves that JSON (``payload``).
"""

from __future__ import annotations

from typing import Final

#: Where the API server mounts the app.
URL_PREFIX: Final = "/store-metrics"
#: The ``url_route`` of the DAG tab: a DAG's tab is at ``dags/<dag_id>/plugin/<TAB_ROUTE>`` in the UI.
TAB_ROUTE: Final = "state-store"
#: The ``url_route`` of the deployment page: ``plugin/<PAGE_ROUTE>`` in the UI.
PAGE_ROUTE: Final = "store-metrics"
#: The views' name, on the tab and in the *Browse* menu.
NAME: Final = "State store"
