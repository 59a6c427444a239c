"""The configuration: the ``[store_metrics]`` options, read and checked the Airflow way.

* ``options`` -- the one table of options (``[store_metrics]`` keys and ``configure()``
  arguments);
* ``reader`` -- reads ``[store_metrics]`` (airflow.cfg, environment) into
  ``OptionValues``, from the table;
* ``validate`` -- the value checks the table uses;
* ``auto_backend`` -- what Airflow's ``[metrics]`` does with a tagged count, and so what
  ``backend = auto`` picks.
"""
