"""Taking the counts to the backend: open it, push what is pending, keep what was not sent.

Runs on the emitter's worker thread only (and once on the configuring thread for a backend
that opens without I/O). Each push drains the pending deltas and hands them to the backend:
what the backend says it sent is gone, what it did not send goes back to its series for the
next push. So every count is delivered exactly once, whether a send fails before, during or
after the first datagram. A backend that paces its sends (``Paced``)
is given the push's deadline; what its pace held back then comes back as
``Deferred``, kept like any unsent part, and said once (it is no outage).

Problems are logged once per kind of problem and outage: a backend that is down would
otherwise log on every flush of every task. The first push that gets through after a failure
says so in one line and re-arms the problem lines, so a second outage of a long-lived process
(the API server, the triggerer) is logged too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import cast

from .. import logs
from ..catalogue import Kind
from ..contracts import Backend, LiveHistograms, Paced
from ..deltas import Delta
from ..errors import Deferred, PartialExport
from .registry import SeriesRegistry
from .series import LiveTarget

#: However short the flush interval, a backend that failed to open is retried at most this often.
MAX_OPEN_RETRY: float = 60.0


def _never() -> float:
    return float("inf")


class Delivery:
    """The link between one emitter's series and its backend."""

    def __init__(
        self, backend: Backend, registry: SeriesRegistry, live: LiveTarget, *, interval: float, timeout: float
    ) -> None:
        self.backend = backend
        self.registry = registry
        self.live = live
        self.interval = interval
        self.timeout = timeout
        self.opened = False
        #: In a forked child: open only once there is something to send (a child that counts
        #: nothing must not reopen its parent's backend, nor bind its parent's port).
        self.open_lazily = False
        self._last_open_attempt = -1e9
        #: Failed pushes, said once per kind until one gets something through (which says so).
        self._outage = logs.Outage("export:")
        # Pull backends read counters at collection; histograms and gauges are always pushed,
        # histograms only while the backend does not take them live.
        self._pushed_kinds = {Kind.HISTOGRAM, Kind.GAUGE} if backend.pull else set(Kind)

    def ensure_open(self) -> bool:
        """Open the backend unless it is; False (logged once) if that fails."""
        if self.opened:
            return True
        now = time.monotonic()
        # Opening may block (DNS); do not retry more than every few intervals.
        if now - self._last_open_attempt < min(MAX_OPEN_RETRY, 3 * self.interval):
            return False
        self._last_open_attempt = now
        try:
            self.backend.open(self.registry)
        except Exception as exc:
            logs.once(
                f"open:{type(exc).__name__}",
                logging.ERROR,
                "store-metrics could not open backend %s: %s; counts are kept and retried",
                self.backend.describe(),
                exc,
            )
            return False
        self.opened = True
        if self.backend.live_histograms:
            self.live.backend = cast(LiveHistograms, self.backend)
        logs.forget("open:")
        return True

    def has_work(self) -> bool:
        """Whether this process counted anything the backend has not had yet."""
        return self.registry.has_pending(self._pushed_kinds) or (
            self.backend.pull and self.registry.has_counts()
        )

    def push(self, explicit: bool, deadline: Callable[[], float] = _never) -> bool:
        """Open if needed, send what is pending, and on an explicit flush the backend's buffers.

        A paced backend stops at ``deadline()`` and what it held back is kept. Returns whether
        everything reached the backend. Never raises.
        """
        if not self.opened and self.open_lazily and not self.has_work():
            return True
        if not self.ensure_open():
            return False
        deltas = self.registry.drain(self._pushed_kinds)
        try:
            if deltas and not self._export(deltas, deadline):
                return False
            if explicit:
                self.backend.force_flush(self.timeout)
        except Exception as exc:
            # Part sent, the rest kept (a UDP receiver that went away): a warning. Nothing sent: an error.
            self._outage.failed(
                type(exc).__name__,
                logging.WARNING if isinstance(exc, PartialExport) else logging.ERROR,
                "store-metrics could not send to %s: %s; what was not sent is kept and tried again "
                "at the next flush (not logged again until sending works)",
                self.backend.describe(),
                exc,
            )
            return False
        if deltas or explicit:
            self._outage.recovered(
                "store-metrics: sending to %s works again; what was kept has been sent",
                self.backend.describe(),
            )
        return True

    def _export(self, deltas: list[Delta], deadline: Callable[[], float]) -> bool:
        """Hand ``deltas`` to the backend, giving back what it did not send; False when a paced
        backend held some back at ``deadline()`` (no failure). Raises what the backend raised."""
        try:
            if isinstance(self.backend, Paced):
                self.backend.pace_until(deadline)
            self.backend.export(deltas)
        except Deferred as deferred:
            self.registry.give_back(deferred.unsent)
            logs.once(
                "paced",
                logging.INFO,
                "store-metrics: a flush to %s was larger than its pace lets out before the flush's "
                "deadline (%s); the rest is kept for the next flush (said once)",
                self.backend.describe(),
                deferred.reason,
            )
            self._outage.recovered(
                "store-metrics: sending to %s works again; what was kept is being sent",
                self.backend.describe(),
            )
            return False
        except PartialExport as partial:
            self.registry.give_back(partial.unsent)
            raise
        except Exception:
            self.registry.give_back(deltas)
            raise
        return True

    def close(self) -> None:
        """Release the backend (its own last export included), if it is open."""
        self.live.backend = None
        if not self.opened:
            return
        try:
            self.backend.close(self.timeout)
        except Exception:
            logs.logger.debug("closing backend %s failed", self.backend.describe(), exc_info=True)
        self.opened = False

    def after_fork_in_child(self) -> None:
        """Forget the parent's open backend; the child opens its own when it has something to send."""
        self.live.backend = None
        self.opened = False
        self.open_lazily = True
        self._last_open_attempt = -1e9
        self._outage = logs.Outage("export:")
        try:
            self.backend.after_fork_in_child()
        except Exception:
            logs.logger.debug("backend after-fork hook failed", exc_info=True)
