"""The emitter's one worker thread: pushes on an interval, on request, and a last time on close.

Callers never do I/O themselves: ``FlushWorker.request`` wakes the worker and waits at
most its timeout for the push it asked for (a ticket), so a backend that is down or hangs costs
a caller a bounded wait, never an error. Once a wait runs out, later waits in the process are
skipped (``slow``) until the worker gets through a push: a dead collector must not cost every
task its full flush timeout.

A push that paces its sends (the StatsD backends) asks ``FlushWorker.deadline`` when to stop:
the next background push's time, or sooner, the wait of a caller that is waiting for it (less a
margin, so the caller hears the answer before its wait is over). What the pace holds back is kept
for the next push; a caller's wait therefore bounds the push, not only the caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: ``push(explicit, deadline)``: send what is pending, pacing no later than ``deadline()``; True
#: when it reached the backend.
Push = Callable[[bool, Callable[[], float]], bool]

#: A paced push stops this share of a waiting caller's wait (at most ``MAX_MARGIN`` s) before
#: the wait is over, so that the caller hears the answer in time: 0.2 s of a task's 2 s
#: ``flush_timeout``, 12 ms of the 0.05 s exit flush.
MARGIN = 0.25
MAX_MARGIN = 0.2


class FlushWorker:
    """A thread that calls ``push`` every ``interval`` seconds and whenever asked to."""

    def __init__(self, push: Push, on_close: Callable[[], None], interval: float) -> None:
        self._push = push
        self._on_close = on_close
        self.interval = interval
        self._cond = threading.Condition(threading.Lock())
        self._requested = 0
        self._served = 0
        self.closing = False
        self.closed = False
        #: Whether the last push reached the backend (what a served request reports).
        self.last_ok = False
        #: Set when a request ran out of time; cleared by the next push that succeeds.
        self.slow = False
        #: Held while pushing or closing: a fork() waits for it (see ``process``).
        self.io_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: (ticket, the monotonic time its caller stops waiting, less the margin), for requests
        #: not yet served that wait at all.
        self._waits: list[tuple[int, float]] = []
        #: When the push under way should be over at the latest, if nobody waits sooner.
        self._push_until = float("inf")

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self, before_first_wait: Callable[[], Any] | None = None) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(before_first_wait,), name="store-metrics-emitter", daemon=True
        )
        self._thread.start()

    def request(self, wait: float, *, close: bool = False) -> tuple[bool, bool]:
        """Ask for a push (the last one if ``close``); wait at most ``wait`` s.

        Returns (served in time, and the push reached the backend).
        """
        with self._cond:
            if self.closed or (self.closing and not close):
                return False, self.last_ok
            if self.slow:
                wait = 0.0
            if close:
                self.closing = True
            self._requested += 1
            ticket = self._requested
            if wait > 0:
                self._waits.append((ticket, time.monotonic() + wait - min(MAX_MARGIN, wait * MARGIN)))
            self._cond.notify_all()
            done = self._wait_served(ticket, wait)
            return done, done and self.last_ok

    def _wait_served(self, ticket: int, wait: float) -> bool:
        # Caller holds self._cond.
        deadline = time.monotonic() + wait
        while self._served < ticket:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._cond.wait(remaining)
        return True

    def deadline(self) -> float:
        """When the push under way must end: the next background push's time, or a waiting
        caller's (whichever is sooner; it moves sooner when a caller asks meanwhile)."""
        with self._cond:
            return min([self._push_until, *(until for _, until in self._waits)])

    def mark_slow(self) -> None:
        with self._cond:
            self.slow = True

    def _run(self, before_first_wait: Callable[[], Any] | None) -> None:
        if before_first_wait is not None:
            with self.io_lock:
                before_first_wait()
        next_due = time.monotonic() + self.interval
        while True:
            with self._cond:
                while (
                    not self.closing
                    and self._requested <= self._served
                    and (remaining := next_due - time.monotonic()) > 0
                ):
                    self._cond.wait(remaining)
                ticket = self._requested
                explicit = ticket > self._served
                closing = self.closing
                self._push_until = time.monotonic() + self.interval
            with self.io_lock:
                ok = self._push(explicit, self.deadline)
                if closing:
                    # Not under self._cond: a request arriving meanwhile still gets its answer
                    # within its own timeout.
                    self._on_close()
            next_due = time.monotonic() + self.interval
            with self._cond:
                self._served = max(self._served, ticket)
                self._waits = [(t, until) for t, until in self._waits if t > self._served]
                self.last_ok = ok
                if ok:
                    self.slow = False
                if closing:
                    self.closed = True
                self._cond.notify_all()
            if closing:
                return
