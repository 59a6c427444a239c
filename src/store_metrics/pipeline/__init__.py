"""Every file store-metrics ships for the metrics pipeline, generated for one metric prefix.

``store-metrics export --out DIR [--prefix PREFIX]`` writes them (:mod:`.export` has the layout);
the repository's ``collector/`` and ``dashboards/`` hold what it writes for the default prefix.
One module per job, all standard library (no PyYAML: :mod:`.yaml_text` writes the YAML):

* :mod:`.promql`: PromQL building blocks from the catalogue;
* :mod:`.otel_collector`: ``otel-collector.yaml``;
* :mod:`.prometheus_config`: ``prometheus.yml``;
* :mod:`.rules`, :mod:`.server_rules`, :mod:`.watcher_rules`, :mod:`.footprint_rules`: recording
  and alerting rules (tasks per DAG, API server, asset watchers, state store footprint) and their
  promtool tests;
* :mod:`.statsd_mapping`: statsd_exporter mappings (task side, API server, inventory);
* :mod:`.grafana`: the dashboard JSON and its provisioning files;
* :mod:`.templating`: the hand-written files (package data under ``templates/``);
* :mod:`.export`: the layout, the writer and the ``export`` command.
"""
