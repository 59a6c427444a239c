"""A multiprocessing child (fork start method) leaves through os._exit(): its counts still arrive."""

from __future__ import annotations

import multiprocessing

import pytest

import store_metrics
from store_metrics import catalogue
from support.totals import totals
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

TAGS = {"dag_id": "d", "task_id": "t", "run_type": "manual", "operator": "Op"}
WRITE = catalogue.get("task_state_store.write")


def _child_work() -> None:
    # Runs in the forked child: count 3 writes and return; multiprocessing then calls os._exit().
    counter = store_metrics.get_emitter().counter(WRITE, TAGS)
    for _ in range(3):
        counter.add()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_multiprocessing_child_counts_arrive(udp_receiver: UdpReceiver) -> None:
    emitter = store_metrics.configure("statsd", host="127.0.0.1", port=udp_receiver.port, flush_interval=60)
    emitter.counter(WRITE, TAGS).add(5)  # the parent's, not yet flushed when it forks
    child = multiprocessing.get_context("fork").Process(target=_child_work)
    child.start()
    child.join(30)
    assert child.exitcode == 0
    key = ("airflow.task_state_store.write", tuple(TAGS.items()))
    # The child's 3 arrive when it exits, without the parent's 5 (the parent still holds them).
    wait_until(lambda: totals(udp_receiver.lines(), "influx")[key] == 3, 10)
    assert emitter.flush(5)
    wait_until(lambda: totals(udp_receiver.lines(), "influx")[key] == 8, 10)
    assert totals(udp_receiver.lines(), "influx")[key] == 8
