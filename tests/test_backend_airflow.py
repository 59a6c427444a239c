"""The ``airflow`` adapter: the sums go through Airflow's own ``stats`` module.

Run in a fresh process with Airflow's ``[metrics]`` pointing its StatsD client (InfluxDB tags)
at a real UDP socket: one ``stats.incr(name, count=N, tags=...)`` per series per flush.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.airflow import airflow_statsd_env
from support.lines import parse_influx
from support.udp import UdpReceiver
from support.waiting import wait_until

_TASK = textwrap.dedent(
    """
    import store_metrics
    from store_metrics import catalogue
    emitter = store_metrics.configure("airflow", flush_interval=60)
    tags = catalogue.task_tags(dag_id="x\\nairflow.evil:1|c", task_id="t", run_type="manual", operator="X")
    for _ in range(3):
        emitter.counter(catalogue.get("task_state_store.write"), tags).add(1)
    emitter.counter(catalogue.get("task_state_store.read_absent"), tags).add(1)
    assert emitter.flush(10.0)
    print(emitter.backend.describe())
    """
)


def test_sums_go_through_airflows_statsd_client(udp_receiver: UdpReceiver, tmp_path: Path) -> None:
    pytest.importorskip("airflow.sdk.observability")
    env = airflow_statsd_env(tmp_path, udp_receiver.port)
    done = subprocess.run(
        [sys.executable, "-c", _TASK], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("airflow (Airflow's [metrics] backend: statsd)")

    def ours() -> list[str]:
        # Airflow sends metrics of its own (e.g. serde timings) to the same socket.
        return [line for line in udp_receiver.lines() if "state_store" in line]

    wait_until(lambda: len(ours()) >= 2)
    tags = {"dag_id": "x_airflow.evil_1_c", "task_id": "t", "run_type": "manual", "operator": "X"}
    assert sorted(parse_influx(line) for line in ours()) == [
        ("airflow.task_state_store.read_absent", tags, 1),
        ("airflow.task_state_store.write", tags, 3),
    ]
