"""Development-time generators: the dashboards store-metrics ships, its provider info, the docs' tables
(never installed).

The Grafana dashboard and the Datadog dashboard and monitors are hundreds of queries derived from
the metric catalogue: they are built here, in the repository, and shipped as templates
(``src/store_metrics/shipped/templates/``) that ``store-metrics export`` fills in for a prefix.

    scripts/dashboards           # rewrite the dashboard templates
    scripts/dashboards --check   # exit 1 if a template is not what the generators build

* :mod:`.facts`: what both dashboards share (titles, labels, the watchers' tag, links);
* :mod:`.promql`: PromQL over the recorded calls of the rule files;
* :mod:`.grafana`: the Grafana dashboard;
* :mod:`.datadog`: the Datadog dashboard and monitors;
* :mod:`.tokens`: a generated file turned into a template (catalogue names and settings as tokens);
* :mod:`.templates`: which template each generator writes, the writer and the check;
* :mod:`.provider_info`: ``store_metrics/integration/provider_info.json``, from the option table;
* :mod:`.docs`: the one writer of the docs' generated blocks (``python -m generators.docs``), from
  :mod:`.reference_tables` (options, metrics, the CLI, versions) and :mod:`.alert_tables`
  (docs/alerts.md: settings, alerts, panels).
"""
