"""Child process of the exit-delay benchmark: configure, work, count some calls, (flush,) exit.

Prints one JSON line with ``time.monotonic()`` taken just before the part being measured
(the flush for ``--mode flush``, the end of the script for ``--mode plain``). ``CLOCK_MONOTONIC``
is system-wide on Linux, so the parent compares it with the moment it saw this process end.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8125)
    parser.add_argument("--mode", choices=("plain", "flush"), required=True)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--settle", type=float, default=1.0)
    args = parser.parse_args()

    import store_metrics
    from store_metrics import instrument_task_store

    from .common import TAGS, MemoryStore

    options: dict[str, object] = {}
    if args.backend in ("statsd", "dogstatsd"):
        options = {"host": args.host, "port": args.port}
    elif args.backend == "otel":
        options = {"exporter": "otlp"}  # endpoint from OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
    # Production defaults otherwise (store_metrics.config.options): flush_interval, flush_timeout,
    # exit_timeout.
    emitter = store_metrics.configure(args.backend, **options)
    store = instrument_task_store(MemoryStore(), emitter, TAGS)
    # The task's own work: until the worker has opened the backend (imports, DNS, sockets),
    # at most --settle s, so what is measured is a backend that is down, not one still starting.
    deadline = time.monotonic() + args.settle
    while time.monotonic() < deadline and not getattr(emitter, "_opened", False):
        time.sleep(0.005)
    for i in range(args.calls):
        store.set(f"k{i}", i)
        store.get(f"k{i}")
    mark = time.monotonic()
    flushed = None
    if args.mode == "flush":
        flushed = emitter.flush()  # what the plugin does at the end of a task
    print(json.dumps({"mark": mark, "flushed": flushed, "flush_s": time.monotonic() - mark}), flush=True)


if __name__ == "__main__":
    main()
