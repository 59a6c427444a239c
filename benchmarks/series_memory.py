"""17. Memory per series, for each backend the series cap (``max_series``) bounds, at 150,000 series.

    python -m benchmarks.series_memory BACKEND SERIES OUT.json     (one arm, in a process of its own)

``max_series`` caps the series of one emitter, whatever its backend: what one series costs in a process
is what the default cap allows a process to hold. Each arm runs in a fresh process, builds the emitter
as the product does for that backend (``statsd`` and ``dogstatsd`` to a UDP port on 127.0.0.1 that a
thread reads and discards; ``otel`` as an API server worker with ``otel_exporter = prometheus``, its
scrape endpoint ``native`` or the OpenTelemetry SDK's exporter), makes SERIES task-side counter series
(DAGs x 10 tasks x the ``write``, ``read_found`` and ``delete`` counters, as
``benchmarks.exposition``), counts each once, then delivers them once (StatsD: one flush, paced, to
its end; otel: one scrape by ``curl``), and reads the process's RSS before the series were made and
after, per series (``gc.collect()`` first).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, TypedDict

from .common import REPO_ROOT, log, rss_bytes, subprocess_env

SERIES, QUICK_SERIES = 150_000, 15_000
#: (backend, the scrape endpoint for otel): every backend the cap applies to, each as an API server
#: worker runs it. (The OpenTelemetry SDK's own exporter, ``server_exposition = otel``, is measured
#: beside the native endpoint in ``benchmarks.exposition``: at 150,000 series on a loaded machine
#: its collection outruns the SDK's own 10 s callback timeout.)
ARMS: tuple[tuple[str, str], ...] = (
    ("statsd", ""),
    ("dogstatsd", ""),
    ("otel", "native"),
)


class Arm(TypedDict):
    backend: str
    exposition: str
    series: int
    rss_per_series: float  # bytes, from before the series were made to after one delivery
    delivered_seconds: float
    load_average: list[float]


class SeriesMemory(TypedDict):
    series: int
    max_series_default: int
    arms: list[Arm]


def _sink() -> tuple[int, threading.Event]:
    """A UDP port on 127.0.0.1 that a thread reads and discards (the socket's buffer never full)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.5)
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                sock.recv(65536)
            except TimeoutError:
                continue

    threading.Thread(target=drain, daemon=True).start()
    return sock.getsockname()[1], stop


def _measure(backend: str, exposition: str, series: int) -> Arm:
    import gc
    import time

    from store_metrics.counting.runtime import create_emitter
    from testbed.ports import free_port

    from .exposition import _series

    options: dict[str, Any]
    stop: threading.Event | None = None
    if backend == "otel":
        options = {
            "exporter": "prometheus",
            "prometheus_host": "127.0.0.1",
            "prometheus_port": free_port(),
            "prometheus_port_tries": 16,
            "temporality": "cumulative",
            "instance_id": "host-0",
            "server_exposition": exposition,
        }
    else:
        port, stop = _sink()
        options = {"host": "127.0.0.1", "port": port}
    gc.collect()
    before = rss_bytes()
    emitter = create_emitter(backend, flush_interval=3600, max_series=series + 100, **options)
    _series(emitter, series)
    start = time.perf_counter()
    if backend == "otel":
        url = f"http://127.0.0.1:{emitter.backend.prometheus_port}/metrics"  # type: ignore[attr-defined]
        subprocess.run(["curl", "-sf", "-o", os.devnull, url], check=True, timeout=600)
    elif not emitter.flush(600.0):
        raise RuntimeError(f"{backend}: the flush did not finish in 600 s")
    delivered = time.perf_counter() - start
    gc.collect()
    after = rss_bytes()
    emitter.close(2.0)
    if stop is not None:
        stop.set()
    return {
        "backend": backend,
        "exposition": exposition,
        "series": series,
        "rss_per_series": round((after - before) / series, 1),
        "delivered_seconds": round(delivered, 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def probe() -> None:
    backend, exposition, series, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    out.write_text(json.dumps(_measure(backend, exposition, series)), encoding="utf-8")


def run(quick: bool) -> SeriesMemory:
    from store_metrics.config.options import default

    series = QUICK_SERIES if quick else SERIES
    arms: list[Arm] = []
    with tempfile.TemporaryDirectory(prefix="store-metrics-bench-series-memory-") as tmp:
        for backend, exposition in ARMS:
            log(f"  series memory: {backend} {exposition}, {series:,} series")
            out = Path(tmp) / f"{backend}-{exposition}.json"
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.series_memory",
                    backend,
                    exposition or "-",
                    str(series),
                    str(out),
                ],
                cwd=REPO_ROOT,
                env=subprocess_env(),
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"series memory probe failed ({proc.returncode}):\n{proc.stderr[-5000:]}")
            arm: Arm = json.loads(out.read_text(encoding="utf-8"))
            arm["exposition"] = exposition
            arms.append(arm)
    return {"series": series, "max_series_default": int(default("max_series")), "arms": arms}


if __name__ == "__main__":
    probe()
