"""An API server worker's identity: ``<short host name>-<slot>``, never a process id.

The slot is the lowest number free on this host: an exclusive ``flock`` on one file per slot in the
temp directory, held for the worker's life. The kernel releases it when the worker exits, however it
ends (a crash or SIGKILL included), so the worker that replaces it takes the same slot, and its series
carry the same ``worker`` label: restarts and worker recycling leave no stale series behind, and the
label's values are bounded by the workers a host runs at once. A process that cannot take a slot (no
writable temp directory, all ``MAX_SLOTS`` taken) falls back to ``<host>-p<pid>`` and says so once.

With ``worker_label = slot`` (:func:`label`) the label is the slot alone (``0``, ``p<pid>``): the same
in every pod of a Deployment, so a rollout brings no new values where the scrape's ``instance``
keeps the pods apart.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import tempfile
from pathlib import Path
from typing import Final

from .. import logs

#: More workers than this on one host at once fall back to the process id.
MAX_SLOTS: Final = 64

_held: dict[int, tuple[int, str]] = {}  # pid -> (fd holding the lock, identity)


def host() -> str:
    return socket.gethostname().split(".")[0] or "host"


def _slot_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"store-metrics-worker-slots-{os.getuid()}"


def claim(directory: Path | None = None) -> str:
    """This process's identity, claiming a slot on the first call (again in a forked child)."""
    pid = os.getpid()
    if pid in _held:
        return _held[pid][1]
    folder = directory or _slot_dir()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        for slot in range(MAX_SLOTS):
            fd = os.open(folder / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            identity = f"{host()}-{slot}"
            _held[pid] = (fd, identity)
            return identity
        why = f"all {MAX_SLOTS} slots are taken"
    except OSError as exc:
        why = f"{folder}: {exc}"
    identity = f"{host()}-p{pid}"
    logs.once(
        "worker_slot", logging.WARNING, "store-metrics: no worker slot (%s); identity %s", why, identity
    )
    _held[pid] = (-1, identity)
    return identity


def label(style: str, directory: Path | None = None) -> str:
    """This process's ``worker`` label: :func:`claim`'s ``<host>-<slot>`` (``host_slot``), or the slot
    alone (``slot``)."""
    identity = claim(directory)
    return identity.removeprefix(f"{host()}-") if style == "slot" else identity
