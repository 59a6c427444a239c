"""Process events every live emitter must hear of: ``fork()`` and interpreter exit.

* Before a ``fork()`` each emitter's worker is given up to ``FORK_WAIT`` seconds to finish
  the push or open it is in: a fork in the middle of one (for example while the first DNS lookup
  imports the ``idna`` codec) would leave the child with a half-imported module and a backend
  it can never open.
* In the child, every emitter hears ``after_fork_in_child()`` (and the log module renews its
  lock). Threads do not survive a fork; what the child starts again is the emitter's business.
* At exit each emitter makes its last push. Airflow's task runner clears inherited ``atexit``
  handlers and multiprocessing's forked children leave through ``os._exit()``, skipping
  ``atexit``; they do run multiprocessing's own finalizers, so the exit hook is registered there
  too.
"""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
import threading
import weakref
from typing import Final, Protocol

from .. import logs

#: The longest a ``fork()`` waits for a worker to finish the backend I/O it is in.
FORK_WAIT: Final = 0.25


class ForkAware(Protocol):
    def before_fork(self) -> None: ...

    def after_fork_in_parent(self) -> None: ...

    def after_fork_in_child(self) -> None: ...


_live: weakref.WeakSet[ForkAware] = weakref.WeakSet()
_installed = False
_install_lock = threading.Lock()


def _before() -> None:
    for member in list(_live):
        member.before_fork()


def _in_parent() -> None:
    for member in list(_live):
        member.after_fork_in_parent()


def _in_child() -> None:
    logs.renew_after_fork()
    for member in list(_live):
        member.after_fork_in_child()


def track(member: ForkAware) -> None:
    """Tell ``member`` about every ``fork()`` from now on (until it is garbage or untracked)."""
    global _installed
    _live.add(member)
    with _install_lock:
        if not _installed and hasattr(os, "register_at_fork"):
            os.register_at_fork(before=_before, after_in_parent=_in_parent, after_in_child=_in_child)
            _installed = True


def untrack(member: ForkAware) -> None:
    _live.discard(member)


class ExitAware(Protocol):
    def at_exit(self) -> None: ...


def run_at_exit(member: ExitAware) -> None:
    """Call ``member.at_exit()`` at interpreter exit, and at the exit of a multiprocessing child."""
    atexit.register(member.at_exit)
    # The registry keeps ``member`` weakly; the function must not hold it.
    multiprocessing.util.register_after_fork(member, _finalize_in_child)


def _finalize_in_child(member: ExitAware) -> None:
    multiprocessing.util.Finalize(member, member.at_exit, exitpriority=100)


def cancel_at_exit(member: ExitAware) -> None:
    atexit.unregister(member.at_exit)
