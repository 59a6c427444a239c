"""Nothing happens at import time: no thread, no socket, no backend library, no provider.

Each check runs in a fresh interpreter, so nothing another test imported or started can hide a
side effect.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

THIRD_PARTY = ("opentelemetry", "datadog", "statsd", "airflow", "prometheus_client", "requests", "grpc")

_PROBE = textwrap.dedent(
    """
    import json, os, socket, sys, threading

    sockets = []
    _init = socket.socket.__init__
    def _tracking_init(self, *args, **kwargs):
        sockets.append(repr(args))
        _init(self, *args, **kwargs)
    socket.socket.__init__ = _tracking_init

    fork_hooks = []
    _register = os.register_at_fork
    def _tracking_register(**kwargs):
        # Only ours: importing logging, random, ... registers theirs.
        if any(getattr(f, "__module__", "").startswith("store_metrics") for f in kwargs.values()):
            fork_hooks.append(sorted(kwargs))
        _register(**kwargs)
    os.register_at_fork = _tracking_register

    def state():
        return {
            "threads": sorted(t.name for t in threading.enumerate()),
            "sockets": list(sockets),
            "fork_hooks": list(fork_hooks),
            "third_party": sorted(
                m for m in sys.modules if m.split(".")[0] in %(third_party)r
            ),
        }

    before = state()
    import store_metrics
    import store_metrics.counting.accessors, store_metrics.emitter, store_metrics.backends
    import store_metrics.catalogue, store_metrics.emitter, store_metrics.errors, store_metrics.logs
    import store_metrics.counting.runtime, store_metrics.testing, store_metrics.config.validate
    import store_metrics.backends.statsd_lines, store_metrics.naming
    imported = state()
    configured = None
    backend = sys.argv[1] if len(sys.argv) > 1 else ""
    if backend:
        store_metrics.configure(backend, host="127.0.0.1", port=9, flush_interval=60)
        configured = state()
        configured["emitter"] = type(store_metrics.get_emitter()).__name__
    print(json.dumps({"before": before, "imported": imported, "configured": configured,
                      "emitter": type(store_metrics.get_emitter()).__name__}))
    """
) % {"third_party": THIRD_PARTY}


def probe(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_importing_the_core_starts_nothing_and_loads_no_backend_library() -> None:
    result = probe()
    assert result["before"]["threads"] == ["MainThread"]
    assert result["imported"] == result["before"]  # same threads, no socket, no hook, no library
    assert result["imported"]["sockets"] == []
    assert result["imported"]["third_party"] == []
    assert result["emitter"] == "NullEmitter"


def test_configuring_starts_one_worker_and_loads_only_its_own_library() -> None:
    result = probe("statsd")
    configured = result["configured"]
    assert configured["threads"] == ["MainThread", "store-metrics-emitter"]
    assert configured["emitter"] == "AggregatingEmitter"
    # The StatsD backends format and send every byte themselves: no client library is loaded.
    assert configured["third_party"] == []
    assert configured["fork_hooks"] == [["after_in_child", "after_in_parent", "before"]]


def test_the_none_backend_loads_no_library_at_all() -> None:
    result = probe("none")
    assert result["configured"]["third_party"] == []
    assert result["configured"]["sockets"] == []
