"""The ``store-metrics`` command: :mod:`.cli` parses, one module per subcommand does the work.

* :mod:`.cli` -- the parser and the dispatch (entry point ``store-metrics``);
* :mod:`.check` -- ``store-metrics check``;
* :mod:`.demo` -- ``store-metrics demo``, with :mod:`.demo_sources` feeding the dashboard's other rows.

``export`` and ``inventory`` live with what they serve (:mod:`store_metrics.shipped.export`,
:mod:`store_metrics.inventory.command`).
"""
