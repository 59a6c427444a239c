"""Every file store-metrics ships for the metrics pipeline, filled in for one metric prefix.

``store-metrics export --out DIR [--prefix PREFIX]`` writes them (:mod:`.export` has the layout);
the repository's ``collector/``, ``dashboards/``, ``helm/`` and ``datadog/`` hold what it writes for
the default prefix. The files are data: templates under ``templates/`` (package data), filled in
by :mod:`.templating` (catalogue names renamed exactly for the prefix). The dashboards' templates
are built at development time by the repository's ``generators/`` (not installed).

* :mod:`.templating`: the one templating mechanism (``@token@``);
* :mod:`.records`: the recorded series' names, which carry the prefix;
* :mod:`.export`: the layout, the writer and the ``export`` command;
* :mod:`.otel_collector`: the collector's metric filter, computed from the catalogue;
* :mod:`.helm`: the Airflow Helm chart's values and Dockerfile, with :mod:`.statsd_mapping` and
  :mod:`.yaml_text` (its documents and YAML writer).
"""

#: The Grafana dashboard's uid (dashboards/store-metrics.json): the alerts' ``dashboard_url`` and the
#: UI's link open ``/d/<uid>/``.
DASHBOARD_UID = "store-metrics-state-store"
