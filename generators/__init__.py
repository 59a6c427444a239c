"""Development-time generators: store-metrics' provider info and the docs' tables (never installed).

The shipped files, the dashboards and monitors included, are built by the package when
``store-metrics export`` runs (``store_metrics.shipped``), not here.

* ``provider_info``: ``store_metrics/integration/provider_info.json``, from the option table;
* ``__main__``: ``python -m generators`` writes (or checks) all of it, the repository's export too;
* ``docs``: the one writer of the docs' generated blocks (``python -m generators.docs``), from
  ``reference_tables`` (options, metrics, the CLI, versions) and ``alert_tables``
  (docs/alerts.md: settings, alerts, panels).
"""
