"""The configuration: the ``[store_metrics]`` options, read and checked the Airflow way.

* :mod:`.options` -- the one table of options (``[store_metrics]`` keys and ``configure()``
  arguments);
* :mod:`.reader` -- reads ``[store_metrics]`` (airflow.cfg, environment) into
  :class:`~.reader.OptionValues`, from the table;
* :mod:`.validate` -- the value checks the table uses;
* :mod:`.auto_backend` -- what Airflow's ``[metrics]`` does with a tagged count, and so what
  ``backend = auto`` picks.
"""
