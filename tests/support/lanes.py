"""Two lanes for ``pytest -n 2 -p support.lanes`` (what ``scripts/matrix`` runs on CI).

The suite's wall time is mostly waiting: on Airflow components starting, on a scheduler loop, on
Prometheus' next evaluation. Two pytest-xdist workers fill that waiting with other work, but two
whole Airflow deployments at once on a 2-core machine starve each other's API servers (a task's
Execution API request timing out is a failed task, not a slow test). So the modules that start a
multi-process Airflow deployment (API server, scheduler, Celery workers, a triggerer, a process per
task) form one unit of work, run one after another on one worker, first (the longest lane); every
other module is a unit of its own, so module-scoped servers start once, on whichever worker is free.

The lanes are xdist's ``loadscope`` scheduling with our own scope (``pytest_xdist_make_scheduler``):
``--dist loadgroup``'s marks do not reach the scheduler under pytest 9 (xdist 3.8 renames the test
through ``item._nodeid``, which pytest 9 no longer reads). Without ``-n`` this plugin changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

#: Test files (or folders, ending in "/") that start a whole Airflow deployment.
DEPLOYMENTS: tuple[str, ...] = (
    "tests/airflow/count_at_standalone/",
    "tests/airflow/test_celery.py",
    "tests/airflow/test_count_at_celery.py",
    "tests/airflow/test_check_on_a_busy_host.py",
    "tests/airflow/test_exemplars.py",
    "tests/airflow/test_jaeger.py",
    "tests/airflow/test_process_per_task.py",
    "tests/airflow/test_server_airflow.py",
    "tests/airflow/test_task_faults.py",
    "tests/airflow/test_through_the_peers.py",
    "tests/airflow/test_traces_standalone.py",
    "tests/airflow/test_triggerer_standalone.py",
    "tests/airflow/test_ui_deployment.py",
    "tests/bench/test_load_bench.py",
)
DEPLOYMENT_LANE = "airflow-deployments"


def lane_of(nodeid: str) -> str:
    """The unit of work a test belongs to: the deployments' lane, or its own module."""
    path = nodeid.split("::", 1)[0]
    if any(path == d or (d.endswith("/") and path.startswith(d)) for d in DEPLOYMENTS):
        return DEPLOYMENT_LANE
    return path


def _distributed(config: pytest.Config) -> bool:
    """In an xdist worker or the controller of an ``-n`` run."""
    return hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", None))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _distributed(config):
        # The longest lane first, so the other worker takes everything else meanwhile.
        items.sort(key=lambda item: lane_of(item.nodeid) != DEPLOYMENT_LANE)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return lane_of(nodeid)

    return Lanes(config, log)
