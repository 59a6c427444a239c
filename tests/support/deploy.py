"""What the tests deploy into Airflow (``tests/deploy/``): DAG files, plugins and modules, by purpose.

(The scenario DAGs, which the benchmarks run too, are the test bed's: ``testbed/dags/``.)

* ``dags/executors`` -- the Celery and process-per-task DAGs (``support.cluster``);
* ``dags/watchers`` -- the asset watchers' DAG (the triggerer's tests);
* ``dags/ui`` -- the UI deployment's DAGs (``support.ui``);
* ``plugins/server``, ``plugins/triggerer`` -- plugins a test copies into a plugins folder;
* ``modules`` -- modules a component imports by name (a trigger class, an auth manager): on its
  ``PYTHONPATH``.
"""

from __future__ import annotations

from testbed.repository import TESTS

DEPLOY = TESTS / "deploy"
EXECUTOR_DAGS = DEPLOY / "dags" / "executors"
WATCHER_DAGS = DEPLOY / "dags" / "watchers"
UI_DAGS = DEPLOY / "dags" / "ui"
SERVER_PLUGINS = DEPLOY / "plugins" / "server"
TRIGGERER_PLUGINS = DEPLOY / "plugins" / "triggerer"
MODULES = DEPLOY / "modules"
