"""What the tests deploy into Airflow, by purpose: DAG files, plugins and modules.

Every DAG file lives in one home, the test bed's ``testbed/dags/`` (``testbed.airflow.DAGS``; the
scenario DAGs there the benchmarks run too):

* ``executors`` -- the Celery and process-per-task DAGs (``support.cluster``);
* ``watchers`` -- the asset watchers' DAG (the triggerer's tests);
* ``ui`` -- the UI deployment's DAGs (``support.ui``);
* ``retries`` -- the retried tasks' DAG (``support.retries``);
* ``faults`` -- the task fault tests' DAGs (``tests/airflow/test_task_faults.py``);
* ``inventory`` -- the inventory's two DAGs (``support.inventory_world``).

The rest is the tests' own (``tests/deploy/``):

* ``plugins/server``, ``plugins/triggerer`` -- plugins a test copies into a plugins folder;
* ``modules`` -- modules a component imports by name (a trigger class, an auth manager): on its
  ``PYTHONPATH``.
"""

from __future__ import annotations

from testbed.airflow import DAGS
from testbed.repository import TESTS

EXECUTOR_DAGS = DAGS / "executors"
WATCHER_DAGS = DAGS / "watchers"
UI_DAGS = DAGS / "ui"
RETRY_DAGS = DAGS / "retries"
DEPLOY = TESTS / "deploy"
SERVER_PLUGINS = DEPLOY / "plugins" / "server"
TRIGGERER_PLUGINS = DEPLOY / "plugins" / "triggerer"
MODULES = DEPLOY / "modules"
