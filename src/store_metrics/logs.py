"""Logging for store-metrics: one logger, and "say it once" for problems that repeat.

A backend that is down would otherwise log on every flush of every task; operators need one
clear line per problem and process, not a flood.
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
    child it would never be released, and the next :func:`once` there would hang.
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
