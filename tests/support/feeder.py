"""The Prometheus end-to-end tests' second source: a feeder process, driven in controlled passes.

    python -m support.feeder PORT              # (tests/ and the repository on PYTHONPATH)
    python -m support.feeder --dogstatsd PORT

It serves a Prometheus endpoint (the ``otel`` backend's exporter) on ``PORT`` -- or, with
``--dogstatsd``, sends DogStatsD to 127.0.0.1:``PORT`` -- and, for each ``pass`` line on stdin,
makes one pass of ``FEEDER_PASS``'s calls through the
instrumented wrappers over in-memory stores, then answers ``done``; ``quit`` ends it. So the test
knows which samples Prometheus holds: per-second rates, ratios over a window and recording rules
(which need a series to exist before it grows) are checked against the calls of exactly one pass.
``Feeder`` starts and drives it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.e2e import ERRORS_DAG, ERRORS_TEAM, FEEDER_PASS, TASKS
from testbed.repository import python_path


class Feeder:
    """The feeder process: serving on ``port`` (or, ``dogstatsd``, sending DogStatsD there)."""

    def __init__(self, port: int, tmp: Path, dogstatsd: bool = False) -> None:
        args = ["--dogstatsd", str(port)] if dogstatsd else [str(port)]
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "support.feeder", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(tmp / f"feeder-{'dogstatsd-' if dogstatsd else ''}{port}.err").open("a"),
            text=True,
            env={**__import__("os").environ, "PYTHONPATH": python_path()},
        )
        assert self.read() == "ready"

    def read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def command(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.read()

    def stop(self) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.command("quit")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# -- the feeder process ----------------------------------------------------------------------------


class Store:
    """An in-memory store with a task store accessor's four methods."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def set(self, key: str, value: Any, **_: Any) -> None:
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data.pop(key, None)

    def clear(self) -> None:
        self.data.clear()


class Flaky(Store):
    """A store whose ``get`` or ``set`` always raises, as a store that is down does."""

    def __init__(self, fail: str) -> None:
        super().__init__()
        self.fail = fail

    def get(self, key: str, default: Any = None) -> Any:
        if self.fail == "get":
            raise RuntimeError("store down")
        return super().get(key, default)

    def set(self, key: str, value: Any, **kw: Any) -> None:
        if self.fail == "set":
            raise RuntimeError("store down")
        super().set(key, value, **kw)


def _tags(dag: str) -> dict[str, str]:
    from store_metrics import catalogue

    task, operator = TASKS[dag]
    return catalogue.task_tags(
        dag_id=dag,
        task_id=task,
        run_type="manual",
        operator=operator,
        team_name=ERRORS_TEAM if dag == ERRORS_DAG else None,
    )


def _one_dag(emitter: Any, dag: str, asset: Any) -> None:
    """One DAG's calls of a pass, as the scenarios make them."""
    import store_metrics

    task_store = store_metrics.instrument_task_store(Store(), emitter, _tags(dag))
    if dag == "state_store_metrics_01":
        task_store.get("counter")
        task_store.set("counter", 1)
        task_store.get("counter")
    elif dag == "state_store_metrics_02":
        asset.get("watermark")
        asset.set("watermark", "2026-01-01")
        task_store.get("counter")
    elif dag == "state_store_metrics_03":
        asset3 = store_metrics.instrument_asset_store(Store(), emitter, _tags(dag))
        task_store.set("a", 1)
        task_store.set("b", 2)
        task_store.delete("a")
        task_store.clear()
        asset3.set("w", "x")
        asset3.delete("w")
    elif dag == "example_resumable_job":
        if task_store.get("job_id") is None:
            task_store.set("job_id", "batch-1")
    elif dag == ERRORS_DAG:
        flaky = store_metrics.instrument_task_store(Flaky("get"), emitter, _tags(dag))
        flaky_asset = store_metrics.instrument_asset_store(Flaky("set"), emitter, _tags(dag))
        try:
            flaky.get("cursor")
        except RuntimeError:
            flaky.set("cursor", 0)
        with contextlib.suppress(RuntimeError):
            flaky_asset.set("watermark", 1)


def main(port: int, dogstatsd: bool = False) -> None:
    """Serve a Prometheus endpoint (or send DogStatsD to ``port``); on "pass", make one pass of
    FEEDER_PASS's calls through the wrappers, then flush them."""
    import store_metrics

    if dogstatsd:
        emitter = store_metrics.configure("dogstatsd", host="127.0.0.1", port=port)
    else:
        emitter = store_metrics.configure(
            "otel", exporter="prometheus", prometheus_port=port, prometheus_host="127.0.0.1"
        )
    print("ready", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "pass":
            asset = store_metrics.instrument_asset_store(Store(), emitter, _tags("state_store_metrics_02"))
            for dag in FEEDER_PASS:
                _one_dag(emitter, dag, asset)
            emitter.flush()
            print("done", flush=True)
        elif command == "quit":
            break
    store_metrics.shutdown(timeout=2)
    print("bye", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[-1]), dogstatsd="--dogstatsd" in sys.argv[1:-1])
