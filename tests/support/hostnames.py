"""``[core] hostname_callable`` for tests that run several workers on one machine.

``AIRFLOW__CORE__HOSTNAME_CALLABLE=support.hostnames.from_env`` plus
``STORE_METRICS_TEST_HOSTNAME=<name>`` in a worker's environment gives that worker (and every
task it runs, which records it as the task instance's ``hostname``) its own host name.
"""

from __future__ import annotations

import os


def from_env() -> str:
    return os.environ["STORE_METRICS_TEST_HOSTNAME"]
