"""An API server worker's identity: ``<short host name>-<slot>``, never a process id.

The slot is the lowest number free on this host: an exclusive ``flock`` on one file per slot in a
folder of this user's own in the temp directory (checked by ``own_folder``: owner, mode, not a
link; the files opened through its descriptor, never through a link), held for the worker's life.
The kernel releases it when the worker exits, however it ends (a crash or SIGKILL included), so the
worker that replaces it takes the same slot, and its series carry the same ``worker`` label:
restarts and worker recycling leave no stale series behind, and the label's values are bounded by
the workers a host runs at once. A process that cannot take a slot (no
usable temp directory, a folder that is not this user's own, all ``MAX_SLOTS`` taken) falls back to
``<host>-p<pid>`` and says so once: its metrics are made and served all the same.

With ``worker_label = slot`` (``label``) the label is the slot alone (``0``, ``p<pid>``): the same
in every pod of a Deployment, so a rollout brings no new values where the scrape's ``instance``
keeps the pods apart.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
from pathlib import Path
from typing import Final

from .. import logs
from . import own_folder

#: More workers than this on one host at once fall back to the process id.
MAX_SLOTS: Final = 64

_held: dict[int, tuple[int, str]] = {}  # pid -> (fd holding the lock, identity)


def host() -> str:
    return socket.gethostname().split(".")[0] or "host"


def _slot_dir() -> Path:
    return own_folder.temp_path("store-metrics-worker-slots")


def claim(directory: Path | None = None) -> str:
    """This process's identity, claiming a slot on the first call (again in a forked child)."""
    pid = os.getpid()
    if pid in _held:
        return _held[pid][1]
    folder: Path | None = directory
    try:
        folder = folder or _slot_dir()
        dir_fd = own_folder.open_own(folder)
        try:
            why = _take_slot(pid, dir_fd)
        finally:
            os.close(dir_fd)  # the slot's file stays open (and locked) on its own descriptor
        if not why:
            return _held[pid][1]
    except OSError as exc:
        why = f"{folder or 'the temp directory'}: {exc}"
    identity = f"{host()}-p{pid}"
    logs.once(
        "worker_slot", logging.WARNING, "store-metrics: no worker slot (%s); identity %s", why, identity
    )
    _held[pid] = (-1, identity)
    return identity


def _take_slot(pid: int, dir_fd: int) -> str:
    """Lock the lowest free slot's file in the folder ``dir_fd``; empty, or why none was taken."""
    for slot in range(MAX_SLOTS):
        try:
            fd = os.open(
                f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT | own_folder.NO_FOLLOW, 0o600, dir_fd=dir_fd
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a link where the slot's file should be: never followed
                continue
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held[pid] = (fd, f"{host()}-{slot}")
        return ""
    return f"all {MAX_SLOTS} slots are taken"


def label(style: str, directory: Path | None = None) -> str:
    """This process's ``worker`` label: ``claim``'s ``<host>-<slot>`` (``host_slot``), or the slot
    alone (``slot``)."""
    identity = claim(directory)
    return identity.removeprefix(f"{host()}-") if style == "slot" else identity
