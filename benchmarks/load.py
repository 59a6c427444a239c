"""7. The API server under sustained load, and faults while under load.

A real ``airflow api-server`` (uvicorn, ``--workers 2``; the plugin's root middleware and stall
monitor loaded from the installed entry point) on a throw-away PostgreSQL (SQLite when no
PostgreSQL can be started here), driven over HTTP by a real asynchronous load generator in its
own process (``testbed.load_client``: ``httpx.AsyncClient``, one coroutine per client,
closed loop) with valid Execution API tokens for real task instances of a real DAG run
(``testbed.load_setup``). Each client owns one task instance and one asset, and repeats a
fixed mix (``testbed.load_client.mix``): task and asset store PUT of 0.4 KB and 59 KB
values, GET found and absent, DELETE, and every eighth cycle a 689 KB PUT and GET and a clear of
both stores (the async-routes proposal's value sizes).

* **On vs off.** Two API servers run side by side on the same database: *on* (the plugin's
  server side, DogStatsD to a UDP receiver in this process, flushed every second) and *off*
  (``[store_metrics] server_metrics = false``). Blocks alternate between them at 8 and at 32
  clients (on, off, on, off at 8; off, on, off, on at 32). Two servers rather than a restart
  before every block: no block pays a cold start, both servers are warmed up once, and RSS
  growth is that of a long-lived server; the idle server's CPU during the other's blocks is
  measured and shown. Per block: requests per second, p50/p99/p99.9 latency, 5xx, the servers'
  RSS at the start and the end, their CPU per request.
* **Exactness.** For every block with the plugin on, the server's
  ``api_server.state_store.requests`` received by the DogStatsD receiver, per (store, operation,
  outcome), against the load generator's own counts of what it sent and what came back.
* **Faults under load** (8 clients; before / during / after, equal phases): the DogStatsD
  receiver's port closed and reopened; an OTLP endpoint that refuses and one that accepts and
  never answers (a third server with ``backend = otel``, OTLP/HTTP to a receiver in this process
  that decodes every export). Throughput and latency per phase, store-metrics' warning and error
  lines in the server log, and the counts delivered once everything has settled.
* **A worker killed, interleaved** (``kill_blocks``): one API server worker SIGKILLed under
  load (uvicorn's supervisor starts a new one), in ``kill_rounds`` rounds of three blocks: on the
  *on* server, on the *off* server, and on the *off* server again (the A/A arm: what two identical
  arms of this run differ by). The order rotates each round; each block waits for the successor
  and warms the server up again. Throughput during / before per block, when the successor was up,
  and the plugin's own set-up in a fresh worker process (``plugin_setup_ms``).

Run with ``python -m benchmarks --only load`` (about 20 min; ``--quick``: about 2 min).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

from testbed.airflow import AirflowHome
from testbed.databases import ThrowawayPostgres
from testbed.endpoints import SilentTcpServer
from testbed.otlp import OtlpReceiver
from testbed.values import SIZES_BYTES
from testbed.waiting import poll, settle

from .common import REPO_ROOT, log
from .load_airflow import (
    ApiServer,
    DogStatsdReceiver,
    busiest_other_processes,
    otlp_requests,
    prepare_clients,
    problem_kinds,
    problem_lines,
    worker_label,
)

WORKERS = 2


@dataclass(frozen=True)
class Config:
    seconds: float  # measured part of a main block
    warmup: float  # not measured, at the start of every block
    server_warmup: float  # once per server, before its first block
    concurrencies: tuple[int, ...]
    rounds: int  # on/off pairs per concurrency
    phase: float  # each of before / during / after in a fault block
    fault_clients: int
    big_every: int
    flush_interval: float  # [store_metrics] flush_interval of the servers
    settle: float  # no new count for this long: the server has flushed everything
    wait_for_replacement: bool  # after killing a worker, wait until its successor serves
    kill_rounds: int  # rounds of interleaved worker-kill blocks, each: plugin on, off, off again (A/A)


FULL = Config(
    seconds=60.0,
    warmup=2.0,
    server_warmup=5.0,
    concurrencies=(8, 32),
    rounds=2,
    phase=12.0,
    fault_clients=8,
    big_every=8,
    flush_interval=1.0,
    settle=2.5,
    wait_for_replacement=True,
    kill_rounds=3,
)
QUICK = Config(
    seconds=2.5,
    warmup=1.0,
    server_warmup=1.0,
    concurrencies=(8, 32),
    rounds=1,
    phase=1.0,
    fault_clients=8,
    big_every=8,
    flush_interval=0.5,
    settle=1.0,
    wait_for_replacement=False,
    kill_rounds=1,
)

Key = tuple[str, str, str]  # store, operation, outcome


class Window(TypedDict):
    """The requests the clients started in a time window."""

    seconds: float
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    status: dict[str, int]  # per status class ("2xx", ..., "none": no answer)


class Exactness(TypedDict):
    """A block with the plugin on: the server's request counts against the clients'."""

    exact: bool
    counted: int
    sent: int
    mismatch: dict[str, list[int]]  # "store/operation/outcome" -> [client, server], where they differ
    by_key: dict[str, int]  # the clients' counts
    stall_max_ms: float  # the stall monitor's largest stall during the block
    long_stalls: int


class Block(TypedDict):
    index: int
    arm: str  # "on" or "off"
    concurrency: int
    window: Window
    rss_start: int
    rss_end: int
    cpu_ms_per_request: float
    idle_server_cpu_percent: float  # the other server, idle meanwhile
    load_average: list[float]  # 1 min, at the start and the end
    failures: dict[str, int]
    exactness: Exactness | None  # None with the plugin off


class Compared(TypedDict):
    client_total: int
    server_total: int
    lost_total: int
    doubled_total: int
    exact: bool


class FaultResult(Compared):
    name: str
    server: str  # "on", "off" or "otel"
    promise: str  # what delivery promises here (the page's wording)
    phases: dict[str, Window]  # before / during / after
    ratio_during: float  # throughput during / before
    ratio_after: float
    failures: dict[str, int]  # requests that got no answer, by exception
    #: Loss bounds: answered since the killed worker's flush before its last one (``bound``) or
    #: since its last one (``estimate``); for the closed UDP port, what each worker's first flush
    #: after the close can carry (``bound``).
    bound: int
    estimate: int
    since_last_flush_s: float | None
    log_lines: list[str]  # store-metrics' warning and error lines during the block
    problems: dict[str, int]  # lines per kind of problem
    killed_pid: int | None
    replaced_after_s: float | None  # when the killed worker's successor served


class KillBlock(FaultResult):
    """One block of the interleaved worker kills."""

    arm: str  # "on", "off", or "aa": the off server again, the A/A arm
    round: int
    order: int  # position in the run, from 0
    worker: str  # the killed worker's ``worker`` tag


class Measured(TypedDict):
    setup_s: float
    others_at_start: list[str]  # the busiest other processes
    others_at_end: list[str]
    startup_s: dict[str, float]  # per server
    rss_after_warmup: dict[str, int]
    rss_after_blocks: dict[str, int]
    blocks: list[Block]
    faults: list[FaultResult]
    kills: list[KillBlock]
    #: The plugin's set-up in a fresh worker process (import of its server side, the worker's
    #: metrics, the stall monitor started), ms, with the *on* server's settings, per try.
    plugin_setup_ms: list[float]
    plugin_in_tracebacks: int  # server log lines naming store_metrics/ code


class Load(Measured):
    config: dict[str, Any]  # the Config, as a dict
    quick: bool
    database: str


def _key_str(key: Key) -> str:
    return "/".join(key)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (``nan`` when empty)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), int(-(-q * len(sorted_values) // 1))))
    return float(sorted_values[rank - 1])


# -- one run of the load generator -------------------------------------------------------------------------


@dataclass
class ClientRun:
    measuring: float
    stopped: float
    result: dict[str, Any]

    @property
    def stop_at(self) -> float:
        """When the clients stopped sending (the last answers came in until ``stopped``)."""
        return float(self.result["stop_at"])

    def window(self, start: float, end: float) -> Window:
        """Requests that started in [start, end): rate, latency percentiles, status classes."""
        r = self.result
        lat: list[float] = []
        statuses: Counter[str] = Counter()
        for t, ms, status in zip(r["start"], r["latency_ms"], r["status"], strict=True):
            if start <= t < end:
                lat.append(ms)
                statuses["none" if status == 0 else f"{status // 100}xx"] += 1
        lat.sort()
        seconds = max(end - start, 1e-9)
        return Window(
            seconds=seconds,
            requests=len(lat),
            rps=len(lat) / seconds,
            p50_ms=percentile(lat, 0.50),
            p99_ms=percentile(lat, 0.99),
            p999_ms=percentile(lat, 0.999),
            status=dict(statuses),
        )

    def counts(self) -> Counter[Key]:
        return Counter({(c[0], c[1], c[2]): int(c[3]) for c in self.result["counts"]})

    def answered(self, since: float, until: float) -> int:
        """Requests the clients got an answer to between ``since`` and ``until`` (both workers)."""
        r = self.result
        return sum(
            1
            for t, ms, status in zip(r["start"], r["latency_ms"], r["status"], strict=True)
            if status and since <= t + ms / 1000.0 <= until
        )


def drive(
    server: ApiServer,
    clients: list[dict[str, str]],
    *,
    seconds: float,
    warmup: float,
    big_every: int,
    workdir: Path,
    at_measuring: Callable[[float], None] | None = None,
    during: Callable[[float], None] | None = None,
) -> ClientRun:
    """One run of the load generator against ``server``; ``during(t0)`` runs while it measures."""
    n = uuid.uuid4().hex[:12]
    plan_path, result_path = workdir / f"plan-{n}.json", workdir / f"result-{n}.json"
    plan = {
        "base_url": server.base_url,
        "clients": clients,
        "sizes": {"small": SIZES_BYTES[0], "mid": SIZES_BYTES[1], "big": SIZES_BYTES[2]},
        "big_every": big_every,
        "warmup": warmup,
        "seconds": seconds,
    }
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "testbed.load_client", str(plan_path), str(result_path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        line = proc.stdout.readline().split()
        if not line or line[0] != "measuring":
            raise RuntimeError(f"load client: {line} {proc.stderr.read()[-3000:]}")
        measuring = float(line[1])
        if at_measuring is not None:
            at_measuring(measuring)
        if during is not None:
            during(measuring)
        line = proc.stdout.readline().split()
        stopped = float(line[1]) if line and line[0] == "stopped" else time.monotonic()
        _, err = proc.communicate(timeout=300)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"load client failed ({proc.returncode}): {err[-3000:]}")
    result = json.loads(result_path.read_text(encoding="utf-8"))
    result_path.unlink()
    return ClientRun(measuring, stopped, result)


# -- the deployment ---------------------------------------------------------------------------------------


class Deployment:
    """The database, the Airflow home with its task instances, the receivers and the servers."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.pg: Any = None
        self.database = "SQLite"
        self.servers: dict[str, ApiServer] = {}
        self.dogstatsd = DogStatsdReceiver()
        self.otlp = OtlpReceiver()
        #: Everything the load generator got back from the OTLP server so far (its counts are cumulative).
        self.otlp_sent: Counter[Key] = Counter()
        clients = max(*cfg.concurrencies, cfg.fault_clients)
        url = self._postgres()
        self.home = AirflowHome(Path(tempfile.mkdtemp(prefix="store-metrics-load-")), url or "")
        self.workdir = self.home.path / "load"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.clients, self.setup_s = prepare_clients(self.home, clients)

    def _postgres(self) -> str | None:
        why = ThrowawayPostgres.unavailable()
        if why:
            self.database = f"SQLite (no PostgreSQL here: {why})"
            return None
        self.pg = ThrowawayPostgres()
        self.pg.init()
        version = subprocess.run(
            [self.pg.pg_ctl, "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        self.database = f"PostgreSQL ({version}, fsync off), psycopg2"
        return str(self.pg.url)

    def server(self, name: str, settings: dict[str, str]) -> ApiServer:
        server = ApiServer(
            name,
            self.home,
            {"AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": f"{self.cfg.flush_interval:g}", **settings},
            WORKERS,
        )
        self.servers[name] = server
        server.start()
        return server

    def dogstatsd_settings(self) -> dict[str, str]:
        return {
            "AIRFLOW__STORE_METRICS__BACKEND": "dogstatsd",
            "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
            "AIRFLOW__STORE_METRICS__PORT": str(self.dogstatsd.port),
        }

    def otel_settings(self) -> dict[str, str]:
        return {
            "AIRFLOW__STORE_METRICS__BACKEND": "otel",
            "AIRFLOW__STORE_METRICS__OTEL_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": self.otlp.endpoint,
        }

    def my_pids(self) -> set[int]:
        pids = {os.getpid()}
        for server in self.servers.values():
            pids |= {p.pid for p in server.processes()}
        return pids

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.dogstatsd.close()
        self.otlp.close()
        if self.pg is not None:
            self.pg.close()


# -- main blocks: on vs off -------------------------------------------------------------------------------


def _exactness(before: dict[str, Any], after: dict[str, Any], run: ClientRun) -> Exactness:
    server_counts = after["requests"] - before["requests"]
    client_counts = run.counts()
    return Exactness(
        exact=server_counts == client_counts,
        counted=sum(server_counts.values()),
        sent=sum(client_counts.values()),
        mismatch={
            _key_str(k): [client_counts.get(k, 0), server_counts.get(k, 0)]
            for k in set(server_counts) | set(client_counts)
            if server_counts.get(k, 0) != client_counts.get(k, 0)
        },
        by_key={_key_str(k): v for k, v in sorted(client_counts.items())},
        stall_max_ms=after["stall_max_ms"],
        long_stalls=after["long_stalls"] - before["long_stalls"],
    )


def main_block(dep: Deployment, arm: str, concurrency: int, index: int) -> Block:
    cfg = dep.cfg
    server = dep.servers[arm]
    other = dep.servers["off" if arm == "on" else "on"]
    # What earlier requests (a warm-up, the block before) counted must have arrived before this
    # block's counts start, or it would be taken for this block's.
    dep.dogstatsd.settle(cfg.settle, 30)
    before = dep.dogstatsd.snapshot()
    dep.dogstatsd.reset_stall_max()
    start: dict[str, float] = {}

    def at_measuring(t0: float) -> None:
        start.update(rss=server.rss(), cpu=server.cpu(), other_cpu=other.cpu(), load=os.getloadavg()[0])

    run = drive(
        server,
        dep.clients[:concurrency],
        seconds=cfg.seconds,
        warmup=cfg.warmup,
        big_every=cfg.big_every,
        workdir=dep.workdir,
        at_measuring=at_measuring,
    )
    rss_end, cpu_end, other_cpu, load_end = server.rss(), server.cpu(), other.cpu(), os.getloadavg()[0]
    dep.dogstatsd.settle(cfg.settle, 30)
    # Requests sent in the measured window (the last ones are answered after it: their time counts
    # in CPU and latency, not in the window's length).
    window = run.window(run.measuring, run.stop_at)
    block = Block(
        index=index,
        arm=arm,
        concurrency=concurrency,
        window=window,
        rss_start=int(start["rss"]),
        rss_end=rss_end,
        cpu_ms_per_request=(cpu_end - start["cpu"]) * 1000.0 / max(window["requests"], 1),
        idle_server_cpu_percent=(other_cpu - start["other_cpu"]) / window["seconds"] * 100.0,
        load_average=[start["load"], load_end],
        failures=run.result["failures"],
        exactness=_exactness(before, dep.dogstatsd.snapshot(), run) if arm == "on" else None,
    )
    exact = f", exact {block['exactness']['exact']}" if block["exactness"] else ""
    log(
        f"  load: {arm:3} {concurrency:2} clients: {window['rps']:.1f} req/s, p99 {window['p99_ms']:.0f} ms, "
        f"5xx {window['status'].get('5xx', 0)}, load {start['load']:.1f}{exact}"
    )
    return block


def schedule(cfg: Config) -> list[tuple[str, int]]:
    """(arm, concurrency) per block: on, off, on, off at the first concurrency; off, on, ... at the next."""
    blocks = []
    for i, concurrency in enumerate(cfg.concurrencies):
        first, second = ("on", "off") if i % 2 == 0 else ("off", "on")
        for _ in range(cfg.rounds):
            blocks += [(first, concurrency), (second, concurrency)]
    return blocks


# -- faults -----------------------------------------------------------------------------------------------


@dataclass
class Fault:
    name: str
    server: str
    apply: Callable[[], None]
    recover: Callable[[], None]
    #: Where the server's counts are read: "dogstatsd" (deltas), "otlp" (cumulative) or "none"
    #: (the plugin is off: nothing is counted).
    receiver: str
    #: What delivery promises here (the page's wording).
    promise: str
    #: For a worker kill: what the fault noted (the killed pid, when its successor served).
    kill: dict[str, Any] | None = None


def _run_fault(dep: Deployment, fault: Fault) -> tuple[ClientRun, dict[str, float]]:
    """The clients for three phases; the fault applied after the first and recovered after the second."""
    cfg = dep.cfg
    times: dict[str, float] = {}

    def during(t0: float) -> None:
        time.sleep(max(0.0, t0 + cfg.phase - time.monotonic()))
        times["fault"] = time.monotonic()
        fault.apply()
        time.sleep(max(0.0, t0 + 2 * cfg.phase - time.monotonic()))
        times["recover"] = time.monotonic()
        fault.recover()

    run = drive(
        dep.servers[fault.server],
        dep.clients[: cfg.fault_clients],
        seconds=3 * cfg.phase,
        warmup=cfg.warmup,
        big_every=cfg.big_every,
        workdir=dep.workdir,
        during=during,
    )
    return run, times


def _server_counts(
    dep: Deployment, fault: Fault, before: Counter[Key], client: Counter[Key]
) -> tuple[Counter[Key], Counter[Key]]:
    """(client counts, server counts) once the server has delivered everything: the deltas the
    DogStatsD receiver got during the block, or the latest cumulative values received over OTLP."""
    if fault.receiver == "dogstatsd":
        dep.dogstatsd.settle(dep.cfg.settle, 60)
        return client, dep.dogstatsd.snapshot()["requests"] - before
    # Cumulative: the latest value of every series is the worker's total so far; the fault server
    # served only fault blocks, so compare with everything the clients sent to it.
    expected = dep.otlp_sent + client
    dep.otlp_sent = expected
    poll(lambda: otlp_requests(dep.otlp) == expected, max(30.0, dep.cfg.settle * 10), 0.2)
    settle(lambda: otlp_requests(dep.otlp), dep.cfg.settle, 30)
    return expected, otlp_requests(dep.otlp)


def fault_block(dep: Deployment, fault: Fault) -> FaultResult:
    server = dep.servers[fault.server]
    log_before = server.log_size()
    dep.dogstatsd.settle(dep.cfg.settle, 30)  # the block before has delivered everything
    before = dep.dogstatsd.snapshot()["requests"]
    run, times = _run_fault(dep, fault)
    phases = {
        "before": run.window(run.measuring, times["fault"]),
        "during": run.window(times["fault"], times["recover"]),
        "after": run.window(times["recover"], run.stop_at),
    }
    base = phases["before"]["rps"]
    bounds: dict[str, Any] = {"bound": 0, "estimate": 0, "since_last_flush_s": None}
    if fault.kill is not None and fault.receiver != "none":
        bounds.update(_loss_bound(dep, run, fault.kill, times["fault"]))
    elif fault.receiver == "dogstatsd":
        bounds["bound"] = _udp_loss_bound(dep, run, times["fault"])
    counts = NOTHING_COUNTED  # the plugin is off: nothing to compare
    if fault.receiver != "none":
        counts = _compare(*_server_counts(dep, fault, before, run.counts()))
    lines = problem_lines(server.log_since(log_before))
    result = FaultResult(
        name=fault.name,
        server=fault.server,
        promise=fault.promise,
        phases=phases,
        ratio_during=phases["during"]["rps"] / base if base else 0.0,
        ratio_after=phases["after"]["rps"] / base if base else 0.0,
        failures=run.result["failures"],
        **counts,
        bound=int(bounds["bound"] or 0),
        estimate=int(bounds["estimate"] or 0),
        since_last_flush_s=bounds["since_last_flush_s"],
        log_lines=lines,
        problems=dict(problem_kinds(lines)),
        killed_pid=None,
        replaced_after_s=None,
    )
    log(
        f"  load: fault {fault.name}: {base:.1f} / {phases['during']['rps']:.1f} / "
        f"{phases['after']['rps']:.1f} "
        f"req/s, log lines {len(lines)}, lost {result['lost_total']}, doubled {result['doubled_total']}"
    )
    return result


def _loss_bound(dep: Deployment, run: ClientRun, kill: dict[str, Any], killed_at: float) -> dict[str, Any]:
    """What a killed worker can have lost: what it counted after the last flush it sent.

    The client cannot tell which worker answered, and the receiver sees a flush arrive a little
    after the worker drained its counts for it. So two figures, both over every answer the
    clients got (both workers): answered since the killed worker's last flush arrived (about what
    it lost), and answered since the flush before that one arrived, which is an upper bound (the
    last flush drained its counts after the one before it had arrived; a request is counted
    before its answer reaches the client).
    """
    flushes = [t for t in dep.dogstatsd.flushes_of(kill["worker"]) if t <= killed_at]
    if len(flushes) < 2:
        return {"bound": 0, "estimate": 0, "since_last_flush_s": None}
    return {
        "estimate": run.answered(flushes[-1], killed_at),
        "bound": run.answered(flushes[-2], killed_at),
        "since_last_flush_s": killed_at - flushes[-1],
    }


def _udp_loss_bound(dep: Deployment, run: ClientRun, closed_at: float) -> int:
    """What closing the receiver's port can lose: each worker's first flush after the close.

    The kernel takes that datagram and learns of the closed port only from the ICMP answer; every
    later flush is refused (its probe is) and kept (``store_metrics.backends.line_backend``). That flush
    carries what the worker counted since its last flush that arrived, so the loss is at most
    what was answered (both workers) from the earliest of the workers' last arrived flushes to
    two flush intervals after the close (one interval until the lost flush, one for a late one).
    """
    interval = dep.cfg.flush_interval
    with dep.dogstatsd.lock:
        per_worker = [list(ts) for ts in dep.dogstatsd.flushes.values()]
    # Workers still flushing when the port closed (not the ones killed in earlier blocks).
    last = [
        max(t for t in ts if t <= closed_at)
        for ts in per_worker
        if any(closed_at - 3 * interval <= t <= closed_at for t in ts)
    ]
    return run.answered(min(last), closed_at + 2 * interval) if last else 0


NOTHING_COUNTED = Compared(client_total=0, server_total=0, lost_total=0, doubled_total=0, exact=True)


def _compare(client_counts: Counter[Key], server_counts: Counter[Key]) -> Compared:
    """What the server lost (counted less than the clients got back) and doubled, in all."""
    lost = sum((client_counts - server_counts).values())
    doubled = sum((server_counts - client_counts).values())
    return Compared(
        client_total=sum(client_counts.values()),
        server_total=sum(server_counts.values()),
        lost_total=lost,
        doubled_total=doubled,
        exact=not lost and not doubled,
    )


def kill_a_worker(server: ApiServer, record: dict[str, Any]) -> Callable[[], None]:
    """A fault that SIGKILLs one of ``server``'s uvicorn workers and notes when its successor is up."""

    def apply() -> None:
        pids = sorted(server.worker_pids())
        offset = server.log_size()
        victim = pids[-1]
        worker = worker_label(victim)  # read before the kill: its slot file is then released
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        record.update({"killed_pid": victim, "workers_before": pids, "worker": worker})

        def watch() -> None:
            # uvicorn's supervisor notices the dead worker and starts a new one, which logs this
            # once its app has started (only the log since the kill is read, every 0.2 s).
            if poll(lambda: "Application startup complete" in server.log_since(offset), 120, 0.2):
                record["replaced_after_s"] = time.monotonic() - killed_at

        threading.Thread(target=watch, daemon=True).start()

    return apply


def faults(dep: Deployment) -> list[FaultResult]:
    rec = dep.dogstatsd
    udp = Fault(
        "DogStatsD receiver down (closed UDP port), then back",
        "on",
        rec.close,
        rec.reopen,
        "dogstatsd",
        "each worker's first flush after the close is lost (the kernel takes it, then learns of the "
        "closed port); every later one is refused, kept and sent once the port is back",
    )
    return [fault_block(dep, udp)]


#: The worker-kill blocks' arms: the plugin on, off, and the off server again (the A/A arm).
KILL_ARMS = ("on", "off", "aa")
KILL_NAMES = {
    "on": "one API server worker killed (SIGKILL), plugin on",
    "off": "one API server worker killed (SIGKILL), plugin off",
    "aa": "one API server worker killed (SIGKILL), plugin off, A/A",
}


def kill_schedule(cfg: Config) -> list[tuple[int, str]]:
    """(round, arm) per kill block: every round runs each arm once, the order rotated by one each
    round (on, off, aa; off, aa, on; aa, on, off; ...), so no arm always comes first or last."""
    out = []
    for r in range(cfg.kill_rounds):
        out += [(r, KILL_ARMS[(r + i) % len(KILL_ARMS)]) for i in range(len(KILL_ARMS))]
    return out


def kill_blocks(dep: Deployment) -> list[KillBlock]:
    """One API server worker SIGKILLed under load, interleaved: plugin on, off and off again.

    Each block waits for the killed worker's successor to serve (bounded) and then warms the
    server up, unmeasured, so every block kills a warm worker of a server with both workers up.
    """
    out = []
    for order, (round_, arm) in enumerate(kill_schedule(dep.cfg)):
        name = "on" if arm == "on" else "off"
        record: dict[str, Any] = {}
        kill = Fault(
            KILL_NAMES[arm],
            name,
            kill_a_worker(dep.servers[name], record),
            lambda: None,
            "dogstatsd" if arm == "on" else "none",
            "a killed worker loses what it counted since its last flush (about one flush interval)"
            if arm == "on"
            else "the same fault without the plugin, for comparison",
            kill=record,
        )
        result = fault_block(dep, kill)
        # Bounded: a successor that never serves leaves replaced_after_s None on the page.
        poll(functools.partial(dict.__contains__, record, "replaced_after_s"), 120, 0.2)
        result["killed_pid"] = record.get("killed_pid")
        result["replaced_after_s"] = record.get("replaced_after_s")
        warm(dep, [name], together=False)
        out.append(KillBlock(**result, arm=arm, round=round_, order=order, worker=record.get("worker", "")))
    return out


#: The plugin's set-up in a fresh API server worker: its server side imported (the root
#: middleware's module), the worker's metrics made from ``[store_metrics]`` and the stall monitor
#: started on a running loop: what a respawned worker runs for the plugin before it serves.
_SETUP_PROBE = """
import asyncio, time
import airflow.configuration  # Airflow's own, imported by every worker before the plugin
t0 = time.perf_counter()
from store_metrics.api_server import server_metrics
metrics = server_metrics()
async def watch():
    metrics.watch(asyncio.get_running_loop())
asyncio.run(watch())
print((time.perf_counter() - t0) * 1000.0)
"""


def plugin_setup_ms(dep: Deployment, tries: int) -> list[float]:
    """``_SETUP_PROBE`` in a fresh process with the *on* server's settings, ``tries`` times."""
    out = []
    for _ in range(tries):
        proc = subprocess.run(
            [sys.executable, "-c", _SETUP_PROBE],
            cwd=REPO_ROOT,
            env=dep.servers["on"].env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        out.append(float(proc.stdout.split()[-1]))
    return out


def otlp_faults(dep: Deployment) -> list[FaultResult]:
    otlp = dep.otlp
    silent: list[SilentTcpServer] = []

    def hang() -> None:
        otlp.close()
        silent.append(SilentTcpServer(otlp.port))

    def unhang() -> None:
        silent.pop().close()
        otlp.reopen()

    promise = "cumulative: the first export after recovery carries every count, once"
    return [
        fault_block(
            dep, Fault("OTLP endpoint refuses, then back", "otel", otlp.close, otlp.reopen, "otlp", promise)
        ),
        fault_block(
            dep,
            Fault(
                "OTLP endpoint accepts and never answers, then back", "otel", hang, unhang, "otlp", promise
            ),
        ),
    ]


# -- the run ----------------------------------------------------------------------------------------------


def warm(dep: Deployment, names: Sequence[str], *, together: bool) -> None:
    """Load each server for ``server_warmup`` seconds, unmeasured (all at once if ``together``).

    A fresh worker's first Execution API requests are slow (Airflow's lazy set-up): no block
    should pay for them. What the OTLP server's clients got back is noted (its counts are
    cumulative, so every later comparison includes them).
    """
    cfg = dep.cfg
    clients = dep.clients[: cfg.fault_clients]
    results: dict[str, ClientRun] = {}

    def one(name: str) -> None:
        results[name] = drive(
            dep.servers[name],
            clients,
            seconds=cfg.server_warmup,
            warmup=0.0,
            big_every=cfg.big_every,
            workdir=dep.workdir,
        )

    if together:
        threads = [threading.Thread(target=one, args=(name,)) for name in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for name in names:
            one(name)
    if "otel" in results:
        dep.otlp_sent += results["otel"].counts()


def _start_servers(dep: Deployment, quick: bool) -> tuple[ApiServer, ApiServer]:
    on = dep.server("on", dep.dogstatsd_settings())
    off = dep.server("off", {**dep.dogstatsd_settings(), "AIRFLOW__STORE_METRICS__SERVER_METRICS": "false"})
    if quick:  # the smoke run starts the OTLP fault server now too (saves a start; nothing judged)
        dep.server("otel", dep.otel_settings())
    for server in list(dep.servers.values()):
        server.wait_ready()
    return on, off


def _measure(dep: Deployment, quick: bool) -> Measured:
    """Every stage of the run, on a deployment that is ready."""
    sample = 0.5 if quick else 1.0
    others_at_start = busiest_other_processes(dep.my_pids(), sample)
    on, off = _start_servers(dep, quick)
    startup = {name: s.startup_s for name, s in dep.servers.items()}
    log("  load: servers started")
    warm(dep, list(dep.servers), together=quick)
    rss_after_warmup = {"on": on.rss(), "off": off.rss()}
    blocks = [main_block(dep, arm, c, i) for i, (arm, c) in enumerate(schedule(dep.cfg))]
    rss_after_blocks = {"on": on.rss(), "off": off.rss()}
    results = faults(dep)
    kills = kill_blocks(dep)
    setup_ms = plugin_setup_ms(dep, 3 if quick else 7)
    off.stop()
    on.stop()
    tracebacks = sum(s.log_text().count("store_metrics/") for s in (on, off))
    if not quick:
        dep.server("otel", dep.otel_settings()).wait_ready()
        startup["otel"] = dep.servers["otel"].startup_s
        warm(dep, ["otel"], together=False)
    results += otlp_faults(dep)
    tracebacks += dep.servers["otel"].log_text().count("store_metrics/")
    return Measured(
        setup_s=dep.setup_s,
        others_at_start=others_at_start,
        others_at_end=busiest_other_processes(dep.my_pids(), sample),
        startup_s=startup,
        rss_after_warmup=rss_after_warmup,
        rss_after_blocks=rss_after_blocks,
        blocks=blocks,
        faults=results,
        kills=kills,
        plugin_setup_ms=setup_ms,
        plugin_in_tracebacks=tracebacks,
    )


def run(quick: bool) -> Load:
    cfg = QUICK if quick else FULL
    dep = Deployment(cfg)
    try:
        measured = _measure(dep, quick)
    finally:
        dep.close()
    if quick:  # a smoke run leaves nothing behind
        shutil.rmtree(dep.home.path, ignore_errors=True)
    else:  # the servers' logs stay, for a second look
        log(f"  load: server logs in {dep.home.path}")
    return Load(
        config=asdict(cfg),
        quick=quick,
        database=dep.database,
        **measured,
    )
