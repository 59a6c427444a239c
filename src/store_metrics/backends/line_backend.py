"""StatsD lines over one UDP socket: what the ``statsd`` and ``dogstatsd`` backends share.

``LineBackend`` formats every delta with ``statsd_lines`` (so the byte-exact wire
tests cover the bytes sent) and sends them through ``UdpSender``; the two backends differ
only in their ``Style``, datagram size and description.

The host is resolved and the socket connected in ``UdpSender.open`` (on the emitter's
worker thread; a host that does not resolve fails there, before anything is sent). After that,
each datagram either leaves the process or raises: the lines of a datagram whose ``send`` raised
are reported back as unsent (``PartialExport``), the others count as
sent.

A receiver that is down is only noticed by the kernel after the fact (an ICMP "port
unreachable" sets an error on the socket that the *next* send raises, once). So the datagram
that found it down is lost, as with any UDP sender. Left at that, the send after the error is
accepted by the kernel and lost again, and an outage would lose every other flush. Instead, once
a send was refused, every later send first sends an empty probe datagram and waits up to
``PROBE_WAIT`` for the refusal: while the receiver stays down nothing more is sent (all is
kept), and the first flush after it is back costs the wait once. Receivers ignore empty
datagrams (statsd_exporter, the Datadog Agent and the Collector skip empty lines).

**Pacing.** On loopback, and to a receiver whose host is busy, nothing slows a UDP sender down: a
datagram the receiver's socket has no room for is dropped by the receiver's kernel, and the sender
never hears of it (its own send buffer empties at once; waiting for it to be writable tells
nothing). One flush of 150,000 series is about 19 MB; sent in one burst, statsd_exporter lost half
of it even with a 4 MiB read buffer. So the sender paces itself: a token bucket of ``max_udp_rate``
bytes a second, which starts full with ``BURST`` bytes (a task's few lines leave at once). Each
send has a deadline (the flush's: the caller's wait, or the flush interval for the background
flush); a datagram the pace would hold past it is not sent, and what it and the rest carry is
raised as ``Deferred``, kept for the next flush, never sent twice.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import time
from collections.abc import Callable, Sequence

from ..contracts import TotalsSource
from ..deltas import Delta
from ..errors import Deferred, PartialExport
from .statsd_lines import Line, Style, delta_lines, pack_lines

#: How long a send waits for the refusal of its probe once the receiver was found down. On the
#: emitter's worker thread, never the task's; loopback refuses within microseconds, a LAN within
#: a round trip.
PROBE_WAIT = 0.05
#: Bytes a paced sender may send at once before its rate applies (the bucket's size): a task's
#: few lines leave without a wait; a flush larger than this is spread at ``max_udp_rate``.
BURST = 65_536
#: A paced sender sleeps at least this long at a time (a sleep per 512-byte datagram would cost
#: more than the send itself), and at most ``MAX_SLEEP``, to see a deadline moved sooner.
MIN_SLEEP = 0.005
MAX_SLEEP = 0.05
#: Deltas formatted and packed at a time (a datagram is not filled across two chunks).
CHUNK = 1_000


def _never() -> float:
    return float("inf")


class UdpSender:
    """A connected UDP socket to ``host:port`` that packs lines into ``max_datagram``-byte payloads."""

    def __init__(self, host: str, port: int, max_datagram: int, end: bytes = b"", rate: int = 0) -> None:
        self.host = host
        self.port = port
        self.max_datagram = max_datagram
        self.end = end
        #: Bytes per second at most (0: unpaced); the bucket holds ``BURST`` bytes.
        self.rate = rate
        self._tokens = float(BURST)
        self._stamp = time.monotonic()
        self._sock: socket.socket | None = None
        #: The last send was refused (ECONNREFUSED): the receiver was down then.
        self.refused = False

    @property
    def target(self) -> str:
        return f"udp://{self.host}:{self.port}"

    def open(self) -> None:
        """Resolve the host and connect a socket to it (may block on DNS; may raise)."""
        family, kind, proto, _, address = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_DGRAM)[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            raise
        self._sock = sock

    def send(self, lines: Sequence[Line], deadline: Callable[[], float] = _never) -> None:
        """Send every line at the pace allowed, until ``deadline()`` at the latest.

        Raises ``PartialExport`` with what the failed datagrams carried, or (nothing failed)
        ``Deferred`` with what the pace held back past the deadline.
        """
        sock = self._sock
        if sock is None:
            raise RuntimeError(f"the socket to {self.target} is not open")
        datagrams = pack_lines(lines, self.max_datagram, self.end)
        if self.refused:
            still_down = self._probe(sock)
            if still_down:
                raise PartialExport([d for datagram in datagrams for d in datagram.carries], still_down)
        unsent: list[Delta] = []
        problem = ""
        for index, datagram in enumerate(datagrams):
            if not self._room_for(len(datagram.payload), deadline):
                held = [d for later in datagrams[index:] for d in later.carries]
                if problem:
                    raise PartialExport(unsent + held, f"{self.target}: {problem}")
                raise Deferred(
                    held,
                    f"{self.target}: {len(datagrams) - index} of {len(datagrams)} datagrams held back "
                    f"by the pace of {self.rate} bytes/s at the flush's deadline",
                )
            try:
                sock.send(datagram.payload)
            except OSError as exc:
                unsent.extend(datagram.carries)
                problem = problem or f"{type(exc).__name__}: {exc}"
                if exc.errno == errno.ECONNREFUSED:
                    self.refused = True
        if unsent:
            raise PartialExport(unsent, f"{self.target}: {problem}")

    def _room_for(self, size: int, deadline: Callable[[], float]) -> bool:
        """Take ``size`` bytes from the bucket, sleeping until it holds them; False (nothing
        taken) if that would be past ``deadline()``."""
        if not self.rate:
            return True
        # A datagram larger than the bucket waits for a full bucket, not for ever.
        size = min(size, BURST)
        while True:
            now = time.monotonic()
            self._tokens = min(float(BURST), self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            short = size - self._tokens
            if short <= 0:
                self._tokens -= size
                return True
            due = deadline()
            if now + short / self.rate > due:
                return False
            time.sleep(min(max(short / self.rate, MIN_SLEEP), MAX_SLEEP, due - now))

    def _probe(self, sock: socket.socket) -> str:
        """Whether the receiver is still down: the refusal of an empty datagram, or "" if none came."""
        try:
            sock.send(b"")
            poller = select.poll()
            poller.register(sock, select.POLLERR)
            if poller.poll(PROBE_WAIT * 1000):
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)  # reading it clears it
                if code:
                    return f"{self.target}: {errno.errorcode.get(code, str(code))}: {os.strerror(code)}"
        except OSError as exc:
            return f"{self.target}: {type(exc).__name__}: {exc}"
        self.refused = False
        return ""

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def after_fork_in_child(self) -> None:
        # The parent's socket is the parent's: the child connects its own on open().
        self._sock = None


class LineBackend:
    """A push backend that sends each delta as StatsD lines of one style over one socket."""

    pull = False
    opens_without_io = False
    live_histograms = False
    sends_nowhere = False

    def __init__(self, name: str, style: Style, udp: UdpSender, prefix: str) -> None:
        self.name = name
        self.style = style
        self.prefix = prefix
        self._udp = udp
        self._deadline: Callable[[], float] = _never

    @property
    def host(self) -> str:
        return self._udp.host

    @property
    def port(self) -> int:
        return self._udp.port

    def describe(self) -> str:
        return f"{self.name} {self._udp.target} prefix={self.prefix!r}"

    def open(self, source: TotalsSource) -> None:
        self._udp.open()

    def pace_until(self, deadline: Callable[[], float]) -> None:
        """The deadline of the next ``export`` (``Paced``)."""
        self._deadline = deadline

    def export(self, deltas: Sequence[Delta]) -> None:
        """Send the deltas' lines at the pace allowed; what is held back at the deadline is
        raised as ``Deferred``.

        Formatted and sent ``CHUNK`` deltas at a time, the deadline looked at before each
        chunk: formatting 150,000 lines takes seconds on a busy host, longer than a task's wait.
        """
        deadline, self._deadline = self._deadline, _never
        for start in range(0, len(deltas), CHUNK):
            if start and time.monotonic() >= deadline():
                raise Deferred(
                    list(deltas[start:]),
                    f"{self._udp.target}: the flush's deadline came after {start} of {len(deltas)} series",
                )
            chunk = deltas[start : start + CHUNK]
            rest = list(deltas[start + CHUNK :])
            try:
                self._udp.send(
                    [line for d in chunk for line in delta_lines(d, self.prefix, self.style)], deadline
                )
            except PartialExport as partial:
                if not rest:
                    raise
                raise type(partial)(partial.unsent + rest, partial.reason) from partial
            except Exception as exc:
                if not start:
                    raise  # nothing sent: the emitter keeps every delta
                raise PartialExport(list(deltas[start:]), f"{type(exc).__name__}: {exc}") from exc

    def force_flush(self, timeout: float) -> None:
        return None  # every export is sent before it returns

    def close(self, timeout: float) -> None:
        self._udp.close()

    def after_fork_in_child(self) -> None:
        self._udp.after_fork_in_child()
