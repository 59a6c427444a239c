"""The load benchmark's real pieces: an Airflow home, ``airflow api-server`` processes, metric receivers.

Nothing is simulated: the API server is Airflow's own command (uvicorn, the plugin's root
middleware and stall monitor loaded from the installed entry point), the DogStatsD receiver is a
UDP socket read in this process, the OTLP receiver a real HTTP endpoint that decodes what the
OpenTelemetry SDK's exporter posts, and the "never answers" endpoint a TCP listener that accepts
and sends nothing. Every process started here is started in its own session and stopped by its
id (and its process group), never by name.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from typing import Any

import psutil

from testbed.airflow import AirflowHome
from testbed.otlp import OtlpReceiver
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import poll, settle

from .common import REPO_ROOT

#: What the API server's request counter is called on the wire (prefix ``airflow``).
REQUESTS = "airflow.api_server.state_store.requests"
STALL_MAX = "airflow.api_server.event_loop.stall.max"
LONG_STALLS = "airflow.api_server.event_loop.long_stalls"

#: A 64-byte HMAC key (HS512 wants at least that many): the deployment's ``[api_auth] jwt_secret``.
JWT_SECRET = "store-metrics-load-benchmark-" + "k" * 35


# -- the Airflow home's task instances ------------------------------------------------------------


def prepare_clients(home: AirflowHome, clients: int) -> tuple[list[dict[str, str]], float]:
    """db migrate, the DAG, reserialize, trigger, tokens (one subprocess: ``testbed.load_setup``):
    one task instance, asset and token per client, and the seconds it took."""
    out = home.path / "clients.json"
    home.path.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "testbed.load_setup", "prepare", str(clients), str(out)],
        cwd=REPO_ROOT,
        env=home.env(AIRFLOW__STORE_METRICS__BACKEND="none", AIRFLOW__API_AUTH__JWT_SECRET=JWT_SECRET),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"load_setup failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    made: list[dict[str, str]] = json.loads(out.read_text(encoding="utf-8"))["clients"]
    if len(made) != clients:
        raise RuntimeError(f"expected {clients} task instances, got {len(made)}")
    return made, time.monotonic() - t0


# -- airflow api-server -------------------------------------------------------------------------


class ApiServer:
    """``airflow api-server`` in a session of its own, on a free port, logging to a file."""

    def __init__(self, name: str, home: AirflowHome, settings: dict[str, str], workers: int = 1) -> None:
        self.name = name
        self.home = home
        self.workers = workers
        self.port = free_port()
        self.log_path = home.path / f"api-server-{name}.log"
        self.env = home.env(AIRFLOW__API_AUTH__JWT_SECRET=JWT_SECRET, **settings)
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.startup_s = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/execution"

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "airflow",
                "api-server",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.home.path,
        )
        log.close()

    def wait_ready(self, timeout: float = 180.0) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"api-server {self.name} exited:\n{self.log_tail()}")
            return self.healthy()

        if not poll(ready, timeout, 0.2):
            raise RuntimeError(f"api-server {self.name} not ready in {timeout:.0f} s:\n{self.log_tail()}")
        if self.workers > 1:
            # Every worker up: uvicorn's workers each log this once their app has started.
            poll(lambda: self.log_count("Application startup complete") >= self.workers, timeout, 0.2)
        self.startup_s = time.monotonic() - self.started_at

    def healthy(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.port}/api/v2/monitor/health"
            with urllib.request.urlopen(url, timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def processes(self) -> list[psutil.Process]:
        """The server's processes: the command's own and, with several workers, its workers."""
        if self.proc is None:
            return []
        try:
            main = psutil.Process(self.proc.pid)
            return [main, *main.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def worker_pids(self) -> list[int]:
        """Pids of the uvicorn workers (the command's own pid when it serves alone)."""
        if self.proc is None:
            return []
        if self.workers == 1:
            return [self.proc.pid]
        pids = []
        for p in self.processes()[1:]:
            try:
                if any("spawn_main" in part for part in p.cmdline()):
                    pids.append(p.pid)
            except psutil.Error:
                continue
        return pids

    def rss(self) -> int:
        total = 0
        for p in self.processes():
            try:
                total += p.memory_info().rss
            except psutil.Error:
                continue
        return total

    def cpu(self) -> float:
        """User + system CPU seconds of the server's live processes."""
        total = 0.0
        for p in self.processes():
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                continue
        return total

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_count(self, needle: str) -> int:
        return self.log_text().count(needle)

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        """What the server logged after byte ``offset`` (cheap: the log grows by every request)."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:]

    def stop(self, timeout: float = 30.0) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


#: The file a worker holds locked for its slot (``slot-<n>.lock``).
_SLOT_FILE = re.compile(r"/slot-([0-9]+)\.lock$")


def worker_label(pid: int) -> str:
    """The ``worker`` tag of the worker ``pid``: ``<host>-<slot>`` of the slot file it holds
    locked (``store_metrics.api_server.worker_slot``), or ``<host>-p<pid>`` without one."""
    from store_metrics.api_server.worker_slot import host

    try:
        for f in psutil.Process(pid).open_files():
            m = _SLOT_FILE.search(f.path)
            if m:
                return f"{host()}-{m.group(1)}"
    except psutil.Error:
        pass
    return f"{host()}-p{pid}"


#: store-metrics' own log lines in a server log (the structlog renderer names the logger).
_OURS = re.compile(r"^\S+\s+\[(warning|error|critical)\s*\].*\[store_metrics\]", re.MULTILINE)


def problem_lines(text: str) -> list[str]:
    """store-metrics' warning and error lines in an API server log."""
    return [m.group(0)[:400] for m in _OURS.finditer(text)]


#: The stall monitor's report of a long stall (at most one per worker and ``flush_interval``):
#: the monitor doing its job, not a problem of the plugin's own.
STALL_REPORT = "event loop of API server worker"


def problem_kinds(lines: list[str]) -> Counter[str]:
    """How many lines of each kind of problem: the message without its numbers, addresses and ids."""
    kinds: Counter[str] = Counter()
    for line in lines:
        message = line.split("] ", 1)[-1]
        if STALL_REPORT in message:
            kinds["stall report"] += 1
            continue
        message = re.sub(r"[0-9]+", "N", message.split(";")[0])
        kinds[message[:120]] += 1
    return kinds


# -- receivers ----------------------------------------------------------------------------------

_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9_.\-]+):(?P<value>[0-9.e+\-]+)\|(?P<kind>c|d|g|h|ms)"
    r"(?:\|@(?P<rate>[0-9.e\-]+))?(?:\|#(?P<tags>[^|]*))?$"
)


class DogStatsdReceiver:
    """The API server's DogStatsD lines, tallied as they arrive on a UDP socket of 127.0.0.1.

    Keeps the request counts by (store, operation, outcome) and by worker, the largest
    ``event_loop.stall.max`` and the long stalls. ``close`` closes the socket (the port is then
    closed: the kernel answers datagrams to it with ICMP port unreachable); ``reopen`` binds the
    same port again.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: Counter[tuple[str, str, str]] = Counter()
        #: Per worker, when each of its flushes began to arrive (time.monotonic(); the datagrams of
        #: one flush arrive together, a flush interval after the previous one).
        self.flushes: dict[str, list[float]] = {}
        self._last_line: dict[str, float] = {}
        self.long_stalls = 0
        self.stall_max_ms = 0.0
        self._udp: UdpReceiver | None = UdpReceiver(keep=self._datagram)
        self.port = self._udp.port

    def reopen(self) -> None:
        self._udp = UdpReceiver(self.port, keep=self._datagram)

    def close(self) -> None:
        udp, self._udp = self._udp, None
        if udp is not None:
            udp.close()

    def _datagram(self, data: bytes) -> None:
        with self.lock:
            for text in data.decode("utf-8", "replace").split("\n"):
                if text:
                    self._take(text)

    def _take(self, text: str) -> None:
        m = _LINE.match(text)
        if m is None:
            return
        name = m["name"]
        if not name.startswith("airflow.api_server."):
            return
        tags = dict(t.split(":", 1) for t in m["tags"].split(",")) if m["tags"] else {}
        value = float(m["value"])
        if name == REQUESTS:
            n = int(value)
            self.requests[(tags["store"], tags["operation"], tags["outcome"])] += n
            self._arrived(tags["worker"])
        elif name == STALL_MAX:
            self.stall_max_ms = max(self.stall_max_ms, value)
        elif name == LONG_STALLS:
            self.long_stalls += int(value)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": Counter(self.requests),
                "long_stalls": self.long_stalls,
                "stall_max_ms": self.stall_max_ms,
            }

    def _arrived(self, worker: str) -> None:
        # Caller holds the lock. Lines more than 0.1 s after the worker's previous line: a new flush.
        now = time.monotonic()
        if now - self._last_line.get(worker, -1e9) > 0.1:
            self.flushes.setdefault(worker, []).append(now)
        self._last_line[worker] = now

    def flushes_of(self, worker: str) -> list[float]:
        """When each flush of the worker tagged ``worker`` (``ApiServer.worker_label``) began to
        arrive, oldest first (a killed worker's successor has the same tag: its flushes come later)."""
        with self.lock:
            return sorted(self.flushes.get(worker, []))

    def reset_stall_max(self) -> None:
        with self.lock:
            self.stall_max_ms = 0.0

    def settle(self, quiet: float, timeout: float) -> None:
        """Wait until no request count has changed for ``quiet`` seconds (at most ``timeout``)."""
        settle(lambda: self.snapshot()["requests"], quiet, timeout)


def otlp_requests(receiver: OtlpReceiver) -> Counter[tuple[str, str, str]]:
    """The API server's request counts by (store, operation, outcome), from what ``receiver`` got:
    the latest cumulative value of every ``api_server.state_store.requests`` series, summed over the
    workers (``worker`` attribute) and status classes."""
    latest: dict[tuple[str, ...], int] = {}
    for p in receiver.points():
        if p.name == REQUESTS:
            a = p.attributes
            key = (a["worker"], a["store"], a["operation"], a["outcome"], a["status_class"])
            latest[key] = max(latest.get(key, 0), p.value)
    out: Counter[tuple[str, str, str]] = Counter()
    for (_worker, store, operation, outcome, _klass), value in latest.items():
        out[(store, operation, outcome)] += value
    return out


# -- the machine --------------------------------------------------------------------------------


def busiest_other_processes(mine: set[int], sample: float = 1.0, top: int = 5) -> list[str]:
    """The processes outside ``mine`` that used the most CPU over ``sample`` seconds (name, % of a core)."""
    procs = []
    for p in psutil.process_iter(["pid", "name"]):
        if p.pid in mine or p.pid == os.getpid():
            continue
        try:
            p.cpu_percent(None)
            procs.append(p)
        except psutil.Error:
            continue
    time.sleep(sample)
    usage = []
    for p in procs:
        try:
            pct = p.cpu_percent(None)
            if pct >= 1.0:
                cmd = " ".join(p.cmdline()[:4])[:80] or p.name()
                usage.append((pct, f"{cmd} ({pct:.0f}%)"))
        except psutil.Error:
            continue
    return [text for _, text in sorted(usage, reverse=True)[:top]]
