"""The Grafana side: the dashboard JSON and its provisioning files.

* :mod:`.queries`: the query specs (:class:`~.queries.Measure`, :class:`~.queries.Ratio`,
  :class:`~.queries.TopK`, :class:`~.queries.Server`) and the panel model;
* :mod:`.rows`: the task side's rows, one builder per row;
* :mod:`.server_row`: the collapsed API server row;
* :mod:`.dashboard`: layout and JSON (``store-metrics.json``);
* :mod:`.provisioning`: the data source and dashboard provider files.
"""
