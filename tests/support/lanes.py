"""Two lanes for ``pytest -n 2 --dist loadgroup`` (what ``scripts/matrix`` runs on CI).

The suite's wall time is mostly waiting: on Airflow components starting, on a scheduler loop, on
Prometheus' next evaluation. Two pytest-xdist workers fill that waiting with other work, but two
whole Airflow deployments at once on a 2-core machine starve each other's API servers (a task's
Execution API request timing out is a failed task, not a slow test). So the modules that start a
multi-process Airflow deployment (API server, scheduler, Celery workers, a triggerer, a process per
task) form one group, run one after another on one worker, first (the longest lane); every other
module is a group of its own, so module-scoped servers start once, on whichever worker is free.

Without xdist (``scripts/test ARGS`` runs plain pytest) this changes nothing: the marks are inert
and the order is the collection's.
"""

from __future__ import annotations

import pytest

#: Test files (or folders, ending in "/") that start a whole Airflow deployment.
DEPLOYMENTS: tuple[str, ...] = (
    "tests/airflow/count_at_standalone/",
    "tests/airflow/test_celery.py",
    "tests/airflow/test_count_at_celery.py",
    "tests/airflow/test_check_on_a_busy_host.py",
    "tests/airflow/test_process_per_task.py",
    "tests/airflow/test_server_airflow.py",
    "tests/airflow/test_task_faults.py",
    "tests/airflow/test_through_the_peers.py",
    "tests/airflow/test_triggerer_standalone.py",
    "tests/airflow/test_ui_deployment.py",
    "tests/bench/test_load_bench.py",
)
DEPLOYMENT_LANE = "airflow-deployments"


def lane_of(nodeid: str) -> str:
    """The xdist group of a test: the deployments' lane, or its own module."""
    path = nodeid.split("::", 1)[0]
    if any(path == d or (d.endswith("/") and path.startswith(d)) for d in DEPLOYMENTS):
        return DEPLOYMENT_LANE
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist") or not getattr(config.option, "numprocesses", None):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(lane_of(item.nodeid)))
    # The longest lane first, so the other worker takes everything else meanwhile.
    items.sort(key=lambda item: lane_of(item.nodeid) != DEPLOYMENT_LANE)
