"""The aggregating emitter: counting in memory, one line per series per flush, exact totals.

Every count here goes through the real statsd backend to a real socket (the ``udp_receiver``
fixture) or stays in the emitter (``none`` backend); no backend is faked. One test wraps the real
backend's ``export`` to hold it on an Event (the worker stays busy for as long as the test says)
and then calls the real ``export``, which sends to the socket.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

import store_metrics
from store_metrics import catalogue, logs
from store_metrics.contracts import NullEmitter
from store_metrics.emitter import OVERFLOW_TAG_VALUE, AggregatingEmitter
from support.lines import parse_influx
from support.stores import DictStore
from support.tags import TAGS, WIRE_TAGS
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

WRITE = catalogue.get("task_state_store.write")
READ_FOUND = catalogue.get("task_state_store.read_found")


def statsd(receiver: UdpReceiver, **options: Any) -> AggregatingEmitter:
    options.setdefault("flush_interval", 60.0)  # no timed flush unless a test asks for one
    return store_metrics.configure("statsd", host="127.0.0.1", port=receiver.port, **options)


def marker(emitter: AggregatingEmitter, receiver: UdpReceiver) -> str:
    """Send a line nothing else sends and wait for it: every earlier datagram has arrived by then."""
    emitter.counter(catalogue.get("asset_state_store.clear"), {"dag_id": "marker"}).add(1)
    assert emitter.flush(5.0)
    line = "airflow.asset_state_store.clear,dag_id=marker:1|c"
    wait_until(lambda: line in receiver.lines())
    return line


def test_three_calls_make_one_line_with_value_three(udp_receiver: UdpReceiver) -> None:
    emitter = statsd(udp_receiver)
    store = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    for i in range(3):
        store.set("k", i)
    assert emitter.flush(5.0)
    assert udp_receiver.wait_for_lines(1) == [f"airflow.task_state_store.write,{WIRE_TAGS}:3|c"]


def test_each_flush_sends_only_what_was_counted_since_the_last(udp_receiver: UdpReceiver) -> None:
    emitter = statsd(udp_receiver)
    store = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    store.set("k", 1)
    store.set("k", 2)
    assert emitter.flush(5.0)
    udp_receiver.wait_for_lines(1)
    assert emitter.flush(5.0)  # nothing new: nothing sent
    store.set("k", 3)
    assert store.get("k") == 3
    assert emitter.flush(5.0)
    end = marker(emitter, udp_receiver)
    assert list(udp_receiver.lines()[: udp_receiver.lines().index(end)]) in (
        [
            f"airflow.task_state_store.write,{WIRE_TAGS}:2|c",
            f"airflow.task_state_store.write,{WIRE_TAGS}:1|c",
            f"airflow.task_state_store.read_found,{WIRE_TAGS}:1|c",
        ],
        [
            f"airflow.task_state_store.write,{WIRE_TAGS}:2|c",
            f"airflow.task_state_store.read_found,{WIRE_TAGS}:1|c",
            f"airflow.task_state_store.write,{WIRE_TAGS}:1|c",
        ],
    )
    # The cumulative totals stay in the emitter.
    assert emitter.snapshot()[("task_state_store.write", tuple(TAGS.items()))] == 3


def test_one_line_per_series(udp_receiver: UdpReceiver) -> None:
    emitter = statsd(udp_receiver)
    first = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    second = store_metrics.instrument_task_store(DictStore(), emitter, {**TAGS, "task_id": "u"})
    for _ in range(4):
        first.set("k", 1)
        second.get("k")
    second.set("k", 1)
    assert emitter.flush(5.0)
    lines = udp_receiver.wait_for_lines(3)
    assert sorted(lines) == [
        f"airflow.task_state_store.read_absent,{WIRE_TAGS.replace('task_id=t', 'task_id=u')}:4|c",
        f"airflow.task_state_store.write,{WIRE_TAGS}:4|c",
        f"airflow.task_state_store.write,{WIRE_TAGS.replace('task_id=t', 'task_id=u')}:1|c",
    ]


def test_eight_threads_times_fifty_thousand_calls_are_counted_exactly(udp_receiver: UdpReceiver) -> None:
    # Flushing every 5 ms while the threads count: drains race with adds the whole time.
    emitter = statsd(udp_receiver, flush_interval=0.005)
    store = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        for i in range(25_000):
            store.set("k", i)
            store.delete("k")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert emitter.flush(10.0)

    def received() -> dict[str, int]:
        sums: dict[str, int] = {}
        for line in udp_receiver.lines():
            name, tags, value = parse_influx(line)
            assert tags == TAGS
            sums[name] = sums.get(name, 0) + value
        return sums

    wait_until(lambda: sum(received().values()) >= 400_000)
    assert received() == {
        "airflow.task_state_store.write": 200_000,
        "airflow.task_state_store.delete": 200_000,
    }
    assert len(udp_receiver.lines()) > 2  # the counts really went out over many flushes
    assert emitter.snapshot() == {
        ("task_state_store.write", tuple(TAGS.items())): 200_000,
        ("task_state_store.delete", tuple(TAGS.items())): 200_000,
    }


def test_counts_go_out_on_the_interval_without_an_explicit_flush(udp_receiver: UdpReceiver) -> None:
    emitter = statsd(udp_receiver, flush_interval=0.05)
    emitter.counter(WRITE, TAGS).add(2)
    assert udp_receiver.wait_for_lines(1) == [f"airflow.task_state_store.write,{WIRE_TAGS}:2|c"]


def test_counts_go_out_at_process_exit(udp_receiver: UdpReceiver) -> None:
    script = textwrap.dedent(
        f"""
        import store_metrics
        from store_metrics import catalogue
        emitter = store_metrics.configure("statsd", host="127.0.0.1", port={udp_receiver.port},
                                          flush_interval=60, exit_timeout=2.0)
        emitter.counter(catalogue.get("task_state_store.write"), {{"dag_id": "exit"}}).add(4)
        # no flush: the exit hook sends it
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert udp_receiver.wait_for_lines(1) == ["airflow.task_state_store.write,dag_id=exit:4|c"]


def test_configuring_again_flushes_and_closes_the_previous_emitter(udp_receiver: UdpReceiver) -> None:
    first = statsd(udp_receiver)
    first.counter(WRITE, TAGS).add(2)
    second = statsd(udp_receiver)
    assert store_metrics.get_emitter() is second
    assert udp_receiver.wait_for_lines(1) == [f"airflow.task_state_store.write,{WIRE_TAGS}:2|c"]
    assert first.flush(0.5) is False  # closed
    first.counter(WRITE, TAGS).add(1)  # a stale wrapper still costs nothing and raises nothing


def test_the_worker_thread_exists_only_while_configured(udp_receiver: UdpReceiver) -> None:
    assert isinstance(store_metrics.get_emitter(), NullEmitter)
    before = set(threading.enumerate())
    statsd(udp_receiver)
    new = set(threading.enumerate()) - before
    assert [t.name for t in new] == ["store-metrics-emitter"]
    assert store_metrics.shutdown(2.0)
    (worker,) = new
    wait_until(lambda: not worker.is_alive(), timeout=5)
    assert isinstance(store_metrics.get_emitter(), NullEmitter)


EVIL = "x%0Aairflow.evil%3A1%7Cc"  # "x\nairflow.evil:1|c" by the tag value rule


def test_none_backend_keeps_counts_and_sends_nothing(udp_receiver: UdpReceiver) -> None:
    emitter = store_metrics.configure("none")
    emitter.counter(WRITE, TAGS).add(3)
    emitter.counter(READ_FOUND, {**TAGS, "dag_id": "x\nairflow.evil:1|c"}).add(1)
    assert emitter.flush(5.0)
    assert emitter.snapshot() == {
        ("task_state_store.write", tuple(TAGS.items())): 3,
        ("task_state_store.read_found", (("dag_id", EVIL), *tuple(TAGS.items())[1:])): 1,
    }
    assert emitter.totals(WRITE) == [(tuple(TAGS.items()), 3)]


def test_too_many_tag_sets_are_counted_under_overflow_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logs.forget()
    emitter = store_metrics.configure("none", max_series=2)
    caplog.set_level(logging.WARNING, logger="store_metrics")
    for dag in ("a", "b", "c", "d", "e"):
        emitter.counter(WRITE, {"dag_id": dag}).add(1)
    assert emitter.snapshot() == {
        ("task_state_store.write", (("dag_id", "a"),)): 1,
        ("task_state_store.write", (("dag_id", "b"),)): 1,
        ("task_state_store.write", (("dag_id", OVERFLOW_TAG_VALUE),)): 3,
    }
    warnings = [r for r in caplog.records if r.name == "store_metrics"]
    assert len(warnings) == 1
    assert "holds 2 series, its limit" in warnings[0].getMessage()


def test_by_default_an_api_server_worker_names_every_task_of_5000_dags(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """5,000 DAGs x 10 tasks, each task's write, read and delete counted where the calls arrive, beside
    the API server's own series: with the default series cap every one keeps its own tags."""
    logs.forget()
    emitter = store_metrics.configure("none")
    caplog.set_level(logging.WARNING, logger="store_metrics")
    operations = [catalogue.get(f"task_state_store.{o}") for o in ("write", "read_found", "delete")]
    for i in range(5_000 * 10):
        tags = catalogue.task_tags(
            dag_id=f"dag_{i // 10}", task_id=f"task_{i % 10}", run_type="scheduled", operator="PythonOperator"
        )
        for metric in operations:
            emitter.counter(metric, tags).add(1)
    for route in range(20):
        emitter.counter(catalogue.SERVER_REQUESTS, {"store": "task", "operation": f"op{route}"}).add(1)
    counted = emitter.snapshot()
    assert len(counted) == 150_020
    assert not [key for key in counted if OVERFLOW_TAG_VALUE in dict(key[1]).values()]
    assert not [r for r in caplog.records if "its limit" in r.getMessage()]


def test_flush_waits_at_most_its_timeout_for_a_busy_worker(udp_receiver: UdpReceiver) -> None:
    emitter = statsd(udp_receiver)
    gate = threading.Event()
    real_export = emitter.backend.export

    def slow_export(deltas: Any) -> None:
        gate.wait(30)
        real_export(deltas)

    emitter.backend.export = slow_export  # type: ignore[method-assign]
    emitter.counter(WRITE, TAGS).add(1)
    # The upper bounds are hang guards, far below the 30 s the stuck export would take and far
    # above what a loaded machine needs.
    started = time.monotonic()
    assert emitter.flush(0.2) is False
    elapsed = time.monotonic() - started
    assert 0.2 <= elapsed < 5.0
    # Later flushes in this process do not wait again while the backend is stuck...
    started = time.monotonic()
    assert emitter.flush(30.0) is False
    assert time.monotonic() - started < 5.0
    # ...and once it answers, the counts arrive and flushes wait again.
    gate.set()
    assert udp_receiver.wait_for_lines(1) == [f"airflow.task_state_store.write,{WIRE_TAGS}:1|c"]
    wait_until(lambda: emitter.flush(5.0))
