"""7. The API server under sustained load, and faults while under load.

A real ``airflow api-server`` (uvicorn, ``--workers 2``; the plugin's root middleware and stall
monitor loaded from the installed entry point) on a throw-away PostgreSQL (SQLite when no
PostgreSQL can be started here), driven over HTTP by a real asynchronous load generator in its
own process (:mod:`benchmarks.load_client`: ``httpx.AsyncClient``, one coroutine per client,
closed loop) with valid Execution API tokens for real task instances of a real DAG run
(:mod:`benchmarks.load_setup`). Each client owns one task instance and one asset, and repeats a
fixed mix (:func:`benchmarks.load_client.mix`): task and asset store PUT of 0.4 KB and 59 KB
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
  receiver's port closed and reopened; one API server worker killed with SIGKILL (uvicorn's
  supervisor starts a new one), on the *on* and on the *off* server; an OTLP endpoint that
  refuses and one that accepts and never answers (a third server with ``backend = otel``,
  OTLP/HTTP to a receiver in this process that decodes every export). Throughput and latency per
  phase, store-metrics' warning and error lines in the server log, and the counts delivered
  once everything has settled.

    python -m benchmarks.load [--quick]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .common import REPO_ROOT, SilentTcpServer, log, md_table, median
from .load_airflow import (
    STALL_REPORT,
    AirflowHome,
    ApiServer,
    DogStatsdReceiver,
    OtlpReceiver,
    busiest_other_processes,
    problem_kinds,
    problem_lines,
    wait_until,
)
from .stalls import SIZES_BYTES, size_label

WORKERS = 2
MiB = 1024 * 1024


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
)

Key = tuple[str, str, str]  # store, operation, outcome


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

    def window(self, start: float, end: float) -> dict[str, Any]:
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
        return {
            "seconds": seconds,
            "requests": len(lat),
            "rps": len(lat) / seconds,
            "p50_ms": percentile(lat, 0.50),
            "p99_ms": percentile(lat, 0.99),
            "p999_ms": percentile(lat, 0.999),
            "status": dict(statuses),
        }

    def counts(self) -> Counter[Key]:
        return Counter({(c[0], c[1], c[2]): int(c[3]) for c in self.result["counts"]})


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
        [sys.executable, "-m", "benchmarks.load_client", str(plan_path), str(result_path)],
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
        self.home = AirflowHome(clients, url)
        self.workdir = self.home.root / "load"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.setup_s = self.home.prepare()

    def _postgres(self) -> str | None:
        from .inventory import ThrowawayPostgres

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


def _server_sample(server: ApiServer) -> tuple[int, float]:
    return server.rss(), server.cpu()


def main_block(dep: Deployment, arm: str, concurrency: int, index: int) -> dict[str, Any]:
    cfg = dep.cfg
    server = dep.servers[arm]
    other = dep.servers["off" if arm == "on" else "on"]
    # What earlier requests (a warm-up, the block before) counted must have arrived before this
    # block's counts start, or it would be taken for this block's.
    dep.dogstatsd.settle(cfg.settle, 30)
    before = dep.dogstatsd.snapshot()
    dep.dogstatsd.reset_stall_max()
    samples: dict[str, Any] = {}

    def at_measuring(t0: float) -> None:
        samples["start"] = _server_sample(server)
        samples["other_cpu_start"] = other.cpu()
        samples["load_start"] = os.getloadavg()[0]

    run = drive(
        server,
        dep.home.clients[:concurrency],
        seconds=cfg.seconds,
        warmup=cfg.warmup,
        big_every=cfg.big_every,
        workdir=dep.workdir,
        at_measuring=at_measuring,
    )
    end = _server_sample(server)
    other_cpu = other.cpu() - samples["other_cpu_start"]
    load_end = os.getloadavg()[0]
    dep.dogstatsd.settle(cfg.settle, 30)
    after = dep.dogstatsd.snapshot()
    # Requests sent in the measured window (the last ones are answered after it: their time counts
    # in CPU and latency, not in the window's length).
    window = run.window(run.measuring, run.stop_at)
    rss0, cpu0 = samples["start"]
    rss1, cpu1 = end
    block: dict[str, Any] = {
        "index": index,
        "arm": arm,
        "concurrency": concurrency,
        **window,
        "rss_start": rss0,
        "rss_end": rss1,
        "cpu_s": cpu1 - cpu0,
        "cpu_ms_per_request": (cpu1 - cpu0) * 1000.0 / max(window["requests"], 1),
        "idle_server_cpu_percent": other_cpu / window["seconds"] * 100.0,
        "load_average": [samples["load_start"], load_end],
        "failures": run.result["failures"],
    }
    if arm == "on":
        server_counts = after["requests"] - before["requests"]
        client_counts = run.counts()
        block["exact"] = server_counts == client_counts
        block["counted"] = sum(server_counts.values())
        block["sent"] = sum(client_counts.values())
        block["mismatch"] = {
            _key_str(k): [client_counts.get(k, 0), server_counts.get(k, 0)]
            for k in set(server_counts) | set(client_counts)
            if server_counts.get(k, 0) != client_counts.get(k, 0)
        }
        block["by_key"] = {_key_str(k): v for k, v in sorted(client_counts.items())}
        block["stall_max_ms"] = after["stall_max_ms"]
        block["long_stalls"] = after["long_stalls"] - before["long_stalls"]
    log(
        f"  load: {arm:3} {concurrency:2} clients: {window['rps']:.1f} req/s, p99 {window['p99_ms']:.0f} ms, "
        f"5xx {window['status'].get('5xx', 0)}, load {samples['load_start']:.1f}"
        + (f", exact {block['exact']}" if arm == "on" else "")
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


def fault_block(dep: Deployment, fault: Fault) -> dict[str, Any]:
    cfg = dep.cfg
    server = dep.servers[fault.server]
    log_before = server.log_size()
    dep.dogstatsd.settle(cfg.settle, 30)  # the block before has delivered everything
    before = dep.dogstatsd.snapshot()
    times: dict[str, float] = {}

    def during(t0: float) -> None:
        time.sleep(max(0.0, t0 + cfg.phase - time.monotonic()))
        times["fault"] = time.monotonic()
        fault.apply()
        time.sleep(max(0.0, t0 + 2 * cfg.phase - time.monotonic()))
        times["recover"] = time.monotonic()
        fault.recover()

    run = drive(
        server,
        dep.home.clients[: cfg.fault_clients],
        seconds=3 * cfg.phase,
        warmup=cfg.warmup,
        big_every=cfg.big_every,
        workdir=dep.workdir,
        during=during,
    )
    phases = {
        "before": run.window(run.measuring, times["fault"]),
        "during": run.window(times["fault"], times["recover"]),
        "after": run.window(times["recover"], run.stop_at),
    }
    client_counts = run.counts()
    out: dict[str, Any] = {
        "name": fault.name,
        "server": fault.server,
        "promise": fault.promise,
        "phases": phases,
        "ratio_during": phases["during"]["rps"] / phases["before"]["rps"] if phases["before"]["rps"] else 0.0,
        "ratio_after": phases["after"]["rps"] / phases["before"]["rps"] if phases["before"]["rps"] else 0.0,
        "failures": run.result["failures"],
        "sent": sum(client_counts.values()),
        "times": times,
    }
    if fault.kill is not None and fault.receiver != "none":
        out.update(_loss_bound(dep, run, fault.kill, times["fault"]))
    elif fault.receiver == "dogstatsd":
        out.update(_udp_loss_bound(dep, run, times["fault"]))
    server_counts: Counter[Key] | None
    if fault.receiver == "none":
        out.update({"client_total": out["sent"], "server_total": 0, "lost": {}, "lost_total": 0})
        out.update({"doubled": {}, "doubled_total": 0, "exact": True})
        server_counts = None
    elif fault.receiver == "dogstatsd":
        dep.dogstatsd.settle(cfg.settle, 60)
        server_counts = dep.dogstatsd.snapshot()["requests"] - before["requests"]
        out["counts_compared"] = "deltas received by the DogStatsD receiver during the block"
    else:
        # Cumulative: the latest value of every series is the worker's total so far; the fault
        # server served only fault blocks, so compare with everything the clients sent to it.
        expected = dep.otlp_sent + client_counts
        dep.otlp_sent = expected
        wait_until(lambda: dep.otlp.requests() == expected, max(30.0, cfg.settle * 10), 0.2)
        settle_otlp(dep, cfg.settle)
        server_counts = dep.otlp.requests()
        client_counts = expected
        out["counts_compared"] = "latest cumulative values received over OTLP, all blocks of this server"
    if server_counts is not None:
        out.update(_compare(client_counts, server_counts))
    text = server.log_since(log_before)
    out["log_lines"] = problem_lines(text)
    out["problems"] = dict(problem_kinds(out["log_lines"]))
    out["died_lines"] = text.count("died")
    log(
        f"  load: fault {fault.name}: {phases['before']['rps']:.1f} / {phases['during']['rps']:.1f} / "
        f"{phases['after']['rps']:.1f} req/s, log lines {len(out['log_lines'])}, lost {out['lost_total']}, "
        f"doubled {out['doubled_total']}"
    )
    return out


def _answered(run: ClientRun, since: float, until: float) -> int:
    """Requests the clients got an answer to between ``since`` and ``until`` (both workers)."""
    r = run.result
    return sum(
        1
        for t, ms, status in zip(r["start"], r["latency_ms"], r["status"], strict=True)
        if status and since <= t + ms / 1000.0 <= until
    )


def _loss_bound(dep: Deployment, run: ClientRun, kill: dict[str, Any], killed_at: float) -> dict[str, Any]:
    """What a killed worker can have lost: what it counted after the last flush it sent.

    The client cannot tell which worker answered, and the receiver sees a flush arrive a little
    after the worker drained its counts for it. So two figures, both over every answer the
    clients got (both workers): answered since the killed worker's last flush arrived (about what
    it lost), and answered since the flush before that one arrived, which is an upper bound (the
    last flush drained its counts after the one before it had arrived; a request is counted
    before its answer reaches the client).
    """
    flushes = [t for t in dep.dogstatsd.flushes_of(kill["killed_pid"]) if t <= killed_at]
    if len(flushes) < 2:
        return {"bound": 0, "estimate": 0, "since_last_flush_s": None}
    return {
        "estimate": _answered(run, flushes[-1], killed_at),
        "bound": _answered(run, flushes[-2], killed_at),
        "since_last_flush_s": killed_at - flushes[-1],
        "since_flush_before_s": killed_at - flushes[-2],
    }


def _udp_loss_bound(dep: Deployment, run: ClientRun, closed_at: float) -> dict[str, Any]:
    """What closing the receiver's port can lose: each worker's first flush after the close.

    The kernel takes that datagram and learns of the closed port only from the ICMP answer; every
    later flush is refused (its probe is) and kept (``store_metrics.backends.udp``). That flush
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
    if not last:
        return {"bound": 0}
    return {"bound": _answered(run, min(last), closed_at + 2 * interval)}


def _compare(client_counts: Counter[Key], server_counts: Counter[Key]) -> dict[str, Any]:
    lost = {
        _key_str(k): client_counts[k] - server_counts.get(k, 0)
        for k in client_counts
        if client_counts[k] > server_counts.get(k, 0)
    }
    doubled = {
        _key_str(k): server_counts[k] - client_counts.get(k, 0)
        for k in server_counts
        if server_counts[k] > client_counts.get(k, 0)
    }
    return {
        "client_total": sum(client_counts.values()),
        "server_total": sum(server_counts.values()),
        "lost": lost,
        "lost_total": sum(lost.values()),
        "doubled": doubled,
        "doubled_total": sum(doubled.values()),
        "exact": not lost and not doubled,
    }


def settle_otlp(dep: Deployment, quiet: float) -> None:
    last, since = dep.otlp.requests(), time.monotonic()
    deadline = since + 30
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = dep.otlp.requests()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def kill_a_worker(server: ApiServer, record: dict[str, Any]) -> Callable[[], None]:
    """A fault that SIGKILLs one of ``server``'s uvicorn workers and notes when its successor is up."""

    def apply() -> None:
        pids = sorted(server.worker_pids())
        offset = server.log_size()
        victim = pids[-1]
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        record.update({"killed_pid": victim, "workers_before": pids})

        def watch() -> None:
            # uvicorn's supervisor notices the dead worker and starts a new one, which logs this
            # once its app has started (only the log since the kill is read, every 0.2 s).
            if wait_until(lambda: "Application startup complete" in server.log_since(offset), 120, 0.2):
                record["replaced_after_s"] = time.monotonic() - killed_at

        threading.Thread(target=watch, daemon=True).start()

    return apply


def faults(dep: Deployment) -> list[dict[str, Any]]:
    out = []
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
    out.append(fault_block(dep, udp))
    for arm in ("on", "off"):
        record: dict[str, Any] = {}
        kill = Fault(
            f"one API server worker killed (SIGKILL), plugin {arm}",
            arm,
            kill_a_worker(dep.servers[arm], record),
            lambda: None,
            "dogstatsd" if arm == "on" else "none",
            "a killed worker loses what it counted since its last flush (about one flush interval)"
            if arm == "on"
            else "the same fault without the plugin, for comparison",
            kill=record,
        )
        result = fault_block(dep, kill)
        if dep.cfg.wait_for_replacement:
            wait_until(functools.partial(dict.__contains__, record, "replaced_after_s"), 120, 0.2)
        result.update(record)
        out.append(result)
    return out


def otlp_faults(dep: Deployment) -> list[dict[str, Any]]:
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
    clients = dep.home.clients[: cfg.fault_clients]
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


class Stages:
    """Wall time of each stage of the run, for the page and the progress log."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._t = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.times[name] = now - self._t
        self._t = now
        log(f"  load: {name}: {self.times[name]:.1f} s")


def run(quick: bool) -> dict[str, Any]:
    cfg = QUICK if quick else FULL
    started = time.monotonic()
    stages = Stages()
    dep = Deployment(cfg)
    result: dict[str, Any] = {"config": asdict(cfg), "quick": quick, "database": dep.database}
    try:
        result["setup_s"] = dep.setup_s
        stages.done("database, DAG run, tokens")
        sample = 0.5 if quick else 1.0
        result["others_at_start"] = busiest_other_processes(dep.my_pids(), sample)
        on = dep.server("on", dep.dogstatsd_settings())
        off = dep.server(
            "off", {**dep.dogstatsd_settings(), "AIRFLOW__STORE_METRICS__SERVER_METRICS": "false"}
        )
        if quick:  # the smoke run starts the OTLP fault server now too (saves a start; nothing judged)
            dep.server("otel", dep.otel_settings())
        for server in list(dep.servers.values()):
            server.wait_ready()
        result["startup_s"] = {name: s.startup_s for name, s in dep.servers.items()}
        stages.done("servers started")
        warm(dep, list(dep.servers), together=quick)
        result["rss_after_warmup"] = {"on": on.rss(), "off": off.rss()}
        stages.done("warm-up")
        result["blocks"] = [main_block(dep, arm, c, i) for i, (arm, c) in enumerate(schedule(cfg))]
        result["rss_after_blocks"] = {"on": on.rss(), "off": off.rss()}
        stages.done("on/off blocks")
        result["faults"] = faults(dep)
        stages.done("faults on the DogStatsD servers")
        off.stop()
        on.stop()
        result["plugin_in_tracebacks"] = sum(s.log_text().count("store_metrics/") for s in (on, off))
        if not quick:
            dep.server("otel", dep.otel_settings()).wait_ready()
            result["startup_s"]["otel"] = dep.servers["otel"].startup_s
            warm(dep, ["otel"], together=False)
        result["faults"] += otlp_faults(dep)
        result["plugin_in_tracebacks"] += dep.servers["otel"].log_text().count("store_metrics/")
        stages.done("faults on the OTLP server")
        result["others_at_end"] = busiest_other_processes(dep.my_pids(), sample)
    finally:
        dep.close()
    result["stages"] = stages.times
    result["duration_s"] = time.monotonic() - started
    if quick:  # a smoke run leaves nothing behind
        shutil.rmtree(dep.home.root, ignore_errors=True)
        return result
    # The raw figures and the servers' logs stay next to each other, for a second look.
    saved = dep.home.root / "load-result.json"
    saved.write_text(json.dumps(result, default=str, indent=1), encoding="utf-8")
    log(f"  load: figures in {saved}, server logs in {dep.home.root}")
    return result


# -- the page ---------------------------------------------------------------------------------------------

TARGET_THROUGHPUT = 0.98
TARGET_P99 = 1.05
TARGET_FAULT_THROUGHPUT = 0.95


def _verdict(met: bool | None) -> str:
    return "**not resolved**" if met is None else ("**met**" if met else "**missed**")


def _arm(blocks: list[dict[str, Any]], arm: str, concurrency: int) -> list[dict[str, Any]]:
    return [b for b in blocks if b["arm"] == arm and b["concurrency"] == concurrency]


def _spread(values: list[float]) -> float:
    """Largest over smallest (``nan`` with fewer than two values)."""
    return max(values) / min(values) if len(values) >= 2 and min(values) > 0 else float("nan")


def _largest(*values: float) -> float:
    return max((v for v in values if not math.isnan(v)), default=math.nan)


def _ratio_verdict(ratio: float, met: bool, noise: float) -> str:
    """met; else *not resolved* when two blocks of one arm differ by more than on and off do."""
    if met:
        return _verdict(True)
    if not math.isnan(noise) and abs(1 - ratio) <= noise - 1:
        return _verdict(None)
    return _verdict(False)


def _div(a: float, b: float) -> float:
    """``a / b``, or NaN when a block measured nothing (a quick run on a machine too busy to answer)."""
    return a / b if b else math.nan


def summary(result: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Per concurrency: medians per arm and the on/off ratios (of the medians)."""
    out: dict[int, dict[str, float]] = {}
    blocks = result["blocks"]
    for c in result["config"]["concurrencies"]:
        on, off = _arm(blocks, "on", c), _arm(blocks, "off", c)
        s: dict[str, float] = {}
        for field_ in ("rps", "p50_ms", "p99_ms", "p999_ms", "cpu_ms_per_request"):
            s[f"on_{field_}"] = median(b[field_] for b in on)
            s[f"off_{field_}"] = median(b[field_] for b in off)
        s["rps_ratio"] = _div(s["on_rps"], s["off_rps"])
        s["p99_ratio"] = _div(s["on_p99_ms"], s["off_p99_ms"])
        s["cpu_ratio"] = _div(s["on_cpu_ms_per_request"], s["off_cpu_ms_per_request"])
        # The same statistic between the two blocks of one arm: what this machine moves by itself.
        s["off_rps_spread"] = _spread([b["rps"] for b in off])
        s["on_rps_spread"] = _spread([b["rps"] for b in on])
        s["off_p99_spread"] = _spread([b["p99_ms"] for b in off])
        s["on_p99_spread"] = _spread([b["p99_ms"] for b in on])
        s["rps_noise"] = _largest(s["off_rps_spread"], s["on_rps_spread"])
        s["p99_noise"] = _largest(s["off_p99_spread"], s["on_p99_spread"])
        out[c] = s
    return out


def _growth(b: dict[str, Any]) -> float:
    return float(b["rss_end"] - b["rss_start"])


def render_section(
    result: dict[str, Any], middleware_ns: float | None = None
) -> tuple[str, list[list[str]], list[str]]:
    """The page's section 7, its verdict rows and its "why" notes.

    ``middleware_ns``: the middleware's added time per state store request from section 4, if run.
    """
    cfg = result["config"]
    blocks = result["blocks"]
    sums = summary(result)
    verdicts: list[list[str]] = []
    why: list[str] = []

    for c, s in sums.items():
        verdicts.append(
            [
                f"7. load, {c} clients: throughput plugin on / off ≥ {TARGET_THROUGHPUT}",
                f"{s['rps_ratio']:.3f} ({s['on_rps']:.1f} / {s['off_rps']:.1f} req/s; two blocks of one "
                f"arm: up to {s['rps_noise']:.3f}x apart)",
                _ratio_verdict(s["rps_ratio"], s["rps_ratio"] >= TARGET_THROUGHPUT, s["rps_noise"]),
            ]
        )
        verdicts.append(
            [
                f"7. load, {c} clients: p99 latency on / off ≤ {TARGET_P99}",
                f"{s['p99_ratio']:.3f} ({s['on_p99_ms']:.0f} / {s['off_p99_ms']:.0f} ms; two blocks of one "
                f"arm: up to {s['p99_noise']:.3f}x apart)",
                _ratio_verdict(s["p99_ratio"], s["p99_ratio"] <= TARGET_P99, s["p99_noise"]),
            ]
        )
    on_blocks = [b for b in blocks if b["arm"] == "on"]
    off_blocks = [b for b in blocks if b["arm"] == "off"]
    on_5xx = sum(b["status"].get("5xx", 0) for b in on_blocks)
    off_5xx = sum(b["status"].get("5xx", 0) for b in off_blocks)
    through_plugin = result.get("plugin_in_tracebacks", 0)
    verdicts.append(
        [
            "7. load: zero 5xx caused by the plugin",
            f"5xx on {on_5xx}, off {off_5xx}; server log lines naming store_metrics/ code: {through_plugin}",
            _verdict(on_5xx == 0 and through_plugin == 0),
        ]
    )
    growth_on = median(_growth(b) for b in on_blocks)
    growth_off = median(_growth(b) for b in off_blocks)
    noise = max(abs(_growth(b)) for b in off_blocks) if off_blocks else 0.0
    verdicts.append(
        [
            f"7. load: RSS growth over a {cfg['seconds']:g} s block within the noise of off",
            f"median on {growth_on / MiB:+.1f} MiB, off {growth_off / MiB:+.1f} MiB "
            f"(largest |growth| of an off block {noise / MiB:.1f} MiB)",
            _verdict(growth_on - growth_off <= max(noise, MiB)),
        ]
    )
    exact = [b for b in on_blocks if b["exact"]]
    verdicts.append(
        [
            "7. load: server totals = client totals per (store, operation, outcome), every block",
            f"{len(exact)} of {len(on_blocks)} blocks exact "
            f"({sum(b['counted'] for b in on_blocks):,} requests)",
            _verdict(len(exact) == len(on_blocks)),
        ]
    )
    for f in result["faults"]:
        verdicts.append(
            [
                f"7. fault, {f['name']}: throughput during ≥ {TARGET_FAULT_THROUGHPUT} of before",
                f"{f['ratio_during']:.3f} ({f['phases']['during']['rps']:.1f} / "
                f"{f['phases']['before']['rps']:.1f} req/s)",
                _verdict(f["ratio_during"] >= TARGET_FAULT_THROUGHPUT),
            ]
        )
    worst = {f["name"]: (_worst_problem(f), _processes(f)) for f in result["faults"]}
    verdicts.append(
        [
            "7. faults: at most one store-metrics log line per problem (and worker process)",
            "; ".join(f"{n}: {k} ({p} worker processes)" for n, (k, p) in worst.items()),
            _verdict(all(k <= p for k, p in worst.values())),
        ]
    )
    for f in result["faults"]:
        if f["server"] == "off":
            continue
        verdicts.append(_delivery_verdict(f))

    text = [
        "## 7. The API server under sustained load, and faults",
        "",
        "A real `airflow api-server` driven over HTTP by a real asynchronous load generator; method and "
        "modules: `benchmarks/load.py`, `load_client.py`, `load_setup.py`, `load_airflow.py`.",
        "",
        *_method(result),
        "",
        "### Plugin on vs off",
        "",
        *_main_tables(result, sums),
        "",
        "### Exactness under load",
        "",
        *_exactness(result),
        "",
        "### Faults under load",
        "",
        *_fault_tables(result),
    ]
    why += _findings(result, sums, middleware_ns)
    return "\n".join(text), verdicts, why


def _worst_problem(f: dict[str, Any]) -> int:
    """The most lines any one problem got during a fault block (stall reports aside)."""
    return max((n for kind, n in f["problems"].items() if kind != "stall report"), default=0)


def _processes(f: dict[str, Any]) -> int:
    """Worker processes that served during a fault block (a killed worker's successor is one more)."""
    return WORKERS + (1 if "killed_pid" in f else 0)


def _problem_text(f: dict[str, Any]) -> str:
    kinds = {k: n for k, n in f["problems"].items() if k != "stall report"}
    stalls = f["problems"].get("stall report", 0)
    text = ", ".join(str(n) for n in kinds.values()) or "0"
    return text + (f" (+{stalls} stall reports)" if stalls else "")


def _delivery_verdict(f: dict[str, Any]) -> list[str]:
    name = f"7. fault, {f['name']}: counts after recovery"
    if "UDP" in f["name"]:
        closed = f["phases"]["during"]["requests"]
        measured = (
            f"counted twice: {f['doubled_total']}; lost: {f['lost_total']:,} of {f['client_total']:,} "
            f"(each worker's first flush after the close: at most {f.get('bound', 0):,}); "
            f"{closed:,} answered while the port was closed"
        )
        return [
            name + ": lost only each worker's first flush after the close, none twice",
            measured,
            _verdict(f["doubled_total"] == 0 and f["lost_total"] <= f.get("bound", 0)),
        ]
    if "killed" in f["name"]:
        since = f.get("since_last_flush_s")
        gap = f"{since:.2f} s" if since is not None else "never"
        measured = (
            f"counted twice: {f['doubled_total']}; lost: {f['lost_total']} (answered since the killed "
            f"worker's last flush arrived, {gap} before the kill: {f.get('estimate', 0)}; since the "
            f"flush before it: {f['bound']})"
        )
        return [
            name + ": lost only what came after its last flush, none twice",
            measured,
            _verdict(f["doubled_total"] == 0 and f["lost_total"] <= f["bound"]),
        ]
    measured = (
        f"{f['server_total']:,} of {f['client_total']:,} counted; lost {f['lost_total']}, "
        f"twice {f['doubled_total']}"
    )
    return [name + " exactly once", measured, _verdict(f["exact"])]


def _mib(n: float) -> str:
    return f"{n / MiB:.0f}"


def _method(result: dict[str, Any]) -> list[str]:
    cfg = result["config"]
    sizes = ", ".join(size_label(n) for n in SIZES_BYTES)
    starts = ", ".join(f"{k} {v:.0f} s" for k, v in result["startup_s"].items())
    others = "; ".join(result.get("others_at_start") or []) or "nothing above 1% of a core"
    others_end = "; ".join(result.get("others_at_end") or []) or "nothing above 1% of a core"
    loads = [la for b in result["blocks"] for la in b["load_average"]]
    return [
        f"**Deployment.** `airflow api-server --workers {WORKERS}` (uvicorn; Airflow's own app, the "
        f"plugin from its entry point) on {result['database']}; a real DAG run of "
        f"`store_metrics_load` (one task and one asset per client) made by `airflow dags trigger`, "
        "and for each task instance a token from Airflow's `JWTGenerator` with the configured "
        "`[api_auth] jwt_secret` (`benchmarks/load_setup.py`). Two servers side by side: *on* (the "
        "plugin's server side, `backend = dogstatsd` to a UDP receiver in the benchmark process, "
        f"`flush_interval = {cfg['flush_interval']:g}`) and *off* (`server_metrics = false`). Two servers "
        "and alternating blocks, rather than a restart before each block: every block meets a warm, "
        "long-lived server (as in production), no block pays a cold start, and a third of the run "
        "is not spent starting servers; the idle server's CPU during the other's blocks is in the "
        f"table (it idles, apart from the stall monitor's ticks on *on*). Startup: {starts}; "
        f"Airflow home, DAG run and tokens: {result['setup_s']:.0f} s.",
        "",
        "**Load.** `benchmarks/load_client.py` in its own process: `httpx.AsyncClient`, one "
        "coroutine per client, each sending its next request when the last one was answered. Each "
        "client has its own task instance and asset and repeats a fixed cycle: task store PUT "
        "0.4 KB, GET (found), GET (absent), asset store PUT 0.4 KB, GET (found), GET (absent), "
        "task PUT 59 KB, GET (found), task DELETE, asset DELETE; every "
        f"{cfg['big_every']}th cycle adds a task PUT and GET of 689 KB and a clear of both stores "
        f"(value sizes {sizes}, the async-routes proposal's). Blocks of {cfg['seconds']:g} s "
        f"measured after {cfg['warmup']:g} s of warm-up, alternating on/off: "
        + ", ".join(f"{a} {c}" for a, c in schedule(Config(**cfg)))
        + f"; each server had {cfg['server_warmup']:g} s of load before its first block. Latency is "
        "the client's (request sent to body read); CPU is the server's processes' user + system "
        "time during the measured window (psutil), per request; RSS is the sum over its processes.",
        "",
        f"**The machine.** 2 cores shared with other engineers' jobs. Load average (1 min) during the "
        f"blocks: {min(loads):.1f} to {max(loads):.1f}. Busiest other processes at the start: "
        f"{others}. At the end: {others_end}.",
    ]


def _main_tables(result: dict[str, Any], sums: dict[int, dict[str, float]]) -> list[str]:
    rows = []
    for b in result["blocks"]:
        rows.append(
            [
                str(b["index"] + 1),
                b["arm"],
                str(b["concurrency"]),
                f"{b['rps']:.1f}",
                f"{b['p50_ms']:.0f}",
                f"{b['p99_ms']:.0f}",
                f"{b['p999_ms']:.0f}",
                str(b["status"].get("5xx", 0))
                + (f" (+{b['status']['none']} no answer)" if b["status"].get("none") else ""),
                f"{_mib(b['rss_start'])} → {_mib(b['rss_end'])} ({_growth(b) / MiB:+.1f})",
                f"{b['cpu_ms_per_request']:.2f}",
                f"{b['idle_server_cpu_percent']:.1f}",
                f"{b['load_average'][0]:.1f} / {b['load_average'][1]:.1f}",
            ]
        )
    srows = []
    for c, s in sums.items():
        srows.append(
            [
                str(c),
                f"{s['on_rps']:.1f} / {s['off_rps']:.1f}",
                f"**{s['rps_ratio']:.3f}**",
                f"{s['on_p50_ms']:.0f} / {s['off_p50_ms']:.0f}",
                f"{s['on_p99_ms']:.0f} / {s['off_p99_ms']:.0f}",
                f"**{s['p99_ratio']:.3f}**",
                f"{s['on_p999_ms']:.0f} / {s['off_p999_ms']:.0f}",
                f"{s['on_cpu_ms_per_request']:.2f} / {s['off_cpu_ms_per_request']:.2f} "
                f"({s['cpu_ratio']:.3f})",
                f"{s['off_rps_spread']:.3f} / {s['off_p99_spread']:.3f}",
            ]
        )
    after = result["rss_after_warmup"]
    end = result["rss_after_blocks"]
    return [
        "Medians over the blocks of each arm; ratios are of the medians. *Off spread* is the larger "
        "over the smaller of the two *off* blocks at that concurrency (throughput / p99): what this "
        "machine moves between two identical blocks.",
        "",
        md_table(
            [
                "clients",
                "req/s on / off",
                "throughput ratio",
                "p50 ms on / off",
                "p99 ms on / off",
                "p99 ratio",
                "p99.9 ms on / off",
                "server CPU ms/request on / off (ratio)",
                "off spread: req/s / p99",
            ],
            srows,
            "lrrrrrrrr",
        ),
        "",
        "Every block, in the order run:",
        "",
        md_table(
            [
                "#",
                "plugin",
                "clients",
                "req/s",
                "p50 ms",
                "p99 ms",
                "p99.9 ms",
                "5xx",
                "RSS MiB start → end (growth)",
                "server CPU ms/request",
                "idle server CPU %",
                "load avg start / end",
            ],
            rows,
            "lllrrrrrrrrr",
        ),
        "",
        f"RSS over the whole run: *on* {_mib(after['on'])} MiB after its warm-up, {_mib(end['on'])} MiB "
        f"after its last block; *off* {_mib(after['off'])} → {_mib(end['off'])} MiB.",
    ]


def _exactness(result: dict[str, Any]) -> list[str]:
    on = [b for b in result["blocks"] if b["arm"] == "on"]
    rows = []
    keys = sorted({k for b in on for k in b["by_key"]})
    for k in keys:
        rows.append([k, *(f"{b['by_key'].get(k, 0):,}" for b in on)])
    rows.append(["**all, client**", *(f"**{b['sent']:,}**" for b in on)])
    rows.append(["**all, server**", *(f"**{b['counted']:,}**" for b in on)])
    rows.append(["equal per key", *("yes" if b["exact"] else f"**no** {b['mismatch']}" for b in on)])
    stalls = ", ".join(f"{b['stall_max_ms']:.0f} ms ({b['long_stalls']})" for b in on)
    return [
        "For each block with the plugin on: the load generator's own counts by store/operation/outcome "
        "(a 2xx is the operation's outcome, a GET answered 404 `read_absent`, any other status `error`, "
        "as the middleware classifies) and the server's `api_server.state_store.requests` received by "
        "the DogStatsD receiver between the block's start and the moment no count had changed for "
        f"{result['config']['settle']:g} s (both workers; everything sent during warm-up included on "
        "both sides). Per block (columns in run order):",
        "",
        md_table(
            ["store/operation/outcome", *(f"block {b['index'] + 1} ({b['concurrency']})" for b in on)], rows
        ),
        "",
        f"The stall monitor's largest stall per block with the plugin on (long stalls ≥ 100 ms): {stalls}.",
        "Task-side counters against the server's for calls made by tasks under load are tested under "
        "`airflow standalone` (`tests/test_task_faults.py`).",
    ]


def _counted(f: dict[str, Any]) -> str:
    return (
        f"{f['server_total']:,} / {f['client_total']:,} (lost {f['lost_total']}, twice {f['doubled_total']})"
    )


def _fault_tables(result: dict[str, Any]) -> list[str]:
    rows = []
    for f in result["faults"]:
        ph = f["phases"]
        rows.append(
            [
                f["name"],
                " / ".join(f"{ph[p]['rps']:.1f}" for p in ("before", "during", "after")),
                f"**{f['ratio_during']:.3f}** / {f['ratio_after']:.3f}",
                " / ".join(f"{ph[p]['p99_ms']:.0f}" for p in ("before", "during", "after")),
                " / ".join(str(ph[p]["status"].get("5xx", 0) + ph[p]["status"].get("none", 0)) for p in ph),
                _problem_text(f),
                "-" if f["server"] == "off" else _counted(f),
            ]
        )
    notes = []
    for f in result["faults"]:
        extra = ""
        if "replaced_after_s" in f:
            extra = (
                f" Worker {f['killed_pid']} killed; its successor was serving after "
                f"{f['replaced_after_s']:.1f} s; client requests cut off: {f['failures'] or 'none'}."
            )
        said = [line.split("] ", 1)[-1][:300] for line in f["log_lines"] if STALL_REPORT not in line]
        logged = "; ".join(f"`{t}`" for t in said) if said else "nothing about it"
        if not said and f["server"] == "otel":
            extra += (
                " The API server does not say so while it runs: its emitter pushes on its interval "
                "without an explicit flush, and the OTel backend reports a failed export only on an "
                "explicit flush (a task's end; in an API server worker, only its shutdown)."
            )
        notes.append(f"- *{f['name']}*: {f['promise']}. Logged: {logged}.{extra}")
    cfg = result["config"]
    return [
        f"{cfg['fault_clients']} clients, plugin on unless said; phases of {cfg['phase']:g} s each (before / "
        "during / after the fault); *ratio* is the phase's throughput over *before*'s. Log lines: "
        "store-metrics' warning and error lines the server wrote during the block, per problem (the "
        "stall monitor's reports of long stalls, at most one per worker and flush interval, counted "
        "apart). Counts: what "
        "the receiver got from the server (DogStatsD: deltas during the block; OTLP: the latest "
        "cumulative value per worker and series, over every block of that server) against what the "
        "load generator got back, once nothing had changed for a while after the block.",
        "",
        md_table(
            [
                "fault",
                "req/s before / during / after",
                "ratio during / after",
                "p99 ms before / during / after",
                "5xx + no answer",
                "log lines per problem",
                "counted / sent",
            ],
            rows,
            "lrrrrrl",
        ),
        "",
        *notes,
    ]


def _against_noise(what: str, ratio: float, spread: float) -> str:
    """Whether an on/off ratio's distance from 1 is within what two identical blocks differ by."""
    if math.isnan(spread):  # one block per arm
        return f"one block per arm in this run, so no spread to judge the {what} ratio against"
    off_by = abs(1 - ratio)
    if off_by <= spread - 1:
        return (
            f"two blocks of the same arm and load differ by {spread:.3f}x in {what}, more than the "
            f"{off_by * 100:.1f}% between on and off: this run cannot tell the plugin's effect from the "
            "machine's"
        )
    return (
        f"two blocks of the same arm and load differ by only {spread:.3f}x in {what}: the "
        f"{off_by * 100:.1f}% between on and off is larger than that spread"
    )


def _findings(
    result: dict[str, Any], sums: dict[int, dict[str, float]], middleware_ns: float | None
) -> list[str]:
    notes = []
    for c, s in sums.items():
        parts = []
        noise_rps = s["rps_noise"]
        if s["rps_ratio"] < TARGET_THROUGHPUT:
            parts.append(
                f"throughput ratio {s['rps_ratio']:.3f} (target ≥ {TARGET_THROUGHPUT}): "
                + _against_noise("throughput", s["rps_ratio"], noise_rps)
            )
        if s["p99_ratio"] > TARGET_P99:
            parts.append(
                f"p99 ratio {s['p99_ratio']:.3f} (target ≤ {TARGET_P99}): "
                + _against_noise("p99", s["p99_ratio"], s["p99_noise"])
            )
        if not parts:
            continue
        cost = ""
        if middleware_ns:
            share = middleware_ns / (s["off_cpu_ms_per_request"] * 1e6) * 100
            cost = (
                f" The middleware's own time per state store request (section 4, in process) is "
                f"{middleware_ns / 1000:.1f} µs, {share:.2f}% of the {s['off_cpu_ms_per_request']:.2f} ms "
                "of CPU the server spends per request here."
            )
        notes.append(
            f"- **Load, {c} clients: " + "; ".join(parts) + ".** Server CPU per request, which other "
            f"processes' load moves less than throughput: {s['on_cpu_ms_per_request']:.2f} ms on, "
            f"{s['off_cpu_ms_per_request']:.2f} ms off ({s['cpu_ratio']:.3f}x)." + cost
        )
    for f in result["faults"]:
        if f["ratio_during"] < TARGET_FAULT_THROUGHPUT:
            notes.append(_fault_finding(result, f))
    for f in result["faults"]:
        if f["server"] == "off" or f["exact"]:
            continue
        if "UDP" in f["name"] and (f["doubled_total"] or f["lost_total"] > f.get("bound", 0)):
            notes.append(_udp_finding(f))
        elif "killed" in f["name"] and f["lost_total"] > f["bound"]:
            notes.append(
                f"- **Fault, {f['name']}: {f['lost_total']} counts lost, more than the {f['bound']} "
                "requests answered since the killed worker's flush before its last one arrived**, which "
                "should bound them (the last flush drained its counts after that one had arrived). "
                "The receiver stamps a flush when its thread reads the datagrams; on a machine this "
                "busy that can be late, which makes the bound too small."
            )
    return notes


def _udp_finding(f: dict[str, Any]) -> str:
    closed = f["phases"]["during"]["requests"]
    return (
        f"- **Fault, {f['name']}: {f['lost_total']:,} counts never arrived and {f['doubled_total']:,} "
        f"arrived twice, against {closed:,} requests answered in the "
        f"{f['phases']['during']['seconds']:.0f} s the port was closed and a bound of "
        f"{f.get('bound', 0):,}** (what each worker's first flush after the close can carry: the "
        "kernel takes that datagram and learns of the closed port from the ICMP answer; every "
        "later flush is probed, refused and kept). More lost than that means flushes after the "
        "first were taken by the kernel and dropped, or the receiver read its last datagrams late."
    )


def _replaced(f: dict[str, Any]) -> str:
    if "replaced_after_s" in f:
        return f"{f['replaced_after_s']:.1f} s here"
    return "not waited for in this run"


def _fault_finding(result: dict[str, Any], f: dict[str, Any]) -> str:
    ph = f["phases"]
    head = (
        f"- **Fault, {f['name']}: {f['ratio_during']:.3f} of the throughput before** "
        f"({ph['before']['rps']:.1f} → {ph['during']['rps']:.1f} req/s; after: {ph['after']['rps']:.1f})."
    )
    if "killed" in f["name"]:
        twin = next((g for g in result["faults"] if "killed" in g["name"] and g is not f), None)
        compare = (
            f" The same kill with the plugin {twin['server']}: {twin['ratio_during']:.3f}." if twin else ""
        )
        return (
            head + " Half the workers are gone until uvicorn's supervisor has started a new one "
            f"({_replaced(f)}: a new process importing Airflow on the same 2 cores), and requests in "
            "flight on the killed worker get no answer." + compare
        )
    spreads = [x for v in summary(result).values() for x in (v["off_rps_spread"], v["on_rps_spread"])]
    spreads = [x for x in spreads if not math.isnan(x)]
    spread = f"{max(spreads):.3f}x" if spreads else "not measured (one block per arm)"
    p99 = " / ".join(f"{ph[p]['p99_ms']:.0f}" for p in ("before", "during", "after"))
    return (
        head + f" Phases of {result['config']['phase']:g} s; two identical {result['config']['seconds']:g} s "
        f"blocks of this run differ by up to {spread} in throughput. The plugin's work for a receiver "
        "that is down runs on its emitter's thread, never on the event loop: the stall monitor's "
        "reports and the p99 per phase "
        f"({p99} ms) say "
        "whether the loop was held."
    )


def main() -> None:
    from .common import prepare_airflow_home

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    prepare_airflow_home()
    result = run(args.quick)
    text, verdicts, why = render_section(result)
    print(text)
    print(md_table(["target", "measured", "verdict"], verdicts, "lll"))
    print("\n".join(why))


if __name__ == "__main__":
    main()
