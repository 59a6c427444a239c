"""The State store in Airflow's own UI: a tab on each DAG's page, and a page for the deployment.

The tab shows, per task and per asset the DAG uses, what the state store holds (entries, bytes,
oldest and newest write, expired entries, entries held by a custom backend), read from the metadata
database with one bounded aggregate statement; with a Prometheus configured, each task's calls per
operation and found ratio over a chosen window, from the dashboards' series; with a Grafana, a link
to the dashboard filtered on the DAG. The page lists the largest DAGs and assets, the expired
entries nobody cleans up, and the inventory's freshness. Never a key or a value.

One module per job:

* ``views`` — what the plugin registers: the two external views and the FastAPI app;
* ``routes`` — where the views live (mount point, routes, name): what links to them imports it;
* ``app`` — the app: the pages, their static files and their JSON routes;
* ``access`` — Airflow's auth manager decides who sees what;
* ``sources`` — per API server worker: options, database, Prometheus, cached answers;
* ``cache`` — the per-worker TTL cache (one load at a time per key);
* ``reading`` — the aggregate statements of ``store_metrics.inventory``, for one DAG and all;
* ``calls`` — the calls from Prometheus, with the dashboards' PromQL;
* ``payload`` — the JSON the pages read;
* ``status`` — what ``store-metrics check`` says about the views;
* ``static/`` — the pages (HTML, CSS, JavaScript: shipped as they are, no build step).

Importing this package imports neither FastAPI nor Airflow: the app is built when the API server
asks for the plugin's apps.
"""

from __future__ import annotations

from .views import external_views, fastapi_apps

__all__ = ["external_views", "fastapi_apps"]
