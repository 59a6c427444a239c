"""3c. How long process exit is delayed when the backend is down.

Each case runs ``python -m benchmarks.exit_probe`` in a fresh process with the production
defaults (``flush_interval``, ``flush_timeout`` and ``exit_timeout`` of
``store_metrics.config.options``, which the results record): configure the emitter, work until the
worker has opened the backend (at most 1 s: imports, DNS, sockets), make 2,000 counted calls,
then either

* ``plain``: end the script (the emitter's exit hook makes the last flush), or
* ``flush``: the plugin's path, an explicit ``flush()`` as at the end of a task, then exit.

The child prints ``time.monotonic()`` just before that part; the parent notes when it saw the
child end (``waitpid``). Delay = end - mark. The same script with backend ``none`` is the
baseline; cases and baseline are interleaved, repeated, and the medians compared. For
reference, each backend is also run while it is up (a UDP sink, an OTLP/HTTP endpoint that
answers 200): the difference between "down" and "up" is what the outage itself costs.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, TypedDict

from testbed.endpoints import HttpPostSink, SilentTcpServer
from testbed.ports import free_port

from .common import REPO_ROOT, UdpSink, log, median, subprocess_env

UNRESOLVABLE = "metrics.invalid"


def _run_probe(
    backend: str,
    mode: str,
    host: str,
    port: int,
    env: dict[str, str],
    *,
    settle: float = 1.0,
    calls: int = 1000,
) -> dict[str, Any]:
    # A file, not a pipe: a chatty child can never block on it.
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed below, after the child ended
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.exit_probe",
            "--backend",
            backend,
            "--mode",
            mode,
            "--host",
            host,
            "--port",
            str(port),
            "--calls",
            str(calls),
            "--settle",
            str(settle),
        ],
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )
    assert proc.stdout is not None
    # A timer kills a stuck child; wait() without a timeout blocks in waitpid and wakes at once
    # (with a timeout, Popen.wait polls with sleeps of up to 50 ms).
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    line = proc.stdout.readline()
    proc.wait()
    ended = time.monotonic()
    watchdog.cancel()
    proc.stdout.close()
    errors.seek(0)
    stderr = errors.read().decode("utf-8", "replace")
    errors.close()
    if proc.returncode != 0 or not line:
        raise RuntimeError(f"exit probe {backend}/{mode} failed with {proc.returncode}")
    data = json.loads(line)
    return {
        "delay_ms": (ended - data["mark"]) * 1000,
        "flushed": data["flushed"],
        "flush_ms": data["flush_s"] * 1000,
        "stderr": stderr[-500:],
    }


def _dns_ms() -> float:
    t0 = time.perf_counter()
    with contextlib.suppress(OSError):
        socket.getaddrinfo(UNRESOLVABLE, 8125, type=socket.SOCK_DGRAM)
    return (time.perf_counter() - t0) * 1000


class ModeFigures(TypedDict):
    """One case, one way of ending (plain exit or flush path): ms, medians over runs."""

    delay_ms: float
    added_ms: float  # against backend none
    max_added_ms: float
    flushed: list[bool] | None  # what flush() returned, per run (flush path only)


class ExitCase(TypedDict):
    plain: ModeFigures
    flush: ModeFigures


class ExitDelay(TypedDict):
    reps: int
    dns_ms: float  # one failed lookup of an unresolvable name, here
    defaults: dict[str, float]  # the production defaults the probes ran with
    baseline_ms: dict[str, float]  # backend none, per mode
    cases: dict[str, ExitCase]
    #: OTLP exports delivered by processes that exit right after configure() (full mode only).
    early_exit_posts: list[int]
    early_exit_stderr: str


#: (label, backend, host, port, environment) of one case.
Case = tuple[str, str, str, int, dict[str, str]]
BASELINE = "baseline: backend none"


def _base_env() -> dict[str, str]:
    env = subprocess_env()
    return {k: v for k, v in env.items() if not k.startswith("OTEL_")}


def _otel_env(endpoint: str) -> dict[str, str]:
    return {
        **_base_env(),
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
    }


def _cases(silent: SilentTcpServer, udp_up: UdpSink, otlp_up: HttpPostSink, quick: bool) -> list[Case]:
    closed_udp, closed_tcp, base = free_port(socket.SOCK_DGRAM), free_port(), _base_env()
    unresolvable_otlp = f"http://collector{os.getpid()}.{UNRESOLVABLE.split('.', 1)[1]}:4318/v1/metrics"
    cases: list[Case] = [
        (BASELINE, "none", "127.0.0.1", 0, base),
        ("reference, up: statsd to a UDP sink", "statsd", "127.0.0.1", udp_up.port, base),
        ("reference, up: dogstatsd to a UDP sink", "dogstatsd", "127.0.0.1", udp_up.port, base),
        ("reference, up: otel OTLP/HTTP endpoint answering 200", "otel", "", 0, _otel_env(otlp_up.endpoint)),
        ("statsd, closed UDP port", "statsd", "127.0.0.1", closed_udp, base),
        ("statsd, unresolvable host", "statsd", UNRESOLVABLE, 8125, base),
        ("dogstatsd, closed UDP port", "dogstatsd", "127.0.0.1", closed_udp, base),
        ("dogstatsd, unresolvable host", "dogstatsd", UNRESOLVABLE, 8125, base),
        (
            "otel OTLP/HTTP, endpoint accepts and never answers",
            "otel",
            "",
            0,
            _otel_env(f"http://127.0.0.1:{silent.port}/v1/metrics"),
        ),
        (
            "otel OTLP/HTTP, closed TCP port",
            "otel",
            "",
            0,
            _otel_env(f"http://127.0.0.1:{closed_tcp}/v1/metrics"),
        ),
        ("otel OTLP/HTTP, unresolvable host", "otel", "", 0, _otel_env(unresolvable_otlp)),
    ]
    return [cases[0], cases[4], cases[8]] if quick else cases


def _early_exit(otlp_up: HttpPostSink) -> tuple[list[int], str]:
    """Not a delay: does a process that ends right after configure() (before the worker has opened
    the backend) still deliver its counts? OTel, endpoint up, plain exit, no settle."""
    early: list[int] = []
    stderr = ""
    for _ in range(3):
        log("  exit delay: otel up, exit right after configure()")
        before = otlp_up.posts
        probe = _run_probe("otel", "plain", "", 0, _otel_env(otlp_up.endpoint), settle=0.0, calls=10)
        early.append(otlp_up.posts - before)
        stderr = stderr or probe["stderr"].strip()
    return early, stderr


def _summary(runs: list[dict[str, Any]], baseline: float, flush: bool) -> ModeFigures:
    delay = median(r["delay_ms"] for r in runs)
    return ModeFigures(
        delay_ms=delay,
        added_ms=delay - baseline,
        max_added_ms=max(r["delay_ms"] for r in runs) - baseline,
        flushed=[r["flushed"] for r in runs] if flush else None,
    )


def run(quick: bool) -> ExitDelay:
    from store_metrics.config.options import default

    reps = 1 if quick else 3
    silent, udp_up, otlp_up = SilentTcpServer(), UdpSink(), HttpPostSink()
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    try:
        cases = _cases(silent, udp_up, otlp_up, quick)
        for rep in range(reps):
            for mode in ("plain", "flush"):
                for label, backend, host, port, env in cases:
                    log(f"  exit delay: {mode} #{rep + 1}: {label}")
                    runs.setdefault(label, {}).setdefault(mode, []).append(
                        _run_probe(backend, mode, host, port, env)
                    )
        early, early_stderr = ([], "") if quick else _early_exit(otlp_up)
    finally:
        silent.close()
        udp_up.close()
        otlp_up.close()
    baseline = {mode: median(r["delay_ms"] for r in runs[BASELINE][mode]) for mode in ("plain", "flush")}
    return ExitDelay(
        reps=reps,
        dns_ms=_dns_ms(),
        defaults={name: float(default(name)) for name in ("flush_interval", "flush_timeout", "exit_timeout")},
        baseline_ms=baseline,
        cases={
            label: ExitCase(
                plain=_summary(runs[label]["plain"], baseline["plain"], False),
                flush=_summary(runs[label]["flush"], baseline["flush"], True),
            )
            for label, *_ in cases[1:]
        },
        early_exit_posts=early,
        early_exit_stderr=early_stderr,
    )
