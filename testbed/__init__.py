"""The test bed: the real parts the tests (``tests/``) and the benchmarks (``benchmarks/``) both run with.

One package that imports neither of them, so neither imports the other for a helper:

* ``testbed.repository`` -- where the repository is; the ``PYTHONPATH`` a fresh process needs;
* ``testbed.ports`` -- a free port on 127.0.0.1;
* ``testbed.waiting`` -- bounded waits: on a condition, or until a value settles;
* ``testbed.airflow`` -- a throwaway ``AIRFLOW_HOME`` (its environment, database, ``dag.test()``
  runs), and one with the scenario DAGs of ``testbed/dags/scenarios/``;
* ``testbed.dag_runner`` -- runs DAG files with ``dag.test()`` in a fresh process;
* ``testbed/dags/`` -- every DAG file the tests deploy, one folder a purpose
  (``testbed.airflow.DAGS``): scenarios (the benchmarks run them too), executors, watchers, ui,
  retries, faults, inventory;
* ``testbed.databases`` -- throwaway PostgreSQL and MariaDB servers;
* ``testbed.udp`` -- a UDP receiver, what the StatsD and DogStatsD backends send to;
* ``testbed.otlp`` -- an OTLP/HTTP receiver that decodes what the OpenTelemetry exporter posts;
* ``testbed.endpoints`` -- an HTTP sink that answers every POST, a TCP listener that never answers;
* ``testbed.ticker`` -- the 1 ms ticker that measures how long an event loop is held;
* ``testbed.load_setup`` / ``testbed.load_client`` -- real task instances and tokens, and
  the closed-loop load generator that drives an API server's Execution API with them;
* ``testbed.values`` -- the value sizes of the async-routes proposal (0.4 KB, 59 KB, 689 KB).

Not part of the installed package: it lives beside ``src/`` and is importable from the
repository root (``python -m benchmarks``, and pytest's ``pythonpath``).
"""
