"""Helpers only the tests use, one job per module; each folder's ``conftest.py`` holds its fixtures.

Importable as ``support`` because ``[tool.pytest.ini_options] pythonpath`` puts ``tests/`` on
``sys.path`` (and ``testbed.repository.python_path`` on a fresh process's). What the tests and
the benchmarks share -- Airflow homes, UDP, OTLP and HTTP receivers, throwaway databases, free ports,
bounded waits -- is the test bed's (``testbed``), not here.

* ``support.airflow`` -- ``airflow standalone``, and Airflow's own ``[metrics]`` StatsD;
* ``support.deploy`` -- where the DAGs (``testbed/dags/``), plugins and modules the tests deploy are;
* ``support.cluster`` -- Airflow's components started one by one (executors other than Local);
* ``support.celery`` -- the CeleryExecutor deployment and the totals its DAG must add up to;
* ``support.pod_executor`` -- an executor that runs each task the KubernetesExecutor's way;
* ``support.hostnames`` -- hostname callables for the Celery workers;
* ``support.trigger_runs`` -- one trigger run through Airflow's ``TriggerRunner.run_trigger``;
* ``support.inventory_world`` -- the inventory tests' DAG runs, writes and expectations;
* ``support.ui`` / ``support.browser`` -- the UI's deployment, and Chromium driving it;
* ``support.count_at_runs`` -- the ``count_at = api_server`` deployments' runs and what they call;
* ``support.e2e`` / ``support.feeder`` -- the Prometheus end-to-end tests' model and checks,
  and their feeder process;
* ``support.cli`` / ``support.exported`` -- the ``store-metrics`` command, and its ``export``,
  in a fresh process;
* ``support.helm_chart`` / ``support.kubernetes_checks`` -- Airflow's Helm chart where a
  checkout is given; Kubernetes' schemas, the Operator's types and ``kubectl kustomize``;
* ``support.fake_accessors`` -- in-memory stand-ins shaped like the Task SDK's accessors;
* ``support.barriers`` -- one last count through the same path, proving every earlier one arrived;
* ``support.stores`` -- ``DictStore``, an in-memory task store accessor;
* ``support.tags`` -- the tag sets of the stories, and tag values that would break a line;
* ``support.lines`` / ``support.totals`` -- strict StatsD line parsers, lines summed per series;
* ``support.promtool`` / ``support.prometheus`` / ``support.servers`` -- promtool, and
  Prometheus and Alertmanager servers;
* ``support.peer_servers`` / ``support.peer_topologies`` -- the real peers (statsd_exporter,
  the Collector, Alertmanager; ``testbed.peers`` builds them) as servers, and every topology
  wired through them for ``tests/airflow/test_through_the_peers.py``;
* ``support.worker_endpoint`` -- an API server worker's ``/metrics`` endpoint, served by ``otel``;
* ``support.statsd_observations`` -- statsd_exporter's sampled-observation rule, the one ported
  rule, held equal to the real exporter (``tests/shipped/test_collector_inputs.py``);
* ``support.watchers`` -- the asset watchers' DAGs and the calls they make;
* ``support.dashboard`` / ``support.dashboard_cost`` -- the committed Grafana dashboard, and
  what its queries cost Prometheus;
* ``support.bench`` -- one section of the benchmark page, run through ``python -m benchmarks``;
* ``support.matrix_plugin`` -- the strict xfails of old Airflow releases (``scripts/matrix``).

Nothing here fakes a metrics backend: receivers are real sockets and servers on 127.0.0.1.
"""
