"""3c. How long process exit is delayed when the backend is down.

Each case runs ``python -m benchmarks.exit_probe`` in a fresh process with the production
defaults (``flush_timeout`` 2 s, ``exit_timeout`` 0.1 s): configure the emitter, work until the
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
from typing import Any

from .common import (
    REPO_ROOT,
    OtlpHttpSink,
    SilentTcpServer,
    UdpSink,
    free_port,
    log,
    median,
    subprocess_env,
)

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


def run(quick: bool) -> dict[str, Any]:
    reps = 1 if quick else 3
    silent = SilentTcpServer()
    udp_up = UdpSink()
    otlp_up = OtlpHttpSink()
    closed_udp = free_port(socket.SOCK_DGRAM)
    closed_tcp = free_port()
    base_env = subprocess_env()
    for key in list(base_env):
        if key.startswith("OTEL_"):
            del base_env[key]

    def otel_env(endpoint: str) -> dict[str, str]:
        return {
            **base_env,
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
        }

    # (label, backend, host, port, env)
    cases: list[tuple[str, str, str, int, dict[str, str]]] = [
        ("baseline: backend none", "none", "127.0.0.1", 0, base_env),
        ("reference, up: statsd to a UDP sink", "statsd", "127.0.0.1", udp_up.port, base_env),
        ("reference, up: dogstatsd to a UDP sink", "dogstatsd", "127.0.0.1", udp_up.port, base_env),
        ("reference, up: otel OTLP/HTTP endpoint answering 200", "otel", "", 0, otel_env(otlp_up.endpoint)),
        ("statsd, closed UDP port", "statsd", "127.0.0.1", closed_udp, base_env),
        ("statsd, unresolvable host", "statsd", UNRESOLVABLE, 8125, base_env),
        ("dogstatsd, closed UDP port", "dogstatsd", "127.0.0.1", closed_udp, base_env),
        ("dogstatsd, unresolvable host", "dogstatsd", UNRESOLVABLE, 8125, base_env),
        (
            "otel OTLP/HTTP, endpoint accepts and never answers",
            "otel",
            "",
            0,
            otel_env(f"http://127.0.0.1:{silent.port}/v1/metrics"),
        ),
        (
            "otel OTLP/HTTP, closed TCP port",
            "otel",
            "",
            0,
            otel_env(f"http://127.0.0.1:{closed_tcp}/v1/metrics"),
        ),
        (
            "otel OTLP/HTTP, unresolvable host",
            "otel",
            "",
            0,
            otel_env(f"http://collector{os.getpid()}.{UNRESOLVABLE.split('.', 1)[1]}:4318/v1/metrics"),
        ),
    ]
    if quick:
        cases = [cases[0], cases[4], cases[8]]
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        label: {"plain": [], "flush": []} for label, *_ in cases
    }
    try:
        for rep in range(reps):
            for mode in ("plain", "flush"):
                for label, backend, host, port, env in cases:
                    log(f"  exit delay: {mode} #{rep + 1}: {label}")
                    results[label][mode].append(_run_probe(backend, mode, host, port, env))
        # Not a delay: does a process that ends right after configure() (before the worker has
        # opened the backend) still deliver its counts? OTel, endpoint up, plain exit, no settle.
        early: list[int] = []
        early_stderr = ""
        if not quick:
            for _ in range(3):
                log("  exit delay: otel up, exit right after configure()")
                before = otlp_up.posts
                probe = _run_probe("otel", "plain", "", 0, otel_env(otlp_up.endpoint), settle=0.0, calls=10)
                early.append(otlp_up.posts - before)
                early_stderr = early_stderr or probe["stderr"].strip()
    finally:
        silent.close()
        udp_up.close()
        otlp_up.close()
    out: dict[str, Any] = {
        "reps": reps,
        "dns_ms": _dns_ms(),
        "cases": {},
        "early_exit_posts": early,
        "early_exit_stderr": early_stderr,
    }
    baseline = {
        mode: median(r["delay_ms"] for r in results[cases[0][0]][mode]) for mode in ("plain", "flush")
    }
    out["baseline_ms"] = baseline
    for label, *_ in cases[1:]:
        entry: dict[str, Any] = {}
        for mode in ("plain", "flush"):
            runs = results[label][mode]
            delay = median(r["delay_ms"] for r in runs)
            entry[mode] = {
                "delay_ms": delay,
                "added_ms": delay - baseline[mode],
                "max_added_ms": max(r["delay_ms"] for r in runs) - baseline[mode],
                "flushed": [r["flushed"] for r in runs] if mode == "flush" else None,
            }
        out["cases"][label] = entry
    return out
