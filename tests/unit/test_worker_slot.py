"""An API server worker's ``worker`` label: its host and a slot, reused by the worker that replaces it.

Real processes, real ``flock``s: each worker is a fresh Python process that claims a slot in a
temporary folder and holds it until it exits (or is killed).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HOST = socket.gethostname().split(".")[0]

_WORKER = """
import sys
from pathlib import Path
from store_metrics.api_server import worker_slot
print(worker_slot.label(sys.argv[2], Path(sys.argv[1])), flush=True)
sys.stdin.read()  # hold the slot until told to go
"""


class Workers:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.running: list[subprocess.Popen[str]] = []

    def start(self, style: str = "host_slot") -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(self.folder), style],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.running.append(proc)
        assert proc.stdout is not None
        return proc, proc.stdout.readline().strip()

    def stop(self) -> None:
        for proc in self.running:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    running = Workers(tmp_path / "slots")
    yield running
    running.stop()


def test_live_workers_get_distinct_slots_and_a_successor_reuses_a_dead_workers(workers: Workers) -> None:
    first, first_id = workers.start()
    _, second_id = workers.start()
    assert (first_id, second_id) == (f"{HOST}-0", f"{HOST}-1")
    # A worker killed outright releases its slot: its successor carries the same label.
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    _, successor_id = workers.start()
    assert successor_id == f"{HOST}-0"
    _, fourth_id = workers.start()
    assert fourth_id == f"{HOST}-2"


def test_worker_label_slot_is_the_slot_alone_the_same_for_every_pod(tmp_path: Path) -> None:
    """``worker_label = slot``: two hosts' (pods') first workers carry the same label, ``0``, and a
    rollout's new pod brings no new value; ``host_slot`` keeps the host."""
    pods = [Workers(tmp_path / f"pod-{n}") for n in range(2)]  # one slots' folder per pod
    try:
        labels = [pod.start("slot")[1] for pod in pods] + [pods[0].start("slot")[1]]
        assert labels == ["0", "0", "1"]
        assert pods[1].start("host_slot")[1] == f"{HOST}-1"
    finally:
        for pod in pods:
            pod.stop()


def test_no_slot_falls_back_to_the_process_id_once_said(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the slots' folder should be")
    script = (
        "import os, sys; from pathlib import Path; from store_metrics.api_server import worker_slot\n"
        "first = worker_slot.claim(Path(sys.argv[1]))\n"
        "assert worker_slot.claim(Path(sys.argv[1])) == first  # claimed once per process\n"
        "print(first, os.getpid())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(blocked)], capture_output=True, text=True, timeout=60, check=True
    )
    identity, pid = done.stdout.split()
    assert identity == f"{HOST}-p{pid}"
    assert done.stderr.count("store-metrics: no worker slot") == 1
