"""A folder of this user's own in the shared temp directory, checked before anything in it is used.

The API server's workers share two folders in the temp directory (``TMPDIR``), one per user: the
worker slots (``worker_slot``) and the retry claims (``retries``). Every user of the host
may write to the temp directory, so whatever is found there is not trusted:

* the folder is made with mode ``0o700`` when absent; one that is there must be a directory (not a
  symbolic link to one), owned by this user and writable by nobody else (no group or other write
  bit), else ``open_own`` raises ``NotOwnFolder`` saying why and the caller falls back as
  its docstring says;
* it is opened once (``O_DIRECTORY | O_NOFOLLOW``) and checked through that descriptor, so the
  folder checked is the folder used (a rename or a link swapped in afterwards changes nothing):
  files are opened relative to the descriptor (``dir_fd``), with ``O_NOFOLLOW``;
* a clean-up removes only files of its own name pattern that are regular files of this user
  (``own_files``).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

#: Flags of every file opened in the folder: never through a link, never inherited by a child.
NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class NotOwnFolder(OSError):
    """The path is there but is not a folder of this user's own (a link, a file, someone else's, shared)."""


def temp_path(name: str) -> Path:
    """``<temp directory>/<name>-<uid>``; raises ``OSError`` (``FileNotFoundError``) when the
    host has no usable temp directory (``tempfile.gettempdir``)."""
    return Path(tempfile.gettempdir()) / f"{name}-{os.getuid()}"


def open_own(path: Path) -> int:
    """A descriptor of the folder ``path``, made ``0o700`` if absent, checked as this user's own.

    Raises ``NotOwnFolder`` (what is there is not this user's own folder) or the
    ``OSError`` of making or opening it. The caller closes the descriptor.
    """
    with suppress(FileExistsError):  # checked below, through the descriptor, whoever made it
        os.mkdir(path, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | NO_FOLLOW)
    except OSError as exc:
        if os.path.islink(path):
            raise NotOwnFolder(exc.errno, "a symbolic link, not a folder", str(path)) from None
        if exc.errno == errno.ENOTDIR:  # a file (or something else) where the folder should be
            raise NotOwnFolder(exc.errno, "not a folder", str(path)) from None
        raise
    try:
        _check(os.fstat(fd), path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check(st: os.stat_result, path: Path) -> None:
    uid = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        raise NotOwnFolder(errno.ENOTDIR, "not a folder", str(path))
    if st.st_uid != uid:
        raise NotOwnFolder(errno.EPERM, f"owned by uid {st.st_uid}, not this user ({uid})", str(path))
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise NotOwnFolder(
            errno.EPERM, f"others may write to it (mode {stat.S_IMODE(st.st_mode):o})", str(path)
        )


def own_files(folder: int, pattern: re.Pattern[str]) -> Iterator[tuple[str, os.stat_result]]:
    """The regular files of this user in the folder ``folder`` (a descriptor) whose names match
    ``pattern``, with their ``lstat``: what a clean-up may remove (``os.unlink(name, dir_fd=folder)``)."""
    uid = os.geteuid()
    with os.scandir(folder) as entries:
        for entry in entries:
            if not pattern.fullmatch(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile
            if stat.S_ISREG(st.st_mode) and st.st_uid == uid:
                yield entry.name, st
