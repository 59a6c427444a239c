"""fork(): the child neither re-sends the parent's pending counts nor loses its own.

Airflow's LocalExecutor forks task processes, and a task may fork too. The parent counts 5 and
does not flush, forks; the child counts 3 and flushes (or closes); then the parent flushes. A
real receiver must see 5 from the parent and 3 from the child: 8 in all, never 13.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import store_metrics
from store_metrics.emitter import AggregatingEmitter
from support.lines import parse_dogstatsd, parse_influx
from support.stores import DictStore
from support.tags import TAGS
from testbed.otlp import OtlpReceiver
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def fork_and_wait(child: Callable[[], bool]) -> int:
    """Run ``child`` in a forked process; return its exit code (0 when it returned True)."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 3
        try:
            code = 0 if child() else 1
        finally:
            os._exit(code)
    status: list[int] = []

    def reaped() -> bool:
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            status.append(code)
        return bool(done)

    try:
        wait_until(reaped, timeout=30)
    except AssertionError:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status[0])


def count_writes(store: Any, n: int) -> None:
    for i in range(n):
        store.set("k", i)


@pytest.mark.parametrize("backend", ["statsd", "dogstatsd"])
@pytest.mark.parametrize("child_ends_with", ["flush", "close"])
def test_parent_five_child_three(udp_receiver: UdpReceiver, backend: str, child_ends_with: str) -> None:
    emitter = store_metrics.configure(backend, host="127.0.0.1", port=udp_receiver.port, flush_interval=60)
    store = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    count_writes(store, 5)  # pending, not flushed

    def child() -> bool:
        count_writes(store, 3)
        return emitter.flush(5.0) if child_ends_with == "flush" else emitter.close(5.0)

    assert fork_and_wait(child) == 0
    parse = parse_influx if backend == "statsd" else parse_dogstatsd
    (child_line,) = udp_receiver.wait_for_lines(1)
    assert parse(child_line) == ("airflow.task_state_store.write", TAGS, 3)

    assert emitter.flush(5.0)
    lines = udp_receiver.wait_for_lines(2)
    assert [parse(line)[2] for line in lines] == [3, 5]
    assert sum(parse(line)[2] for line in lines) == 8
    # The parent's own totals were never touched by the child.
    assert emitter.snapshot() == {("task_state_store.write", tuple(TAGS.items())): 5}


# Forks right after configure, while the worker is most likely still opening the backend (its
# first DNS lookup imports the idna codec): the fork must not leave the child unable to open it.
_FORK_AND_EXIT = textwrap.dedent(
    """
    import os, sys
    import store_metrics
    from store_metrics import catalogue
    emitter = store_metrics.configure("statsd", host="127.0.0.1", port=int(sys.argv[1]),
                                      flush_interval=60, exit_timeout=2.0)
    write = emitter.counter(catalogue.get("task_state_store.write"), {"dag_id": "d"})
    write.add(5)
    pid = os.fork()
    if pid == 0:
        write.add(3)
        sys.exit(0)  # a normal exit: the exit flush sends the child's 3
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))  # the parent's exit flush sends its 5
    """
)


def test_both_processes_flush_at_a_normal_exit(udp_receiver: UdpReceiver) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FORK_AND_EXIT, str(udp_receiver.port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = udp_receiver.wait_for_lines(2)
    assert lines == [
        "airflow.task_state_store.write,dag_id=d:3|c",
        "airflow.task_state_store.write,dag_id=d:5|c",
    ]


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", receiver.endpoint)
    yield receiver
    assert store_metrics.shutdown(10.0)
    receiver.close()


def test_otel_child_reports_under_its_own_instance_id(otlp: OtlpReceiver) -> None:
    emitter: AggregatingEmitter = store_metrics.configure("otel", flush_interval=60)
    store = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    count_writes(store, 5)
    assert emitter.flush(10.0)  # the parent's provider exists and has exported once
    parent_id = otlp.points()[0].resource["service.instance.id"]
    count_writes(store, 4)  # pending in the parent at fork time

    def child() -> bool:
        count_writes(store, 3)
        return emitter.flush(10.0)

    assert fork_and_wait(child) == 0
    assert emitter.flush(10.0)
    writes = [
        (p.resource["service.instance.id"], p.value)
        for p in otlp.points()
        if p.name == "airflow.task_state_store.write" and p.value
    ]
    child_ids = {i for i, _ in writes} - {parent_id}
    assert len(child_ids) == 1
    (child_id,) = child_ids
    assert sorted(writes) == sorted([(parent_id, 5), (child_id, 3), (parent_id, 4)])


# A parent that serves a Prometheus endpoint forks a child. The child that counts nothing must
# not start a worker, reopen the backend or try to bind the parent's port (an ERROR in its log);
# one that looks up a series but counts nothing may start its worker, and still opens nothing.
_FORK_COUNTING_NOTHING = textwrap.dedent(
    """
    import logging, os, sys, threading
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    import store_metrics
    from store_metrics import catalogue
    port, mode = int(sys.argv[1]), sys.argv[2]
    emitter = store_metrics.configure("otel", exporter="prometheus", prometheus_host="127.0.0.1",
                                      prometheus_port=port, flush_interval=0.05)
    write = emitter.counter(catalogue.get("task_state_store.write"), {"dag_id": "d"})
    write.add(5)
    pid = os.fork()
    if pid == 0:
        if mode == "looks-up":
            emitter.counter(catalogue.get("task_state_store.delete"), {"dag_id": "d"})
        ok = emitter.flush(1.0)
        workers = [t.name for t in threading.enumerate() if t.name == "store-metrics-emitter"]
        print(f"child flush={ok} workers={len(workers)} opened={emitter._delivery.opened}", flush=True)
        sys.exit(0)  # the exit flush runs here too
    _, status = os.waitpid(pid, 0)
    print("parent", emitter.snapshot(), flush=True)
    sys.exit(os.waitstatus_to_exitcode(status))
    """
)


@pytest.mark.parametrize(("mode", "workers"), [("counts-nothing", 0), ("looks-up", 1)])
def test_a_child_that_counts_nothing_opens_nothing(mode: str, workers: int) -> None:
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-c", _FORK_COUNTING_NOTHING, str(port), mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"child flush=True workers={workers} opened=False" in done.stdout
    assert "parent {('task_state_store.write', (('dag_id', 'd'),)): 5}" in done.stdout
    assert "ERROR" not in done.stderr and "could not" not in done.stderr, done.stderr
