"""The state store footprint: what each DAG and task, and each asset, keeps in the store.

The counters say who *calls* the state store; the inventory says who *fills* it. It reads Airflow
3.3's two tables, ``task_state_store`` and ``asset_state_store``, from the metadata database with
one aggregate query per table per interval, and reports gauges
(``store_metrics.catalogue.FOOTPRINT_METRICS``): entries, value bytes, age of the oldest and
newest entry, expired entries not yet cleaned up, and entries held by a custom backend, per
``dag_id``/``task_id`` and per ``asset``, bounded to the top ``inventory_top`` by bytes plus
``<other>``.

It runs once per deployment as ``store-metrics inventory --serve`` (a small long-running process
with its own Prometheus endpoint, or pushing through the configured backend), never in the API
server's workers or in tasks; ``store-metrics inventory`` prints the footprint once.

One module per job:

* ``queries`` — the two aggregate statements on Airflow's own tables, sizes in SQL per dialect;
* ``database`` — Airflow's engine, read-only transactions under a statement timeout, error kinds;
* ``footprint`` — rows to groups: top N DAGs/tasks/assets and ``<other>``;
* ``collect`` — one collection of both tables; the last good footprint kept, problems said once;
* ``gauges`` — a snapshot as (catalogue metric, tags, value), ages at reporting time;
* ``prometheus`` — the ``--serve`` scrape endpoint (``prometheus_client``);
* ``publish`` — ``inventory_export = backend``: the gauges through one emitter;
* ``serve`` — the loop: interval, ticks, watchdog; never stops on an error;
* ``table`` — the terminal table, largest first;
* ``command`` — ``store-metrics inventory [--serve]``.

Importing this package imports neither Airflow nor SQLAlchemy's models: that happens when a
collection first runs.
"""

from __future__ import annotations

from .collect import Collector, Snapshot
from .database import Database
from .footprint import Group, StoreFootprint

__all__ = ["Collector", "Database", "Group", "Snapshot", "StoreFootprint"]
