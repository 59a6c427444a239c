"""The large deployment the scale sections measure, and the peers' processes they start.

A deployment of ``dags`` DAGs of ``TASKS`` tasks each, every task calling its task state store
three ways (``OUTCOMES``: ``get`` of a stored key, ``set``, ``delete``): three counter series per
task, ``30 x dags`` in all (150,000 at 5,000 DAGs). Every series carries the task side's tags
(``dag_id``, ``task_id``, ``run_type="scheduled"``, ``operator="_PythonDecoratedOperator"``, what an
``@task`` reports), in the order and with the names the product gives them: the StatsD lines come
from ``store_metrics.backends.statsd_lines``, the code the ``statsd`` backend sends with.

``Peer`` runs one of the real programs (``testbed.peers``) in a session of its own, stopped by
its id; ``exported`` writes the pipeline files with ``store-metrics export``, as a user does.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from store_metrics.backends.statsd_lines import Line, influx_counter_line
from store_metrics.catalogue import task_tags
from store_metrics.naming import normalize_tags
from testbed.processes import stop_group
from testbed.waiting import poll

from .common import REPO_ROOT

#: The sizes a full run measures (DAGs), and a quick run's.
SIZES: tuple[int, ...] = (500, 1_000, 2_000, 5_000, 10_000)
QUICK_SIZES: tuple[int, ...] = (20, 50)
TASKS = 10
#: What each task's three calls count as: ``get`` (found), ``set``, ``delete``.
OUTCOMES: tuple[str, ...] = ("read_found", "write", "delete")
SERIES_PER_DAG = TASKS * len(OUTCOMES)
RUN_TYPE = "scheduled"
OPERATOR = "_PythonDecoratedOperator"
PREFIX = "airflow"


def dag_id(index: int) -> str:
    return f"scale_dag_{index:05d}"


def task_id(index: int) -> str:
    return f"task_{index:02d}"


def tags(dag: int, task: int) -> dict[str, str]:
    """The task side's tags of one task of the deployment."""
    return task_tags(dag_id=dag_id(dag), task_id=task_id(task), run_type=RUN_TYPE, operator=OPERATOR)


def lines(dags: range) -> list[Line]:
    """Every series of ``dags`` as one InfluxDB-tagged StatsD counter line (``...:1|c``), in the
    ``statsd`` backend's exact text."""
    out = []
    for dag in dags:
        for task in range(TASKS):
            tag_tuple = normalize_tags(tags(dag, task))
            for outcome in OUTCOMES:
                text = influx_counter_line(PREFIX, f"task_state_store.{outcome}", tag_tuple, 1)
                out.append(Line(text, None))  # type: ignore[arg-type]  # what it carries: nothing to keep
    return out


def exported(out: Path, **settings: str) -> Path:
    """``store-metrics export --out OUT`` (the default prefix, ``--set`` for each of ``settings``): its
    ``collector/`` folder."""
    sets = [arg for name, value in settings.items() for arg in ("--set", f"{name}={value}")]
    subprocess.run(
        [sys.executable, "-m", "store_metrics.commands.cli", "export", "--out", str(out), *sets],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out / "collector"


def rss_of(pid: int) -> int:
    """Resident set size of process ``pid`` in bytes (``VmRSS``), 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return 0
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else 0


def fetch(url: str, timeout: float = 120.0, gzip: bool = False) -> tuple[bytes, float]:
    """The body of ``url`` (as sent: compressed when ``gzip``) and the seconds to its last byte."""
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    started = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as response:
        body: bytes = response.read()
    return body, time.perf_counter() - started


def fetch_pieces(url: str) -> tuple[list[bytes], float]:
    """GET ``url`` over a raw socket (``Connection: close``, read to the end, 1 MiB a call): the
    client's own share of the interpreter is a few calls that each release it while they wait. The
    pieces are returned as read: joining 30 MB here would hold the interpreter for milliseconds of
    the measured scrape (a Prometheus scraper is another process; its join is not the endpoint's)."""
    host, _, rest = url.removeprefix("http://").partition("/")
    name, _, port = host.partition(":")
    start = time.perf_counter()
    with socket.create_connection((name, int(port)), timeout=300) as sock:
        sock.sendall(f"GET /{rest} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
    seconds = time.perf_counter() - start
    return chunks, seconds


def http_body(response: bytes) -> bytes:
    """The body of an HTTP/1.1 response, chunked or not."""
    head, _, rest = response.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"the endpoint answered {head[:200]!r} {rest[:500]!r}")
    if b"transfer-encoding: chunked" not in head.lower():
        return rest
    out: list[bytes] = []
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return b"".join(out)
        out.append(rest[:size])
        rest = rest[size + 2 :]


def samples(text: str, name: str) -> dict[str, float]:
    """Every sample of metric ``name`` in a Prometheus text exposition, by its label text."""
    pattern = rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)"
    return {labels or "": float(value) for labels, value in re.findall(pattern, text, re.MULTILINE)}


def total(text: str, name: str) -> float:
    return sum(samples(text, name).values())


#: A Peer or a subclass of it: what ``with`` gives (typing.Self is Python 3.11+).
_PeerT = TypeVar("_PeerT", bound="Peer")


class Peer:
    """One real program in a session of its own, logging to a file; stopped by its id on exit."""

    def __init__(self, argv: Sequence[str], log: Path, ready_url: str) -> None:
        self.argv = list(argv)
        self.log = log
        self.ready_url = ready_url
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self: _PeerT) -> _PeerT:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        if not poll(self._ready, 60.0, 0.05):
            self.stop()
            raise RuntimeError(f"{self.argv[0]} did not come up:\n{self.log_tail()}")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.argv[0]} exited ({self.proc.returncode}):\n{self.log_tail()}")
        try:
            fetch(self.ready_url, timeout=2.0)
        except OSError:
            return False
        return True

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, number: int) -> None:
        if self.alive():
            os.kill(self.pid, number)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        stop_group(self.proc, 30)
