"""The Grafana dashboard (``dashboards/store-metrics.json``), built when ``store-metrics export`` runs,
for its prefix and settings (a ``store_metrics.shipped.render_context.RenderContext``).

* ``promql``: PromQL over the recorded calls of the rule files;
* ``queries``: the query specs (``Measure``, ``Ratio``,
  ``TopK``, ``Server``, ``Footprint``) and the panel model;
* ``rows``: the task side's rows, one builder per row, and the collapsed Triggers row (asset
  watchers, ``run_type="asset_watcher"``);
* ``footprint_row``: the collapsed Footprint row (``store-metrics inventory``'s recorded gauges);
* ``server_row``: the collapsed API server row;
* ``dashboard``: variables, layout and JSON (``store-metrics.json``).

The provisioning files are plain templates (``templates/grafana-*.yml``).

**Why not grafana-foundation-sdk.** Grafana's own typed builders (PyPI ``grafana-foundation-sdk``,
tried at ``1769699998!10.1.0`` and ``1769699379!11.6.0``) build every panel type this dashboard
uses, but two things keep these plain dicts: the SDK has no model for the import form's
``__requires``/``__elements``, and each build targets one Grafana version, encoded as the version's
epoch (``<build time>!<Grafana version>``): a plain ``pip install grafana-foundation-sdk`` resolves
to the Grafana 10.1 build (schema 36) because that build has the highest epoch, while this
dashboard targets Grafana 11.0 (schema 39). The dicts are checked against Grafana's model by
tests/shipped/test_dashboards.py and evaluated against a real Prometheus by
tests/shipped/test_prometheus_demo.py and test_prometheus_feeder.py.
"""
