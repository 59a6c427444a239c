"""What runs on this host, as ``store-metrics check`` needs to know it: read from ``/proc`` (Linux).

* ``port_holder``: who listens on a TCP port (the process and its command line), and whether
  that listener is a store-metrics scrape endpoint (it answers ``/metrics`` as Prometheus text, and
  either serves store-metrics' series or is an Airflow or store-metrics process);
* ``execution_only_api_servers``: the ``airflow api-server`` processes started without the
  core app (``--apps execution``), where Airflow adds no plugin middleware, so nothing is counted;
* ``kubernetes_namespace``: the namespace of the pod this runs in, if it runs in one.

Everything here only reads, is bounded (one HTTP request with a short timeout) and degrades to
"unknown" where ``/proc`` is missing or a process belongs to another user.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..catalogue import ALL_METRICS

PROC = Path("/proc")
#: Where a pod's service account token mounts its namespace (absent outside Kubernetes, or when
#: the pod does not mount a token).
POD_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp{,6}
_PROBE_TIMEOUT = 2.0
#: Programs whose processes serve store-metrics' endpoints (the plugin inside Airflow's components,
#: or the store-metrics command itself).
_OURS = frozenset({"airflow", "store-metrics"})
_EXPOSITION = ("text/plain", "application/openmetrics-text")


@dataclass(frozen=True)
class Process:
    """One process of this host: its id and its command line (as ``ps`` shows it)."""

    pid: int
    argv: tuple[str, ...]

    @property
    def command(self) -> str:
        text = shlex.join(self.argv) if self.argv else "?"
        return text if len(text) <= 120 else text[:117] + "..."

    def runs(self, *programs: str) -> bool:
        """Whether one of the first words of the command line is one of ``programs`` (a path's name)."""
        words = [w for arg in self.argv[:3] for w in arg.split()]
        return any(Path(word).name in programs for word in words[:4])

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command})"


@dataclass(frozen=True)
class PortHolder:
    """Who listens on a port, and whether it is a store-metrics endpoint."""

    port: int
    processes: tuple[Process, ...]
    #: The listener answered ``GET /metrics`` with a Prometheus exposition.
    exposition: bool
    #: That exposition names a series of store-metrics' catalogue under the configured prefix.
    our_series: bool

    @property
    def store_metrics(self) -> bool:
        if not self.exposition:
            return False
        return self.our_series or any(p.runs(*_OURS) for p in self.processes)

    def who(self) -> str:
        if self.processes:
            return ", ".join(p.describe() for p in self.processes)
        return "a process this user cannot see (run check as the user of Airflow's processes, or as root)"


def _argv(pid: int) -> tuple[str, ...]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ()
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def processes() -> list[Process]:
    """Every process of this host whose command line this user can read."""
    if not PROC.is_dir():
        return []
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            argv = _argv(int(entry.name))
            if argv:
                found.append(Process(int(entry.name), argv))
    return found


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _links(fds: Path) -> set[str]:
    """What a process's file descriptors point at (none for another user's process)."""
    links: set[str] = set()
    try:
        entries = list(fds.iterdir())
    except OSError:
        return links
    for fd in entries:
        with contextlib.suppress(OSError):  # closed meanwhile (the listing's own descriptor, say)
            links.add(os.readlink(fd))
    return links


def _owners(inodes: set[str]) -> list[Process]:
    if not inodes:
        return []
    wanted = {f"socket:[{inode}]" for inode in inodes}
    owners = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        if _links(entry / "fd") & wanted:
            owners.append(Process(int(entry.name), _argv(int(entry.name))))
    return owners


def _probe_host(host: str) -> str:
    return {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)


def _series_prefixes(prefix: str) -> tuple[str, ...]:
    return tuple(sorted({m.prometheus_name(prefix) for m in ALL_METRICS}))


def _probe(host: str, port: int, prefix: str) -> tuple[bool, bool]:
    """(answered as a Prometheus exposition, names a store-metrics series)."""
    address = _probe_host(host)
    url = f"http://[{address}]:{port}/metrics" if ":" in address else f"http://{address}:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=_PROBE_TIMEOUT) as response:
            kind = response.headers.get("Content-Type", "")
            body = response.read(4 << 20).decode(errors="replace")
    except (OSError, urllib.error.URLError, ValueError):
        return False, False
    exposition = kind.startswith(_EXPOSITION)
    names = {line.split("{", 1)[0].split(" ", 1)[0] for line in body.splitlines() if line[:1].isalpha()}
    ours = any(name.startswith(_series_prefixes(prefix)) for name in names)
    return exposition, exposition and ours


def port_holder(port: int, host: str, prefix: str) -> PortHolder:
    """Who listens on TCP ``port`` here, and whether it is a store-metrics endpoint for ``prefix``."""
    exposition, ours = _probe(host, port, prefix)
    return PortHolder(port, tuple(_owners(_listening_inodes(port))), exposition, ours)


def _api_server_port(process: Process, default_port: int) -> int:
    """The port an ``airflow api-server`` process listens on: Airflow's process title says it
    (``airflow api_server -- host:0.0.0.0 port:8080``), else its ``--port``, else ``[api] port``."""
    words = " ".join(process.argv).replace("=", " ").split()
    for i, word in enumerate(words):
        if word.startswith("port:") and word[5:].isdigit():
            return int(word[5:])
        if word in ("--port", "-p") and i + 1 < len(words) and words[i + 1].isdigit():
            return int(words[i + 1])
    return default_port


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=_PROBE_TIMEOUT) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (OSError, ValueError):
        return None


def execution_only_api_servers(default_port: int, found: list[Process] | None = None) -> list[Process]:
    """The ``airflow api-server`` processes of this host that serve the Execution API without the
    core app (``--apps execution``), where Airflow adds no plugin middleware.

    Airflow rewrites its API server's process title (the ``--apps`` argument is gone from it), so
    each one is asked: it answers ``/execution/health`` but not ``/api/v2/monitor/health`` (404).
    """
    servers, seen = [], set()
    for process in processes() if found is None else found:
        title = " ".join(process.argv)
        if not (process.runs("airflow") and ("api-server" in process.argv or "api_server" in title)):
            continue
        port = _api_server_port(process, default_port)
        if port in seen:
            continue
        seen.add(port)
        base = f"http://127.0.0.1:{port}"
        if _status(f"{base}/execution/health") == 200 and _status(f"{base}/api/v2/monitor/health") == 404:
            servers.append(process)
    return servers


def kubernetes_namespace() -> str | None:
    """The namespace of this pod (its service account's), or None outside Kubernetes."""
    try:
        return POD_NAMESPACE.read_text().strip() or None
    except OSError:
        return None
