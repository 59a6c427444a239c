"""Development-time generators: the dashboards store-metrics ships, its provider info, the docs' tables
(never installed).

The Grafana dashboard and the Datadog dashboard and monitors are hundreds of queries derived from
the metric catalogue: they are built here, in the repository, and shipped as templates
(``src/store_metrics/shipped/templates/``) that ``store-metrics export`` fills in for a prefix.

    scripts/dashboards           # rewrite the dashboard templates
    scripts/dashboards --check   # exit 1 if a template is not what the generators build

* ``facts``: what both dashboards share (titles, labels, the watchers' tag, links);
* ``promql``: PromQL over the recorded calls of the rule files;
* ``grafana``: the Grafana dashboard;
* ``datadog``: the Datadog dashboard and monitors;
* ``tokens``: a generated file turned into a template (catalogue names and settings as tokens);
* ``templates``: which template each generator writes, the writer and the check;
* ``provider_info``: ``store_metrics/integration/provider_info.json``, from the option table;
* ``docs``: the one writer of the docs' generated blocks (``python -m generators.docs``), from
  ``reference_tables`` (options, metrics, the CLI, versions) and ``alert_tables``
  (docs/alerts.md: settings, alerts, panels).
"""
