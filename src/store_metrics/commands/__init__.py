"""The ``store-metrics`` command: ``cli`` parses, one module per subcommand does the work.

* ``cli`` -- the parser and the dispatch (entry point ``store-metrics``);
* ``check`` -- ``store-metrics check``;
* ``demo`` -- ``store-metrics demo``, with ``demo_sources`` feeding the dashboard's other rows.

``export`` and ``inventory`` live with what they serve (``store_metrics.shipped.export``,
``store_metrics.inventory.command``).
"""
