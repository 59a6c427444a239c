"""Task-side faults under a real executor, and task-side exactness under load (``airflow standalone``).

One deployment for the module: ``airflow standalone`` (LocalExecutor: every task in its own
process, run by the Task SDK's supervisor), the plugin with ``backend = dogstatsd`` to a real UDP
socket, task side and API server side alike, and **a TCP proxy between the task supervisors and
the API server**: ``[core] execution_api_server_url`` points at the proxy, the proxy forwards to
the API server's port. The proxy is how the API server becomes unreachable for exactly one
state store call, deterministically: the task signals that it is about to call, the test closes
the proxy's listening socket and every connection through it (a connect is then refused, as for
an API server that is down), the task makes its calls, and the test opens the proxy again
before the task goes on. The API server itself stays up, so nothing else (scheduler, UI, the
task's own state reports after the proxy is back) is disturbed, and the state store call is the
only thing that fails. The supervisor's retries are shortened (``[workers]
execution_api_retries = 2``, waits 0.1 to 0.3 s) so the refused call fails in well under a
second instead of Airflow's default ~31 s, well within the supervisor's heartbeat tolerance.

* **API server unreachable during a state store call**: the task gets Airflow's own exception
  (``AirflowRuntimeError`` with ``API_SERVER_ERROR``, raised inside the Task SDK, nothing
  chained), ``error{operation}`` is counted for each method, and the API server counts nothing
  of those calls (they never reached it).
* **Task process SIGKILLed mid-run, then retried**: the counts of calls made before the last
  interval flush arrive, the calls after it are lost with the process (the documented loss
  bound), the retry's counts are exact, nothing is counted twice; the API server, which
  answered every call, counts them all.
* **Under load**: the load benchmark's generator (``testbed.load_client``, real tokens for
  real task instances) runs against the same API server while a DAG's tasks make their calls:
  the server's request counts equal the load generator's plus the tasks' own counters.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.airflow import Standalone
from support.lines import parse_dogstatsd
from testbed import signals
from testbed.airflow import DAGS
from testbed.load_setup import DAG_ID as LOAD_DAG
from testbed.load_setup import dag_source
from testbed.ports import free_port
from testbed.repository import ROOT
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

#: The module's DAGs (``UNREACHABLE``, ``KILLED``, ``CALLERS``), one file.
FAULT_DAGS = DAGS / "faults" / "store_metrics_faults.py"
UNREACHABLE = "store_metrics_fault_unreachable"
KILLED = "store_metrics_fault_kill"
CALLERS = "store_metrics_load_callers"
JWT_SECRET = "store-metrics-task-fault-tests-" + "s" * 33
#: Load generator clients (SQLite under airflow standalone: few, and no 689 KB values).
LOAD_CLIENTS = 4

Key = tuple[str, str]  # (store, outcome)

#: The calls of one caller task, by (store, outcome).
CALLER_CALLS: Counter[Key] = Counter(
    {
        ("task", "write"): 3,
        ("task", "read_found"): 2,
        ("task", "read_absent"): 1,
        ("task", "delete"): 1,
        ("task", "clear"): 1,
        ("asset", "write"): 1,
        ("asset", "read_found"): 1,
        ("asset", "read_absent"): 1,
        ("asset", "delete"): 1,
    }
)
#: Try 2 of the killed task: a retried attempt whose first read found its state (not a request).
RESUMED: Counter[Key] = Counter({("task", "retry_resumed"): 1})
#: The killed task's calls: before the last flush of try 1, after it, and in try 2.
CALLS_A: Counter[Key] = Counter({("task", "read_absent"): 1, ("task", "write"): 2, ("asset", "write"): 1})
CALLS_B: Counter[Key] = Counter({("task", "write"): 1, ("task", "read_found"): 1, ("asset", "read_found"): 1})
CALLS_C: Counter[Key] = Counter(
    {
        ("task", "read_found"): 2,
        ("task", "delete"): 1,
        ("task", "clear"): 1,
        ("asset", "read_found"): 1,
        ("asset", "delete"): 1,
        ("asset", "read_absent"): 1,
    }
)


class CuttableProxy:
    """A TCP proxy on 127.0.0.1 in front of the API server; ``cut`` makes every connect fail.

    ``cut`` closes the listening socket and every connection through it: a new connection is
    then refused by the kernel, exactly as when nothing listens on the API server's port.
    ``restore`` listens on the same port again.
    """

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = free_port()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        listener.settimeout(0.1)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    close = cut

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self._sockets |= {client, server}
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)


@dataclass
class Deployment:
    airflow: Standalone
    receiver: UdpReceiver
    proxy: CuttableProxy
    signals: Path


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("standalone-faults")
    signals = root / "signals"
    signals.mkdir()
    receiver = UdpReceiver()
    api_port = free_port()
    proxy = CuttableProxy(api_port)
    airflow = Standalone(
        root,
        api_port,
        {
            "AIRFLOW__STORE_METRICS__BACKEND": "dogstatsd",
            "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
            "AIRFLOW__STORE_METRICS__PORT": str(receiver.port),
            "AIRFLOW__API_AUTH__JWT_SECRET": JWT_SECRET,
            "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "2",
            "AIRFLOW__WORKERS__EXECUTION_API_RETRY_WAIT_MIN": "0.1",
            "AIRFLOW__WORKERS__EXECUTION_API_RETRY_WAIT_MAX": "0.3",
            "STORE_METRICS_TEST_SIGNALS": str(signals),
        },
    )
    # Task supervisors reach the Execution API through the proxy; everything else directly.
    airflow.env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"http://127.0.0.1:{proxy.port}/execution/"
    shutil.copy(FAULT_DAGS, airflow.home.dags)
    (airflow.home.dags / f"{LOAD_DAG}.py").write_text(dag_source(LOAD_CLIENTS), encoding="utf-8")
    try:
        airflow.start([UNREACHABLE, KILLED, CALLERS, LOAD_DAG])
        yield Deployment(airflow, receiver, proxy, signals)
    finally:
        airflow.stop()
        proxy.close()
        receiver.close()


# -- what the receiver got ---------------------------------------------------------------------------


def _counter_lines(receiver: UdpReceiver) -> list[tuple[str, dict[str, str], int]]:
    wanted = (
        "airflow.task_state_store.",
        "airflow.asset_state_store.",
        "airflow.api_server.state_store.requests:",
    )
    return [parse_dogstatsd(line) for line in receiver.lines() if line.startswith(wanted)]


def task_side(receiver: UdpReceiver, dag_id: str, with_operation: bool = False) -> Counter[tuple[str, ...]]:
    """The task side's counts for ``dag_id``: (store, outcome[, operation])."""
    out: Counter[tuple[str, ...]] = Counter()
    for name, tags, value in _counter_lines(receiver):
        scope, _, outcome = name.removeprefix("airflow.").partition(".")
        if scope in ("task_state_store", "asset_state_store") and tags.get("dag_id") == dag_id:
            key: tuple[str, ...] = (scope.removesuffix("_state_store"), outcome)
            if with_operation and "operation" in tags:
                key += (tags["operation"],)
            out[key] += value
    return out


def server_side(receiver: UdpReceiver) -> Counter[Key]:
    """The API server's ``api_server.state_store.requests`` by (store, outcome), every worker."""
    out: Counter[Key] = Counter()
    for name, tags, value in _counter_lines(receiver):
        if name == "airflow.api_server.state_store.requests":
            out[(tags["store"], tags["outcome"])] += value
    return out


def _signal(d: Deployment, name: str, text: str = "") -> None:
    signals.send(d.signals, name, text)


def _wait_signal(d: Deployment, name: str, timeout: float = 240) -> str:
    path = d.signals / name
    wait_until(lambda: path.exists() or d.airflow._died(), timeout, 0.02)
    assert path.exists(), d.airflow.log_tail()
    return path.read_text()


# -- the tests ---------------------------------------------------------------------------------------


def test_api_server_unreachable_during_a_call_raises_airflows_own_exception_and_counts_the_error(
    deployment: Deployment,
) -> None:
    d = deployment
    before = server_side(d.receiver)
    d.airflow.trigger(UNREACHABLE)
    accessor_module = _wait_signal(d, "unreachable-ready")
    assert accessor_module.startswith("store_metrics"), accessor_module  # the plugin's wrapper
    d.proxy.cut()
    try:
        _signal(d, "unreachable-cut")
        seen = json.loads(_wait_signal(d, "unreachable-done", 120))
    finally:
        d.proxy.restore()
        _signal(d, "unreachable-restored")
    assert d.airflow.wait_for_runs(UNREACHABLE, 1) == ["success"], d.airflow.log_tail()

    # Each call raised what Airflow raises when its supervisor cannot reach the API server: the
    # Task SDK's AirflowRuntimeError with API_SERVER_ERROR (the supervisor's ConnectError as
    # detail), raised inside the Task SDK, nothing chained or added by the wrapper.
    assert set(seen) == {"get", "set", "delete", "clear"}
    for operation, exc in seen.items():
        assert exc is not None, f"{operation} did not raise"
        assert exc["type"] == "airflow.sdk.exceptions.AirflowRuntimeError", (operation, exc)
        assert exc["error"] == "API_SERVER_ERROR", (operation, exc)
        assert exc["detail"]["exception_type"] == "ConnectError", (operation, exc)
        assert "/airflow/sdk/" in exc["innermost"], (operation, exc)
        assert exc["cause"] == "None" and not exc["suppress_context"], (operation, exc)

    expected_task: Counter[tuple[str, ...]] = Counter({("task", "write"): 1, ("task", "read_found"): 1})
    expected_task.update({("task", "error", op): 1 for op in seen})
    wait_until(lambda: task_side(d.receiver, UNREACHABLE, with_operation=True) == expected_task, 30, 0.2)
    # The four failed calls never reached the API server: it counted the two that did.
    reached = Counter({("task", "write"): 1, ("task", "read_found"): 1})
    wait_until(lambda: server_side(d.receiver) - before == reached, 30, 0.2)
    assert server_side(d.receiver) - before == reached


def test_a_task_process_killed_mid_run_loses_only_what_came_after_its_last_flush(
    deployment: Deployment,
) -> None:
    d = deployment
    before = server_side(d.receiver)
    d.airflow.trigger(KILLED)
    pid = int(_wait_signal(d, "kill-a-done"))
    # The interval flush (flush_interval: 10 s, the default) sends what try 1 counted so far.
    wait_until(lambda: task_side(d.receiver, KILLED) == CALLS_A, 40, 0.1)
    _signal(d, "kill-go-b")
    assert int(_wait_signal(d, "kill-b-done", 60)) == pid
    os.kill(pid, signal.SIGKILL)  # the task process (the supervisor's child), mid-run
    # Everything the killed process sent is in (a marker sent after it arrived): A, not B. The
    # next interval flush was ~10 s away; B's counts died with the process.
    d.receiver.lines_before_marker()
    assert task_side(d.receiver, KILLED) == CALLS_A

    assert d.airflow.wait_for_runs(KILLED, 1, timeout=300) == ["success"], d.airflow.log_tail()
    # Try 1's calls before the kill arrived once; its calls after the last flush died with it;
    # the retry's arrived once, exactly, and the retry counts as one that resumed (its first read
    # found what try 1 saved before the kill).
    wait_until(lambda: task_side(d.receiver, KILLED) == CALLS_A + CALLS_C + RESUMED, 30, 0.1)
    d.receiver.lines_before_marker()
    assert task_side(d.receiver, KILLED) == CALLS_A + CALLS_C + RESUMED
    # The API server answered all of them (B too) and counted each once.
    expected = CALLS_A + CALLS_B + CALLS_C
    wait_until(lambda: server_side(d.receiver) - before == expected, 30, 0.2)
    assert server_side(d.receiver) - before == expected


def test_under_load_the_server_counts_the_load_generator_plus_the_tasks_exactly(
    deployment: Deployment, tmp_path: Path
) -> None:
    d = deployment
    env = d.airflow.env
    # Real task instances and real tokens for the load generator's clients.
    d.airflow.trigger(LOAD_DAG)
    assert d.airflow.wait_for_runs(LOAD_DAG, 1) == ["success"], d.airflow.log_tail()
    tokens = tmp_path / "clients.json"
    subprocess.run(
        [sys.executable, "-m", "testbed.load_setup", "tokens", LOAD_DAG, str(tokens)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    clients = json.loads(tokens.read_text())["clients"]
    assert len(clients) == LOAD_CLIENTS
    before = server_side(d.receiver)
    plan = tmp_path / "plan.json"
    result = tmp_path / "result.json"
    plan.write_text(
        json.dumps(
            {
                "base_url": f"http://127.0.0.1:{d.airflow.api_port}/execution",
                "clients": clients,
                "sizes": {"small": 400, "mid": 58_900, "big": 688_900},
                "big_every": 1_000_000,
                "warmup": 0,
                "seconds": 15,
            }
        )
    )
    load = subprocess.Popen(
        [sys.executable, "-m", "testbed.load_client", str(plan), str(result)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert load.stdout is not None
        assert load.stdout.readline().startswith("measuring")
        d.airflow.trigger(CALLERS)  # three tasks make their calls while the load runs
        assert d.airflow.wait_for_runs(CALLERS, 1, timeout=240) == ["success"], d.airflow.log_tail()
        _, err = load.communicate(timeout=180)
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
    assert load.returncode == 0, err[-3000:]
    answered = json.loads(result.read_text())
    client: Counter[Key] = Counter()
    for store, _operation, outcome, n in answered["counts"]:
        client[(store, outcome)] += n
    assert not answered["failures"] and sum(client.values()) > 0
    callers = Counter({k: 3 * v for k, v in CALLER_CALLS.items()})
    # The tasks' own counters: exactly their calls ...
    wait_until(lambda: task_side(d.receiver, CALLERS) == callers, 30, 0.1)
    # ... and the server counted the load generator's requests plus the tasks', by store and outcome.
    expected = client + callers
    wait_until(lambda: server_side(d.receiver) - before == expected, 40, 0.2)
    assert server_side(d.receiver) - before == expected
