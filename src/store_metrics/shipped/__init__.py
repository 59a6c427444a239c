"""Every file store-metrics ships for the metrics pipeline, filled in for one metric prefix.

``store-metrics export --out DIR [--prefix PREFIX]`` writes them (``export`` has the layout);
the repository's ``collector/``, ``dashboards/``, ``helm/`` and ``datadog/`` hold what it writes for
the default prefix. Most files are data: templates under ``templates/`` (package data), filled in
by ``templating`` (catalogue names renamed exactly for the prefix). The Grafana dashboard and the
Datadog dashboard and monitors are built from the catalogue when the export runs, for its prefix
and settings.

* ``templating``: the one templating mechanism (``@token@``);
* ``render_context``: what the dashboards are built for (prefix, settings) and their JSON writer;
* ``dashboard_facts``: what both dashboards share; ``grafana``, ``datadog``: their builders;
* ``records``: the recorded series' names, which carry the prefix;
* ``export``: the layout, the writer and the ``export`` command;
* ``otel_collector``: the collector's metric filter, computed from the catalogue;
* ``statsd_mappings``: the statsd_exporter mappings' lists, one entry per catalogue metric;
* ``rules``: the recording rules of every counter the catalogue records;
* ``helm``: the Airflow Helm chart's values (their ``statsd.extraMappings`` the mapping files' lists)
  and Dockerfile.
"""

#: The Grafana dashboard's uid (dashboards/store-metrics.json): the alerts' ``dashboard_url`` and the
#: UI's link open ``/d/<uid>/``.
DASHBOARD_UID = "store-metrics-state-store"
