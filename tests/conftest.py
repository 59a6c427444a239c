"""Shared test fixtures: free ports, a real UDP receiver, bounded waiting.

Nothing here fakes a backend: the UDP receiver is a real socket on 127.0.0.1 and tests read
the exact datagrams the adapters sent.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from store_metrics import runtime


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port that is free on 127.0.0.1 right now (TCP by default, UDP with SOCK_DGRAM)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.01) -> None:
    """Poll ``condition`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {condition}")
        time.sleep(interval)


class UdpReceiver:
    """A real UDP socket on 127.0.0.1 that records every datagram it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port: int = self.sock.getsockname()[1]
        self.datagrams: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.datagrams.append(data)

    def lines(self) -> list[str]:
        """Every metric line received so far (datagrams split on newlines)."""
        with self._lock:
            data = list(self.datagrams)
        return [line for d in data for line in d.decode("utf-8").split("\n") if line]

    def wait_for_lines(self, count: int, timeout: float = 10.0) -> list[str]:
        wait_until(lambda: len(self.lines()) >= count, timeout)
        return self.lines()

    def clear(self) -> None:
        with self._lock:
            self.datagrams.clear()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def udp_receiver() -> Iterator[UdpReceiver]:
    receiver = UdpReceiver()
    yield receiver
    receiver.close()


@pytest.fixture(autouse=True)
def _reset_active_emitter() -> Iterator[None]:
    """Every test starts and ends with no configured emitter."""
    runtime.shutdown(timeout=1.0)
    yield
    runtime.shutdown(timeout=1.0)
