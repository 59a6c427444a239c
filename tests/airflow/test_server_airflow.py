"""The API server side under a real ``airflow standalone``: real tasks, real requests, real UDP.

One deployment for the module (backend dogstatsd to a real UDP socket, flush every second, a
test-only plugin with a route that blocks the server's event loop). Task processes and the API
server's worker send to the same socket, so the task side's counters and the server side's
request counts for the same DAG run can be compared line for line.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from support.airflow import Standalone
from support.deploy import SERVER_PLUGINS
from support.statsd_observations import observations
from testbed.airflow import SCENARIO_DAGS
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG_ID = "store_metrics_server_calls"

_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9_.\-]+):(?P<value>[0-9.e+\-]+)\|(?P<kind>c|d|g)"
    r"(?:\|@(?P<rate>[0-9.e\-]+))?(?:\|#(?P<tags>[^|]*))?$"
)


def _dag_module() -> Any:
    spec = importlib.util.spec_from_file_location("server_calls_dag", SCENARIO_DAGS / f"{DAG_ID}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Line:
    """One DogStatsD line, parsed strictly: anything else fails the test."""

    def __init__(self, text: str) -> None:
        match = _LINE.match(text)
        assert match, f"not a well-formed DogStatsD line: {text!r}"
        self.name = match["name"]
        self.value = float(match["value"])
        self.kind = match["kind"]
        # What a receiver counts for this line (statsd_exporter: int(1 / rate) observations).
        self.observations = observations(match["rate"])
        self.tags = dict(t.split(":", 1) for t in match["tags"].split(",")) if match["tags"] else {}


def lines(receiver: UdpReceiver, start: int = 0) -> list[Line]:
    return [Line(t) for t in receiver.lines()[start:] if t.startswith("airflow.")]


def server_requests(parsed: list[Line]) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for line in parsed:
        if line.name == "airflow.api_server.state_store.requests":
            assert line.kind == "c"
            out[(line.tags["store"], line.tags["outcome"])] += int(line.value)
    return out


def task_side(parsed: list[Line], dag_id: str) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for line in parsed:
        scope, _, outcome = line.name.removeprefix("airflow.").partition(".")
        if scope in ("task_state_store", "asset_state_store") and line.tags.get("dag_id") == dag_id:
            out[(scope.removesuffix("_state_store"), outcome)] += int(line.value)
    return out


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Standalone, UdpReceiver]]:
    root = tmp_path_factory.mktemp("standalone-server")
    plugins = root / "plugins"
    plugins.mkdir()
    shutil.copy(SERVER_PLUGINS / "store_metrics_test_blocker.py", plugins)
    receiver = UdpReceiver()
    airflow = Standalone(
        root,
        free_port(),
        {
            "AIRFLOW__STORE_METRICS__BACKEND": "dogstatsd",
            "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
            "AIRFLOW__STORE_METRICS__PORT": str(receiver.port),
            "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "1",
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
        },
    )
    try:
        airflow.start([DAG_ID])
        yield airflow, receiver
    finally:
        airflow.stop()
        receiver.close()


@pytest.fixture(scope="module")
def dag_run(deployment: tuple[Standalone, UdpReceiver]) -> tuple[Counter[tuple[str, str]], int]:
    """Run the DAG once; return the server's request counts before it and the first line index."""
    airflow, receiver = deployment
    start = len(receiver.lines())
    before = server_requests(lines(receiver))
    airflow.trigger(DAG_ID)
    assert airflow.wait_for_runs(DAG_ID, 1) == ["success"], airflow.log_tail()
    return before, start


def test_server_counts_match_the_task_side_for_a_dag_run(
    deployment: tuple[Standalone, UdpReceiver], dag_run: tuple[Counter[tuple[str, str]], int]
) -> None:
    airflow, receiver = deployment
    before, _ = dag_run
    expected = Counter(_dag_module().CALLS)
    # The task side counted exactly the DAG's calls ...
    wait_until(lambda: sum(task_side(lines(receiver), DAG_ID).values()) >= sum(expected.values()), 15)
    assert task_side(lines(receiver), DAG_ID) == expected
    # ... and the API server counted the same requests, by store and outcome.
    wait_until(lambda: server_requests(lines(receiver)) - before == expected, 15)
    assert "store-metrics: API server worker" in airflow.log_path.read_text(errors="replace")


def test_server_lines_carry_route_status_and_worker_never_ids_or_keys(
    deployment: tuple[Standalone, UdpReceiver], dag_run: tuple[Counter[tuple[str, str]], int]
) -> None:
    _, receiver = deployment
    wait_until(lambda: server_requests(lines(receiver)), 15)
    server = [line for line in lines(receiver) if line.name.startswith("airflow.api_server.")]
    workers = {line.tags["worker"] for line in server}
    assert len(workers) == 1 and re.fullmatch(r"[A-Za-z0-9_.\-]+-\d+", workers.pop())
    for line in server:
        assert "missing" not in str(line.tags) and "dir" not in str(line.tags)
        if line.name == "airflow.api_server.state_store.requests":
            klass, outcome = line.tags["status_class"], line.tags["outcome"]
            assert klass == ("4xx" if outcome == "read_absent" else "2xx"), line.tags
            assert set(line.tags) == {"store", "operation", "status_class", "outcome", "worker"}


def test_a_689_kb_value_shows_in_the_size_and_duration_histograms(
    deployment: tuple[Standalone, UdpReceiver], dag_run: tuple[Counter[tuple[str, str]], int]
) -> None:
    _, receiver = deployment
    _, start = dag_run

    def big(name: str, operation: str) -> list[Line]:
        return [
            line
            for line in lines(receiver, start)
            if line.name == name
            and line.tags["store"] == "task"
            and line.tags["operation"] == operation
            and line.value > 262_144  # the 1 MiB bucket: only the big value gets there
        ]

    request = "airflow.api_server.state_store.request.size"
    response = "airflow.api_server.state_store.response.size"
    wait_until(lambda: big(request, "set") and big(response, "get"), 15)
    # One observation each, so the line carries the exact body size: the value's JSON plus its envelope.
    value_json = len(json.dumps(_dag_module().BIG, separators=(",", ":")))
    assert value_json == 688_899
    (put,) = big(request, "set")
    (got,) = big(response, "get")
    assert put.kind == got.kind == "d" and put.observations == got.observations == 1
    assert value_json < put.value <= value_json + 100 and value_json < got.value <= value_json + 100
    durations = [
        line
        for line in lines(receiver, start)
        if line.name == "airflow.api_server.state_store.request.duration"
        and line.tags["value_size"] == "le_1MiB"
    ]
    assert {(d.tags["operation"], d.tags["status_class"]) for d in durations} == {
        ("set", "2xx"),
        ("get", "2xx"),
    }
    assert all(d.observations == 1 and 0 < d.value < 10_000 for d in durations)


def test_a_blocked_loop_is_reported_as_a_stall_of_about_200_ms(
    deployment: tuple[Standalone, UdpReceiver], dag_run: tuple[Counter[tuple[str, str]], int]
) -> None:
    airflow, receiver = deployment
    start = len(receiver.lines())
    url = f"http://127.0.0.1:{airflow.api_port}/store-metrics-test/block?ms=200"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert json.loads(response.read()) == {"blocked_ms": 200}

    def gauge() -> list[float]:
        return [
            line.value
            for line in lines(receiver, start)
            if line.name == "airflow.api_server.event_loop.stall.max" and line.value >= 150
        ]

    wait_until(gauge, 15)
    # 200 ms less at most one 10 ms tick; the upper bounds only catch nonsense (a loaded machine
    # decides how late the loop runs, and may stall it more on its own).
    assert 190 <= max(gauge()) <= 10_000, gauge()
    stalls = [
        line
        for line in lines(receiver, start)
        if line.name == "airflow.api_server.event_loop.stall" and line.value >= 150
    ]
    assert stalls and all(s.value <= 10_000 for s in stalls), [(s.value, s.observations) for s in stalls]
    long_stalls: dict[str, Any] = {}
    wait_until(
        lambda: (
            long_stalls.update(
                {
                    f"{line.tags['store']}/{line.tags['operation']}": line.value
                    for line in lines(receiver, start)
                    if line.name == "airflow.api_server.event_loop.long_stalls"
                }
            )
            or long_stalls
        ),
        15,
    )
    # The blocking route is no state store route: nothing of the store was in flight.
    assert long_stalls.get("none/none", 0) >= 1, long_stalls
    assert "stalled" in airflow.log_path.read_text(errors="replace")
