"""Exactly once when a send fails part-way: nothing kept is lost, nothing sent is sent twice.

Per StatsD backend, over a real UDP socket to a real receiver:

* the name stops resolving after the socket was opened (the bug this replaced: counters were
  sent, then the histogram lines' own socket failed to resolve, every delta was given back and
  the counters went out again: 60 counted, 63 received);
* the name does not resolve when the socket is opened (nothing sent, everything kept);
* the N-th datagram of a flush fails to send: the one fake here is the socket's ``send``, made
  to raise ``OSError`` on the N-th call (the kernel cannot be made to fail exactly one chosen
  datagram); the other datagrams go out on the real socket to the real receiver;
* the receiver's port is closed for real: the kernel reports the refusal on the next send, so
  the datagram that found it closed is lost (UDP) and, through a long outage, every one after it
  is kept (each flush first probes the receiver) and delivered once it is back.
"""

from __future__ import annotations

import errno
import socket
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import store_metrics
from store_metrics import catalogue
from store_metrics.emitter import AggregatingEmitter
from support.lines import parse_dogstatsd, parse_influx
from testbed.udp import MARKER_PREFIX, UdpReceiver
from testbed.waiting import wait_until

WRITE = catalogue.get("task_state_store.write")
DURATION = catalogue.SERVER_DURATION
BACKENDS = ["statsd", "dogstatsd"]
Parse = Callable[[str], tuple[str, dict[str, str], int]]
PARSE: dict[str, Parse] = {"statsd": parse_influx, "dogstatsd": parse_dogstatsd}


def configure(backend: str, receiver: UdpReceiver, host: str = "127.0.0.1") -> AggregatingEmitter:
    # A short interval lets a failed open be retried within the test (retries wait 3 intervals).
    return store_metrics.configure(backend, host=host, port=receiver.port, flush_interval=0.1)


def count_per_task(emitter: AggregatingEmitter, tasks: int) -> dict[str, int]:
    """Task i writes i + 1 times; returns the expected total per task_id."""
    expected = {}
    for i in range(tasks):
        task_id = f"task_{i:03d}"
        emitter.counter(WRITE, {"dag_id": "d", "task_id": task_id}).add(i + 1)
        expected[task_id] = i + 1
    return expected


def received(receiver: UdpReceiver, parse: Parse) -> Tally[str]:
    """Total per task_id over every counter line received (a line sent twice counts twice)."""
    totals: Tally[str] = Tally()
    for line in receiver.lines_before_marker():
        if line.startswith(MARKER_PREFIX):  # an earlier call's marker
            continue
        name, tags, value = parse(line)
        assert name == "airflow.task_state_store.write"
        totals[tags["task_id"]] += value
    return totals


class FailingSend:
    """The real socket, whose ``send`` raises on the calls (numbered from 1) ``fail`` picks."""

    def __init__(self, real: socket.socket, fail: Callable[[int], bool]) -> None:
        self.real = real
        self.fail = fail
        self.calls = 0

    def send(self, data: bytes) -> int:
        self.calls += 1
        if self.fail(self.calls):
            raise OSError(errno.ENOBUFS, "No buffer space available (injected)")
        return self.real.send(data)

    def close(self) -> None:
        self.real.close()


def udp_of(emitter: AggregatingEmitter) -> Any:
    return emitter.backend._udp  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
def test_name_resolution_failing_after_open_sends_each_count_once(
    udp_receiver: UdpReceiver, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    emitter = configure(backend, udp_receiver, host="localhost")
    expected = count_per_task(emitter, 10)  # 55 writes
    assert emitter.flush(5.0)  # opened (resolved) and sent

    def no_dns(*args: object, **kwargs: object) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known (injected)")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    more = count_per_task(emitter, 3)  # 6 more writes, and histogram lines as the API server sends
    emitter.histogram(DURATION, {"store": "task", "operation": "get", "status_class": "2xx"}).record(7.0)
    assert emitter.flush(5.0)  # nothing resolves after open: one socket, opened once
    assert emitter.flush(5.0)  # and a second flush sends nothing again
    lines = udp_receiver.lines_before_marker()
    counters = [PARSE[backend](line) for line in lines if "request.duration" not in line]
    per_task: Tally[str] = Tally()
    for _, tags, value in counters:
        per_task[tags["task_id"]] += value
    assert per_task == Tally(expected) + Tally(more)
    assert sum(per_task.values()) == 61
    assert [line for line in lines if "request.duration" in line] == [
        "airflow.api_server.state_store.request.duration,store=task,operation=get,status_class=2xx:7|h"
        if backend == "statsd"
        else "airflow.api_server.state_store.request.duration:7|d|#store:task,operation:get,status_class:2xx"
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_name_not_resolving_at_open_keeps_everything_until_it_does(
    udp_receiver: UdpReceiver, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    real = socket.getaddrinfo
    failing = {"on": True}

    def flaky_dns(*args: Any, **kwargs: Any) -> Any:
        if failing["on"]:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution (injected)")
        return real(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", flaky_dns)
    emitter = configure(backend, udp_receiver, host="localhost")
    expected = count_per_task(emitter, 10)
    assert not emitter.flush(2.0)  # could not open: nothing sent, all kept
    assert received(udp_receiver, PARSE[backend]) == Tally()
    failing["on"] = False
    wait_until(lambda: emitter.flush(2.0), timeout=10)  # the open is retried after 3 intervals
    assert received(udp_receiver, PARSE[backend]) == Tally(expected)


FAULTS: dict[str, Callable[[int], bool]] = {
    "only the 1st": lambda call: call == 1,
    "only the 2nd": lambda call: call == 2,
    "the 2nd and every later one": lambda call: call >= 2,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_send_failing_part_way_resends_only_what_did_not_go(
    udp_receiver: UdpReceiver, backend: str, fault: str
) -> None:
    emitter = configure(backend, udp_receiver)
    assert emitter.flush(5.0)  # open the socket
    expected = count_per_task(emitter, 120)  # several datagrams at 512 / 1432 bytes
    # The API server's histograms: their lines carry one bucket each, and are kept bucket by bucket.
    histogram = emitter.histogram(DURATION, {"store": "task", "operation": "set", "status_class": "2xx"})
    for value in (0.5, 3.0, 3.0, 40.0, 40.0, 40.0, 20_000.0):
        histogram.record(value)
    udp = udp_of(emitter)
    failing = FailingSend(udp._sock, FAULTS[fault])
    udp._sock = failing

    assert not emitter.flush(5.0)  # part-way: reported as not all delivered
    first_try = failing.calls
    assert first_try >= 3  # the fault hit a flush of several datagrams
    failing.fail = lambda call: False  # the network is back
    assert emitter.flush(5.0)  # what was kept goes now, and only that

    lines = udp_receiver.lines_before_marker()
    counter_lines = [line for line in lines if "request.duration" not in line]
    per_task: Tally[str] = Tally()
    for line in counter_lines:
        _, tags, value = PARSE[backend](line)
        per_task[tags["task_id"]] += value
    assert per_task == Tally(expected)  # every count exactly once
    assert len(counter_lines) == len(expected)  # each series in exactly one line
    observations = 0
    for line in lines:
        if "request.duration" in line:
            rates = [part[1:] for part in line.split("|") if part.startswith("@")]
            observations += round(1 / float(rates[0])) if rates else 1
    assert observations == 7  # every observation exactly once


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_closed_receiver_loses_one_datagram_and_keeps_the_rest(backend: str) -> None:
    receiver = UdpReceiver()
    port = receiver.port
    emitter = store_metrics.configure(backend, host="127.0.0.1", port=port, flush_interval=60)
    emitter.counter(WRITE, {"dag_id": "d", "task_id": "before"}).add(1)
    assert emitter.flush(5.0)
    assert received(receiver, PARSE[backend]) == Tally({"before": 1})
    receiver.close()  # the port is closed for real

    emitter.counter(WRITE, {"dag_id": "d", "task_id": "lost"}).add(2)
    assert emitter.flush(5.0)  # the kernel took it; the refusal comes back by ICMP
    emitter.counter(WRITE, {"dag_id": "d", "task_id": "kept"}).add(3)
    wait_until(lambda: not emitter.flush(5.0), timeout=5)  # ECONNREFUSED: kept
    # A long outage: every later flush is refused too (its probe is), none is taken by the
    # kernel and lost. Without the probe every other flush here would vanish.
    for n in range(4, 9):
        emitter.counter(WRITE, {"dag_id": "d", "task_id": "kept"}).add(n)
        assert not emitter.flush(5.0)
    assert udp_of(emitter).refused

    back = UdpReceiver(port)
    try:
        assert emitter.flush(5.0)
        # The datagram that found the port closed is gone (UDP gives no receipt); everything
        # counted after the kernel knew is delivered once, summed.
        assert received(back, PARSE[backend]) == Tally({"kept": sum(range(3, 9))})
        assert not udp_of(emitter).refused
    finally:
        back.close()


@pytest.fixture(autouse=True)
def _no_leftover() -> Iterator[None]:
    yield
    store_metrics.shutdown(1.0)
