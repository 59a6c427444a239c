"""A large StatsD flush is paced, and what the pace holds back at the flush's deadline is kept.

Per StatsD backend, over a real UDP socket to a real receiver on 127.0.0.1. A UDP sender is told
nothing when the receiver's socket overflows, so the backends pace themselves (``max_udp_rate``
bytes a second after a first 64 KiB): a flush never runs past the wait of the caller who asked for
it, and what its pace did not let out by then goes in a later flush, once. The rate here is 2,000
bytes a second, so that the pace lets out at most the first 64 KiB and 2,000 bytes for each second
waited, whatever the machine's load, and a flush of ``TASKS`` series would take over a minute.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import store_metrics
from store_metrics import catalogue
from store_metrics.backends import line_backend as udp_module
from store_metrics.emitter import AggregatingEmitter
from support.lines import parse_dogstatsd, parse_influx
from testbed.udp import MARKER_PREFIX, UdpReceiver

WRITE = catalogue.get("task_state_store.write")
BACKENDS = ["statsd", "dogstatsd"]
Parse = Callable[[str], tuple[str, dict[str, str], int]]
PARSE: dict[str, Parse] = {"statsd": parse_influx, "dogstatsd": parse_dogstatsd}
#: Enough series for about three times the 64 KiB the pace lets out at once.
TASKS = 2_000
#: Bytes a second: a 512-byte datagram past the first 64 KiB waits a quarter of a second.
RATE = 2_000


def configure(backend: str, receiver: UdpReceiver, rate: int) -> AggregatingEmitter:
    """``backend`` to ``receiver``, pacing at ``rate`` bytes/s, flushed when a test asks."""
    return store_metrics.configure(
        backend, host="127.0.0.1", port=receiver.port, flush_interval=60.0, max_udp_rate=rate
    )


def count_per_task(emitter: AggregatingEmitter) -> dict[str, int]:
    """Task i writes i % 7 + 1 times; the expected total per task_id."""
    expected = {}
    for i in range(TASKS):
        task_id = f"a_task_with_a_long_enough_name_{i:05d}"
        emitter.counter(WRITE, {"dag_id": "a_large_deployment", "task_id": task_id}).add(i % 7 + 1)
        expected[task_id] = i % 7 + 1
    return expected


def received(receiver: UdpReceiver, parse: Parse) -> tuple[Tally[str], int]:
    """Total per task_id over every line received (a line sent twice counts twice), and the lines."""
    totals: Tally[str] = Tally()
    lines = [line for line in receiver.lines_before_marker() if not line.startswith(MARKER_PREFIX)]
    for line in lines:
        _, tags, value = parse(line)
        totals[tags["task_id"]] += value
    return totals, len(lines)


def sender(emitter: AggregatingEmitter) -> Any:
    return emitter.backend._udp  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_flush_past_its_deadline_sends_what_the_pace_allows_and_keeps_the_rest(
    udp_receiver: UdpReceiver, backend: str
) -> None:
    emitter = configure(backend, udp_receiver, rate=RATE)
    expected = count_per_task(emitter)

    # The task's flush: its wait bounds the paced send; the rest is not sent, and says so.
    assert emitter.flush(1.0) is False
    assert not emitter._worker.slow  # the push ended within the caller's wait (it was not abandoned)
    first, _ = received(udp_receiver, PARSE[backend])
    first_bytes = sum(len(d) for d in udp_receiver.datagrams if not d.startswith(MARKER_PREFIX.encode()))
    # The first 64 KiB, and at most the pace of the one second waited.
    assert udp_module.BURST - 1432 < first_bytes <= udp_module.BURST + RATE * 1.0
    assert len(first) < len(expected)

    # The next flush, unpaced: what was held back goes, and only that.
    udp_receiver.clear()
    sender(emitter).rate = 0
    assert emitter.flush(5.0)
    second, _ = received(udp_receiver, PARSE[backend])
    assert not set(first) & set(second)  # no series sent twice
    assert first + second == Tally(expected)  # every count exactly once


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_caller_that_waits_cuts_a_background_flush_short_and_loses_nothing(
    udp_receiver: UdpReceiver, backend: str
) -> None:
    emitter = configure(backend, udp_receiver, rate=RATE)
    expected = count_per_task(emitter)
    # A flush nobody waits for: paced up to the next background flush, a minute away.
    assert emitter.flush(0.0) is False
    # A task ends meanwhile and waits up to a second: the push under way ends within that.
    assert emitter.flush(1.0) is False
    assert not emitter._worker.slow

    sender(emitter).rate = 0
    assert emitter.flush(5.0)
    totals, lines = received(udp_receiver, PARSE[backend])
    assert totals == Tally(expected)
    assert lines == len(expected)  # each series in exactly one line


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_flush_within_the_burst_is_not_held(udp_receiver: UdpReceiver, backend: str) -> None:
    # A task's few lines leave at once, however slow the pace, and the flush reports them sent.
    emitter = configure(backend, udp_receiver, rate=RATE)
    emitter.counter(WRITE, {"dag_id": "d", "task_id": "t"}).add(3)
    assert emitter.flush(5.0)
    totals, _ = received(udp_receiver, PARSE[backend])
    assert totals == Tally({"t": 3})


def test_the_default_pace_is_the_option_tables() -> None:
    from store_metrics.config.options import default

    emitter = store_metrics.configure("statsd", host="127.0.0.1", port=9)
    assert sender(emitter).rate == default("max_udp_rate") == 4 * 1024 * 1024


@pytest.fixture(autouse=True)
def _no_leftover() -> Iterator[None]:
    yield
    store_metrics.shutdown(1.0)
