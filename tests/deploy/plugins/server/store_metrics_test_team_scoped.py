"""A test-only plugin: store-metrics' plugin given a team, as a user might subclass it for one team.

With ``[core] multi_team`` on, Airflow 3.4 skips the root middlewares of team-scoped plugins: this
one's (store-metrics' own middleware) is skipped, and store-metrics must say so once. The global
``store_metrics`` plugin (entry point) is loaded beside it and keeps its middleware. No listener: the
global plugin's listener is the one that counts.
"""

from __future__ import annotations

from store_metrics.integration.plugin import StoreMetricsPlugin


class TeamScopedStoreMetricsPlugin(StoreMetricsPlugin):
    name = "store_metrics_test_team_scoped"
    team_name = "payments"
    listeners = []  # noqa: RUF012 - Airflow reads the class attribute
