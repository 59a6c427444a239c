"""A server a test starts as a subprocess (Prometheus, Alertmanager): ready when its URL answers 200,
stopped (terminated, then killed) by ``ServerProcess.stop``, started again with the same command
(same ports, same files) by ``ServerProcess.start`` or ``ServerProcess.restart``."""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from testbed.waiting import wait_until

__all__ = ["ServerProcess"]


class ServerProcess:
    """``command`` running with its output in ``log``; waits (bounded) until ``ready_url`` answers 200."""

    def __init__(self, command: Sequence[str], log: Path, ready_url: str, timeout: float = 60) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(list(command), stdout=self.log, stderr=subprocess.STDOUT)
        self._ready_url = ready_url
        self._timeout = timeout
        wait_until(self._ready, timeout=timeout, interval=0.1)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(
                f"{self.proc.args[0]} exited with {self.proc.returncode}; see {self.log.name}"
            )
        try:
            with urllib.request.urlopen(self._ready_url, timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()

    def start(self) -> None:
        """Run the same command again after ``stop`` (its log appended to), and wait until it is ready."""
        self.log = open(self.log.name, "a")  # noqa: SIM115 -- closed by stop()
        self.proc = subprocess.Popen(list(self.proc.args), stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(self._ready, timeout=self._timeout, interval=0.1)

    def restart(self) -> None:
        """Stop it, then run the same command again (its log appended to), and wait until it is ready."""
        self.stop()
        self.start()
