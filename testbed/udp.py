"""A real UDP receiver on 127.0.0.1, for the StatsD and DogStatsD backends to send to."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable

from testbed.endpoints import read_until_stopped
from testbed.waiting import wait_until

#: Names of marker lines start with this; no product code sends such a name.
MARKER_PREFIX = "store_metrics_test.marker."


class UdpReceiver:
    """A real UDP socket on 127.0.0.1 (``port``, or a free one) that records every datagram it receives.

    With ``keep``, each datagram is handed to it instead (on the reader thread), for a receiver that
    tallies what arrives rather than keep it all.
    """

    def __init__(self, port: int = 0, keep: Callable[[bytes], object] | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        self.sock.bind(("127.0.0.1", port))
        self.sock.settimeout(0.05)
        self.port: int = self.sock.getsockname()[1]
        self.datagrams: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        args = (self._stop, lambda: self.sock.recv(65535), keep or self._keep)
        self._thread = threading.Thread(target=read_until_stopped, args=args, daemon=True)
        self._thread.start()

    def _keep(self, data: bytes) -> None:
        with self._lock:
            self.datagrams.append(data)

    def lines(self) -> list[str]:
        """Every metric line received so far (datagrams split on newlines)."""
        with self._lock:
            data = list(self.datagrams)
        return [line for d in data for line in d.decode("utf-8").split("\n") if line]

    def wait_for_lines(self, count: int, timeout: float = 10.0, containing: str = "") -> list[str]:
        """The lines received (only those that contain ``containing``), once there are ``count``."""

        def matching() -> list[str]:
            return [line for line in self.lines() if containing in line]

        wait_until(lambda: len(matching()) >= count, timeout)
        return matching()

    def lines_before_marker(self, timeout: float = 10.0) -> list[str]:
        """Send a marker datagram to this socket, wait for it, return every line received before it.

        The socket queues datagrams in the order they reach it, and on 127.0.0.1 a datagram
        reaches it during the sender's ``sendto``: whatever a sender sent before this call
        (a process that has exited, an emitter that has flushed) is in the list returned, so
        an empty list means nothing was sent, not that it had not arrived yet.
        """
        marker = f"{MARKER_PREFIX}{uuid.uuid4().hex}:1|c"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.sendto(marker.encode(), ("127.0.0.1", self.port))
        wait_until(lambda: marker in self.lines(), timeout)
        lines = self.lines()
        return lines[: lines.index(marker)]

    def clear(self) -> None:
        with self._lock:
            self.datagrams.clear()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()
