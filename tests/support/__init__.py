"""Helpers only the tests use, one job per module; each folder's ``conftest.py`` holds its fixtures.

Importable as ``support`` because ``[tool.pytest.ini_options] pythonpath`` puts ``tests/`` on
``sys.path`` (and :func:`testbed.repository.python_path` on a fresh process's). What the tests and
the benchmarks share -- Airflow homes, UDP, OTLP and HTTP receivers, throwaway databases, free ports,
bounded waits -- is the test bed's (:mod:`testbed`), not here.

* :mod:`support.airflow` -- ``airflow standalone``, and Airflow's own ``[metrics]`` StatsD;
* :mod:`support.deploy` -- where the DAGs, plugins and modules the tests deploy into Airflow are;
* :mod:`support.cluster` -- Airflow's components started one by one (executors other than Local);
* :mod:`support.celery` -- the CeleryExecutor deployment and the totals its DAG must add up to;
* :mod:`support.pod_executor` -- an executor that runs each task the KubernetesExecutor's way;
* :mod:`support.hostnames` -- hostname callables for the Celery workers;
* :mod:`support.trigger_runs` -- one trigger run through Airflow's ``TriggerRunner.run_trigger``;
* :mod:`support.inventory_world` -- the inventory tests' DAG runs, writes and expectations;
* :mod:`support.ui` / :mod:`support.browser` -- the UI's deployment, and Chromium driving it;
* :mod:`support.count_at_runs` -- the ``count_at = api_server`` deployments' runs and what they call;
* :mod:`support.e2e` / :mod:`support.feeder` -- the Prometheus end-to-end tests' model and checks,
  and their feeder process;
* :mod:`support.cli` / :mod:`support.exported` -- the ``store-metrics`` command, and its ``export``,
  in a fresh process;
* :mod:`support.helm_chart` / :mod:`support.kubernetes_checks` -- Airflow's Helm chart where a
  checkout is given; Kubernetes' schemas, the Operator's types and ``kubectl kustomize``;
* :mod:`support.fake_accessors` -- in-memory stand-ins shaped like the Task SDK's accessors;
* :mod:`support.barriers` -- one last count through the same path, proving every earlier one arrived;
* :mod:`support.stores` -- :class:`~support.stores.DictStore`, an in-memory task store accessor;
* :mod:`support.tags` -- the tag sets of the stories, and tag values that would break a line;
* :mod:`support.lines` / :mod:`support.totals` -- strict StatsD line parsers, lines summed per series;
* :mod:`support.promtool` / :mod:`support.prometheus` / :mod:`support.servers` -- promtool, and
  Prometheus and Alertmanager servers;
* :mod:`support.peer_servers` / :mod:`support.peer_topologies` -- the real peers (statsd_exporter,
  the Collector, Alertmanager; :mod:`testbed.peers` builds them) as servers, and every topology
  wired through them for ``tests/airflow/test_through_the_peers.py``;
* :mod:`support.statsd_observations` -- statsd_exporter's sampled-observation rule, the one ported
  rule, held equal to the real exporter (``tests/shipped/test_collector_inputs.py``);
* :mod:`support.watchers` -- the asset watchers' DAGs and the calls they make;
* :mod:`support.dashboard` / :mod:`support.dashboard_cost` -- the committed Grafana dashboard, and
  what its queries cost Prometheus;
* :mod:`support.bench` -- one section of the benchmark page, run through ``python -m benchmarks``;
* :mod:`support.matrix_plugin` -- the strict xfails of old Airflow releases (``scripts/matrix``).

Nothing here fakes a metrics backend: receivers are real sockets and servers on 127.0.0.1.
"""
