"""Section 7's worker kills: interleaved arms, and the killed worker's flushes found by its tag.

The loss bound of a killed worker (what it counted after its last flush) needs the flushes that
worker sent. Its DogStatsD lines carry the ``worker`` tag ``<host>-<slot>`` of the slot file it
holds locked, never its pid: the bench reads the tag from the process's open slot file before it
kills it. A real process holds a real slot here, and real datagrams reach a real UDP receiver.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from benchmarks.load import FULL, QUICK, kill_schedule
from benchmarks.load_airflow import DogStatsdReceiver, worker_label
from store_metrics.api_server.worker_slot import host
from testbed.waiting import poll

HOLD_A_SLOT = """
import sys
from pathlib import Path
from store_metrics.api_server.worker_slot import claim
print(claim(Path(sys.argv[1])), flush=True)
sys.stdin.read()  # holds the slot until the test closes stdin
"""


def test_every_round_runs_each_arm_once_in_a_rotated_order() -> None:
    blocks = kill_schedule(FULL)
    arms = [arm for _, arm in blocks]
    assert Counter(arms) == {"on": 3, "off": 3, "aa": 3}
    assert arms == ["on", "off", "aa", "off", "aa", "on", "aa", "on", "off"]
    assert [arm for _, arm in kill_schedule(QUICK)] == ["on", "off", "aa"]


def test_a_killed_workers_flushes_are_found_by_the_tag_of_the_slot_it_holds(tmp_path: Path) -> None:
    env_path = str(Path(__file__).resolve().parents[2] / "src")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_SLOT, str(tmp_path / "slots")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
    )
    receiver = DogStatsdReceiver()
    try:
        assert holder.stdout is not None
        claimed = holder.stdout.readline().strip()
        assert claimed == f"{host()}-0"
        # The bench's reading of the tag, from the process alone (a worker is not asked).
        assert worker_label(holder.pid) == claimed

        line = (
            "airflow.api_server.state_store.requests:3|c|#store:task,operation:get,outcome:read_found,"
            f"status_class:2xx,worker:{claimed}"
        ).encode()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(line, ("127.0.0.1", receiver.port))
            assert poll(lambda: len(receiver.flushes_of(claimed)) == 1, 10, 0.02)
            time.sleep(0.15)  # a flush is lines more than 0.1 s after the worker's previous ones
            sock.sendto(line, ("127.0.0.1", receiver.port))
            assert poll(lambda: len(receiver.flushes_of(claimed)) == 2, 10, 0.02)
        assert receiver.flushes_of(f"{host()}-p{holder.pid}") == []
        assert receiver.snapshot()["requests"] == {("task", "get", "read_found"): 6}
    finally:
        receiver.close()
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)


def test_a_process_without_a_slot_is_tagged_by_its_pid() -> None:
    assert worker_label(1) == f"{host()}-p1"
