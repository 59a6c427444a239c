"""Stopping a server the test bed started: one process (``stop``), or a session of its own
(``start_new_session=True``: ``stop_group``)."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen[bytes] | subprocess.Popen[str] | None, grace: float) -> None:
    """SIGTERM to the process group (a clean shutdown of the server and its children), SIGKILL
    if it takes longer than ``grace`` seconds; nothing if it has already exited."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def stop(proc: subprocess.Popen[bytes] | subprocess.Popen[str] | None, grace: float) -> None:
    """SIGTERM to the process alone (its clean shutdown), SIGKILL if it takes longer than ``grace``
    seconds; nothing if it has already exited."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
