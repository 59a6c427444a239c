"""A backend that is down costs a task nothing but one log line.

Three real ways to be down: a UDP port nobody listens on, a host name that does not resolve
(``.invalid`` is reserved for exactly that), and an OTLP endpoint that accepts the connection and
never answers. In each, the task's state store calls return normally with the right values,
``flush(timeout)`` returns within its bound, the problem is logged once, and the process exits
promptly.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest

import store_metrics
from store_metrics import logs
from store_metrics.emitter import AggregatingEmitter
from support.stores import DictStore
from support.tags import TAGS
from testbed.endpoints import SilentTcpServer
from testbed.otlp import OtlpReceiver
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

UNRESOLVABLE = "metrics.store-metrics-test.invalid"


@pytest.fixture
def captured(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    logs.forget()
    caplog.set_level(logging.DEBUG)
    return caplog


def problems(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Every record at WARNING or above, from any logger (store-metrics' or a library's)."""
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def closed_udp_port() -> int:
    return free_port(socket.SOCK_DGRAM)


def a_task_runs(emitter: AggregatingEmitter) -> None:
    """Reads a missing key, writes it, reads it back: every call returns what it should."""
    store = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    assert store.get("job_id") is None
    assert store.set("job_id", "abc") is None
    assert store.get("job_id") == "abc"


def flush_within(emitter: AggregatingEmitter, timeout: float) -> bool:
    started = time.monotonic()
    result = emitter.flush(timeout)
    assert time.monotonic() - started < timeout + 1.0  # generous: a hang guard, not a benchmark
    return result


@pytest.mark.parametrize("backend", ["statsd", "dogstatsd"])
def test_closed_udp_port(backend: str, captured: pytest.LogCaptureFixture) -> None:
    emitter = store_metrics.configure(backend, host="127.0.0.1", port=closed_udp_port(), flush_interval=60)
    for _ in range(6):
        a_task_runs(emitter)
        flush_within(emitter, 1.0)
    assert emitter.snapshot()[("task_state_store.write", tuple(TAGS.items()))] == 6
    found = problems(captured)
    # The socket is connected: the first send finds the port closed (lost, UDP), every later one
    # gets "Connection refused" (its probe does): what did not go is kept for the next flush, and
    # store-metrics says so once, however often it happens.
    assert [(r.name, r.levelname) for r in found] == [("store_metrics", "WARNING")]
    assert "Connection refused" in found[0].getMessage()


@pytest.mark.parametrize("backend", ["statsd", "dogstatsd"])
def test_unresolvable_host(backend: str, captured: pytest.LogCaptureFixture) -> None:
    emitter = store_metrics.configure(backend, host=UNRESOLVABLE, port=8125, flush_interval=0.05)
    a_task_runs(emitter)
    # Keep flushing for a while: the emitter retries opening (every 3 intervals) all along.
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        a_task_runs(emitter)
        assert flush_within(emitter, 1.0) is False  # nothing was sent, and flush says so
    found = problems(captured)
    assert [(r.name, r.levelname) for r in found] == [("store_metrics", "ERROR")]
    assert f"could not open backend {backend} udp://{UNRESOLVABLE}:8125" in found[0].getMessage()
    # The counts are kept for when the name resolves again.
    assert emitter.snapshot()[("task_state_store.read_absent", tuple(TAGS.items()))] >= 2


@pytest.fixture
def silent_otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[SilentTcpServer]:
    server = SilentTcpServer()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", f"http://127.0.0.1:{server.port}/v1/metrics")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "1")
    yield server
    # Let our worker get out of the hung export before the next test (bounded).
    workers = [t for t in threading.enumerate() if t.name == "store-metrics-emitter"]
    store_metrics.shutdown(0.1)
    for worker in workers:
        worker.join(10)
    server.close()


def test_otlp_endpoint_that_never_answers(
    silent_otlp: SilentTcpServer, captured: pytest.LogCaptureFixture
) -> None:
    emitter = store_metrics.configure("otel", flush_interval=60)
    a_task_runs(emitter)
    started = time.monotonic()
    assert emitter.flush(0.3) is False
    # It waited its own timeout, and then gave up (a generous upper bound: a hang guard).
    assert 0.3 <= time.monotonic() - started < 5.0
    wait_until(lambda: silent_otlp.accepted)  # the exporter did connect, and got no answer
    # The next flushes do not wait again while it hangs.
    for _ in range(3):
        a_task_runs(emitter)
        started = time.monotonic()
        assert emitter.flush(0.3) is False
        assert time.monotonic() - started < 0.2
    ours = [r for r in problems(captured) if r.name == "store_metrics"]
    assert len(ours) == 1
    assert "did not take the counts within 0.30 s" in ours[0].getMessage()
    assert emitter.snapshot()[("task_state_store.write", tuple(TAGS.items()))] == 4

    # The exporter gives up (its timeout here: 1 s); that is said once, with its reason...
    def said_could_not_send() -> bool:
        return any("could not send" in r.getMessage() for r in problems(captured))

    wait_until(said_could_not_send, timeout=10)
    # ...and a later export that fails again adds nothing, from us or from the exporter.
    a_task_runs(emitter)
    assert flush_within(emitter, 3.0) is False
    recorder = emitter.backend.own.recorder  # type: ignore[attr-defined]
    wait_until(lambda: recorder.failures >= 2, timeout=10)
    assert len(silent_otlp.accepted) >= 2
    found = problems(captured)
    assert [(r.name, r.levelname) for r in found] == [
        ("store_metrics", "WARNING"),
        ("store_metrics", "ERROR"),
    ]
    assert "Failed to export metrics batch due to timeout" in found[1].getMessage()


_EXIT_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import store_metrics
    from store_metrics import catalogue
    backend, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    emitter = store_metrics.configure(backend, host=host, port=port, flush_interval=60)
    counter = emitter.counter(catalogue.get("task_state_store.write"), {"dag_id": "d"})
    started = time.monotonic()
    for _ in range(1000):
        counter.add(1)
    flushed = emitter.flush(0.2)
    print(json.dumps({"flushed": flushed, "seconds": time.monotonic() - started}), flush=True)
    """
)


@pytest.mark.parametrize(
    ("backend", "where"),
    [("statsd", "unresolvable"), ("dogstatsd", "closed port"), ("otel", "silent otlp")],
)
def test_process_exit_is_bounded(backend: str, where: str) -> None:
    env = dict(os.environ)
    server = None
    host, port = "127.0.0.1", closed_udp_port()
    if where == "unresolvable":
        host = UNRESOLVABLE
    if where == "silent otlp":
        server = SilentTcpServer()
        env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = f"http://127.0.0.1:{server.port}/v1/metrics"
        env.pop("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", None)  # the SDK default: 10 s per export
    proc = subprocess.Popen(
        [sys.executable, "-c", _EXIT_SCRIPT, backend, host, str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        # The script's last line is printed just before it returns: from then on the process only
        # exits (the emitter's exit flush). Timed from that line, not from start (imports).
        line = proc.stdout.readline()
        exiting = time.monotonic()
        proc.wait(60)
        exit_seconds = time.monotonic() - exiting
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        if server is not None:
            server.close()
    assert proc.returncode == 0, stderr
    result = json.loads(line)
    # Lower bound of a hang: without the bounded flush and exit flush, the exporter's own 10 s
    # timeout (or forever). The bounds are far from that and far above what they take when idle
    # (< 0.3 s), so that a loaded machine does not fail them.
    assert result["seconds"] < 5.0  # 1000 counts and a 0.2 s flush
    assert exit_seconds < 5.0, (exit_seconds, stderr)


@pytest.mark.parametrize("where", ["closed port", "unresolvable host"])
def test_otlp_endpoint_that_is_down_is_said_at_once(
    where: str, monkeypatch: pytest.MonkeyPatch, captured: pytest.LogCaptureFixture
) -> None:
    """A refused or unresolvable OTLP endpoint is not waited for: the task-end flush gives up at once.

    (A collector that accepts and never answers is a slow one: it gets flush_timeout, above.)
    """
    endpoint = (
        f"http://127.0.0.1:{free_port()}/v1/metrics"
        if where == "closed port"
        else "http://collector.store-metrics.invalid:4318/v1/metrics"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", endpoint)
    emitter = store_metrics.configure("otel", flush_interval=60, flush_timeout=30)
    a_task_runs(emitter)
    # The long flush_timeout would be used up if the exporter's retries were waited for; the
    # probe answers instead, and the message names the endpoint and the reason.
    assert emitter.flush() is False
    ours = [r.getMessage() for r in problems(captured) if r.name == "store_metrics"]
    assert len(ours) == 1
    assert f"the OTLP endpoint {endpoint} is unreachable" in ours[0]
    assert emitter.snapshot()[("task_state_store.write", tuple(TAGS.items()))] == 1


def said(caplog: pytest.LogCaptureFixture, level: int, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "store_metrics" and r.levelno == level and text in r.getMessage()
    ]


@pytest.mark.parametrize("backend", ["statsd", "dogstatsd"])
def test_each_outage_of_a_long_lived_process_is_said_and_so_is_its_end(
    backend: str, captured: pytest.LogCaptureFixture
) -> None:
    """An API server runs for weeks: the second time the receiver goes away is logged too."""
    receiver = UdpReceiver()
    port = receiver.port
    emitter = store_metrics.configure(backend, host="127.0.0.1", port=port, flush_interval=60)
    a_task_runs(emitter)
    assert emitter.flush(2.0)
    for outage in (1, 2):
        receiver.close()

        def refused() -> bool:
            a_task_runs(emitter)
            return not emitter.flush(2.0)

        wait_until(refused, timeout=5)  # the first send is lost, the next is refused
        assert len(said(captured, logging.WARNING, "could not send")) == outage
        receiver = UdpReceiver(port)
        a_task_runs(emitter)
        assert emitter.flush(2.0)
        assert len(said(captured, logging.INFO, "works again")) == outage
    receiver.close()


def test_otlp_periodic_exports_say_each_outage_without_a_flush(
    monkeypatch: pytest.MonkeyPatch, captured: pytest.LogCaptureFixture
) -> None:
    """The SDK's own periodic exports (no task end, no explicit flush) report an outage and its end."""
    port = free_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", f"http://127.0.0.1:{port}/v1/metrics")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "1")  # each failed export gives up in 1 s
    emitter = store_metrics.configure("otel", flush_interval=0.3, temporality="cumulative")
    a_task_runs(emitter)
    down = "could not export to the OTLP endpoint"
    wait_until(lambda: said(captured, logging.WARNING, down), timeout=20)
    receiver = OtlpReceiver(port)
    try:
        wait_until(lambda: said(captured, logging.INFO, "work again"), timeout=20)
        # Cumulative: the first export that gets through carries what the failed ones did not.
        wait_until(
            lambda: any(
                p.name == "airflow.task_state_store.write" and p.value == 1 for p in receiver.points()
            ),
            timeout=10,
        )
    finally:
        receiver.close()
    wait_until(lambda: len(said(captured, logging.WARNING, down)) == 2, timeout=20)
    assert len(said(captured, logging.INFO, "work again")) == 1
    # Nothing else said it: not the SDK's exporter on every export, not the emitter.
    others = [r for r in problems(captured) if down not in r.getMessage()]
    assert others == []
