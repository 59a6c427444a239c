"""Grafana file provisioning: a Prometheus data source and a dashboard provider for the JSON.

Hand-written (``templates/grafana-datasource.yml``, ``templates/grafana-dashboard-provider.yml``);
neither names a metric, so every prefix gets the same files.
"""

from __future__ import annotations

from .. import templating

__all__ = ["DASHBOARD_PROVIDER", "DATASOURCE", "render_dashboard_provider", "render_datasource"]

DATASOURCE = "grafana-datasource.yml"
DASHBOARD_PROVIDER = "grafana-dashboard-provider.yml"


def render_datasource(prefix: str) -> str:
    """``provisioning/datasources/store-metrics.yml``."""
    return templating.render(DATASOURCE, prefix)


def render_dashboard_provider(prefix: str) -> str:
    """``provisioning/dashboards/store-metrics.yml``."""
    return templating.render(DASHBOARD_PROVIDER, prefix)
