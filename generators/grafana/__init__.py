"""The Grafana side: the dashboard JSON and its provisioning files.

* :mod:`.queries`: the query specs (:class:`~.queries.Measure`, :class:`~.queries.Ratio`,
  :class:`~.queries.TopK`, :class:`~.queries.Server`) and the panel model;
* :mod:`.rows`: the task side's rows, one builder per row, and the collapsed Triggers row (asset
  watchers, ``run_type="asset_watcher"``);
* :mod:`.footprint_row`: the collapsed Footprint row (``store-metrics inventory``'s gauges);
* :mod:`.server_row`: the collapsed API server row;
* :mod:`.dashboard`: layout and JSON (``store-metrics.json``);
* :mod:`.provisioning`: the data source and dashboard provider files.

**Why not grafana-foundation-sdk.** Grafana's own typed builders (PyPI ``grafana-foundation-sdk``,
tried at ``1769699998!10.1.0`` and ``1769699379!11.6.0``) build every panel type this dashboard
uses (row, time series, stat, table, bar gauge) and both variable kinds, but three things keep
this hand-written generator. (1) ``store-metrics export`` must run from the package alone: the wheel
has no dependency (tests/test_export.py exports from a wheel installed with ``--no-deps``); as a
dependency the SDK (a 0.3 MB wheel, 4.8 MB installed) would end that, and as an optional one
``export`` would fail for every user without it. (2) It has no model for the import form's
``__inputs``/``__requires``/``__elements``, so its output would be post-processed anyway. (3) Each
build targets one Grafana version, encoded as the version's epoch (``<build time>!<Grafana
version>``): a plain ``pip install grafana-foundation-sdk`` resolves to the Grafana 10.1 build
(``schemaVersion`` 36), because that build has the highest epoch; the 11.6 build writes 41, this
dashboard is 42, so every Grafana release would need a pin to an exact epoch string. The generator
is plain dicts, checked against Grafana's model by tests/test_dashboards.py and evaluated against
a real Prometheus by tests/test_prometheus_e2e.py.
"""
