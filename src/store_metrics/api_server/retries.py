"""``count_at = api_server``: did a retried attempt resume? Decided once, at its first answered read.

A task instance id is one attempt (a retry gets a new id), so the API server knows a retried attempt
(``try_number >= 2``, read with the attempt's tags) and its first task store GET answered found (200)
or absent (404): ``task_state_store.retry_resumed`` or ``retry_not_resumed``, as the task side counts
it. A GET answered with an error decides nothing, as a read that raises on the task side.

An attempt's requests do not all reach one worker: the Task SDK's HTTP client drops a connection
idle for 5 s (httpx's keep-alive expiry), the supervisor heartbeats about every 5 s, so a new
connection, which the kernel may hand to any worker of the API server, is usual in an attempt that
runs longer than a few seconds. Two layers make it one count per attempt:

* ``FirstReads``, per worker, on the event loop: the outcome of the first answered read this
  worker saw of each task instance, taken once (bounded, least recently used dropped first);
* ``HostClaims``, per host: one file per decided attempt in a folder of this user's own in
  the temp directory (``TMPDIR``; checked by ``own_folder``: owner, mode, not a link), so
  exactly one of the host's workers (the first to claim) counts it; made on a lookup thread (a file
  system call never runs on the event loop), as the worker slots are files there
  (``worker_slot``). The file holds the claimant's process id and what it counted: written
  under a name of its own first, then linked to the attempt's name (``link`` fails if that name
  exists, as ``O_EXCL`` would), so a claim is whole or absent, never empty (a full disk). Claims
  older than ``CLAIM_TTL`` are swept: only regular files of this user named as claims.

Where no claim can be made (no usable temp directory, a folder that is not this user's own, a full
disk) each worker decides alone, said once: an attempt whose reads reach two workers of the host
may then count twice, never zero times.

A worker claims an attempt once its first answered read has been seen and the attempt is known to
be a retry (its lookup answered): the first read's worker claims first unless that lookup takes
longer than the time until the attempt's next read on another worker, which needs a new connection
(after an idle gap of 5 s or a broken one).

Across API server replicas (hosts, pods) nothing is shared: an attempt whose reads reach two
replicas can be counted by each (at most once per replica). Sharing would need a write somewhere
all replicas see, and the metadata database is Airflow's schema, never written to.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import time
from collections import OrderedDict
from contextlib import suppress
from pathlib import Path
from typing import Final
from uuid import UUID

from .. import logs
from . import own_folder

#: Task instances whose first read one worker remembers (least recently used ones are dropped):
#: an entry is the id and a small int, about 150 bytes, so at most ~1.5 MB per worker.
FIRST_READS: Final = 10_000
#: A claim file is kept this long: longer than an attempt's reads can be apart. An attempt read
#: again after that, by a worker that has forgotten it, could be counted again.
CLAIM_TTL: Final = 7 * 24 * 3600.0
#: How often (seconds) a worker sweeps the claims older than ``CLAIM_TTL``.
SWEEP_EVERY: Final = 3600.0

_DECIDED: Final = -1
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
#: The names this module makes in its folder: claims (an attempt's id) and claims being written.
CLAIM_NAMES: Final = re.compile(f"{_UUID}(\\.[0-9a-f]+\\.part)?")


class FirstReads:
    """Per worker: the outcome of each task instance's first answered read, until it is taken."""

    def __init__(self, size: int = FIRST_READS) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.size = size
        self._seen: OrderedDict[UUID, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, ident: object) -> bool:
        """Whether a read of ``ident`` was seen (and not forgotten), taken or not."""
        return ident in self._seen

    def note(self, ident: UUID, found: bool) -> None:
        """An answered read of ``ident`` (on the event loop): kept only if it is the first one seen."""
        if ident in self._seen:
            return
        self._seen[ident] = int(found)
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)

    def take(self, ident: UUID) -> bool | None:
        """The first read's outcome (found?), once; ``None`` when no read was seen or it was taken."""
        outcome = self._seen.get(ident)
        if outcome is None or outcome == _DECIDED:
            return None
        self._seen[ident] = _DECIDED
        self._seen.move_to_end(ident)
        return bool(outcome)


def _claims_dir() -> Path:
    return own_folder.temp_path("store-metrics-retry-claims")


class HostClaims:
    """Per host: which worker decides an attempt. Blocking (file system calls): run on a thread."""

    def __init__(
        self, directory: Path | None = None, *, ttl: float = CLAIM_TTL, sweep_every: float = SWEEP_EVERY
    ) -> None:
        #: The claims' folder; ``None``: ``store-metrics-retry-claims-<uid>`` in the temp directory.
        self.directory = directory
        self.ttl = ttl
        self.sweep_every = sweep_every
        self._swept = 0.0

    def claim(self, ident: UUID, found: bool = True) -> bool:
        """Whether this worker is the host's first to claim ``ident`` (it then counts the attempt as
        resumed if ``found``, else as started over; the file says which, and who).

        Where no claim can be made (no usable temp directory, a folder that is not this user's own,
        a full disk) every worker decides alone: an attempt whose reads reach two workers of the
        host may then count twice. Said once.
        """
        try:
            folder = own_folder.open_own(self.directory or _claims_dir())
        except OSError as exc:
            return self._alone(exc)
        try:
            if not _claim_in(folder, str(ident), f"{os.getpid()} {'resumed' if found else 'not_resumed'}\n"):
                return False
            self._sweep(folder)
            return True
        except OSError as exc:
            return self._alone(exc)
        finally:
            os.close(folder)

    @staticmethod
    def _alone(exc: OSError) -> bool:
        logs.once(
            "server:retry_claims",
            logging.WARNING,
            "store-metrics: no host-wide claims of retried attempts (%s): each API server worker "
            "decides alone whether a retry resumed",
            exc,
        )
        return True

    def _sweep(self, folder: int) -> None:
        now = time.time()
        if now - self._swept < self.sweep_every:
            return
        self._swept = now
        with suppress(OSError):  # the claim is made: a sweep that fails waits for the next hour
            for name, st in own_folder.own_files(folder, CLAIM_NAMES):
                if now - st.st_mtime > self.ttl:
                    with suppress(OSError):  # another worker swept it first
                        os.unlink(name, dir_fd=folder)


def _claim_in(folder: int, name: str, text: str) -> bool:
    """Make the claim ``name`` holding ``text`` in ``folder``, whole: ``False`` if it was there.
    Raises ``OSError`` when it cannot be written (nothing is left behind then)."""
    part = f"{name}.{secrets.token_hex(4)}.part"
    data = text.encode()
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | own_folder.NO_FOLLOW, 0o600, dir_fd=folder)
    try:
        try:
            written = os.write(fd, data)
        finally:
            os.close(fd)
        if written != len(data):  # a full disk or a file size limit: no claim rather than a torn one
            raise OSError(f"a short write ({written} of {len(data)} bytes)")
        try:
            os.link(part, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        with suppress(OSError):
            os.unlink(part, dir_fd=folder)
