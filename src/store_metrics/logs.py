"""Logging for store-metrics: one logger, and "say it once" for problems that repeat.

A backend that is down would otherwise log on every flush of every task; operators need one
clear line per problem and process, not a flood. ``Outage`` adds the other end: when the
thing that failed works again, that is said once too, and its problems may be said again.
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger("store_metrics")

_said: set[str] = set()
_said_lock = threading.Lock()


def renew_after_fork() -> None:
    """Give a forked child a fresh lock (the emitter's fork hook calls this).

    A thread of the parent (the emitter's worker) may have held the lock at ``fork()``; in the
    child it would never be released, and the next ``once`` there would hang.
    """
    global _said_lock
    _said_lock = threading.Lock()


def once(key: str, level: int, message: str, *args: object, exc_info: bool = False) -> bool:
    """Log ``message`` the first time ``key`` is seen in this process; return whether it logged."""
    with _said_lock:
        if key in _said:
            return False
        _said.add(key)
    logger.log(level, message, *args, exc_info=exc_info)
    return True


def forget(prefix: str = "") -> None:
    """Allow messages whose key starts with ``prefix`` to be logged again (all when empty)."""
    with _said_lock:
        for key in [k for k in _said if k.startswith(prefix)]:
            _said.discard(key)


class Outage:
    """Something that can fail and recover (a backend, an endpoint, a database).

    Each kind of failure is said once while the outage lasts; its end is said once and re-arms
    the failure lines, so the next outage of a long-lived process is said too. Keys of
    ``once`` start with ``prefix``.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.failing = False

    def failed(self, kind: str, level: int, message: str, *args: object) -> None:
        self.failing = True
        once(f"{self.prefix}{kind}", level, message, *args)

    def recovered(self, message: str, *args: object) -> None:
        """Say ``message`` (INFO) if an outage is under way, and end it."""
        if not self.failing:
            return
        self.failing = False
        forget(self.prefix)
        logger.info(message, *args)
