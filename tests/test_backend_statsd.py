"""The ``statsd`` adapter: the exact bytes it sends through a real UDP socket on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

import store_metrics
from store_metrics import catalogue, naming
from store_metrics.emitter import AggregatingEmitter
from support.lines import parse_influx
from support.tags import HOSTILE_VALUES, TAGS, WIRE_TAGS
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

WRITE = catalogue.get("task_state_store.write")


def statsd(receiver: UdpReceiver, **options: Any) -> AggregatingEmitter:
    return store_metrics.configure(
        "statsd", host="127.0.0.1", port=receiver.port, flush_interval=60.0, **options
    )


def test_one_write_is_exactly_this_datagram(udp_receiver: UdpReceiver) -> None:
    emitter = statsd(udp_receiver)
    emitter.counter(WRITE, TAGS).add(1)
    assert emitter.flush(5.0)
    wait_until(lambda: udp_receiver.datagrams)
    assert udp_receiver.datagrams == [
        b"airflow.task_state_store.write,dag_id=d,task_id=t,run_type=manual,operator=X:1|c"
    ]


def test_summed_value_team_name_and_error_operation(udp_receiver: UdpReceiver) -> None:
    emitter = statsd(udp_receiver)
    team = {**TAGS, "team_name": "ml"}
    for _ in range(3):
        emitter.counter(WRITE, team).add(1)
    emitter.counter(catalogue.get("asset_state_store.error"), {**TAGS, "operation": "get"}).add(1)
    assert emitter.flush(5.0)
    assert sorted(udp_receiver.wait_for_lines(2)) == [
        f"airflow.asset_state_store.error,{WIRE_TAGS},operation=get:1|c",
        f"airflow.task_state_store.write,{WIRE_TAGS},team_name=ml:3|c",
    ]


@pytest.mark.parametrize(("prefix", "name"), [("platform.airflow", "platform.airflow."), ("", "")])
def test_prefix(udp_receiver: UdpReceiver, prefix: str, name: str) -> None:
    emitter = statsd(udp_receiver, prefix=prefix)
    emitter.counter(WRITE, TAGS).add(2)
    assert emitter.flush(5.0)
    assert udp_receiver.wait_for_lines(1) == [f"{name}task_state_store.write,{WIRE_TAGS}:2|c"]


def test_hostile_tag_values_each_yield_one_well_formed_line(udp_receiver: UdpReceiver) -> None:
    emitter = statsd(udp_receiver)
    for hostile in HOSTILE_VALUES:
        emitter.counter(WRITE, {**TAGS, "dag_id": hostile, "operator": hostile}).add(1)
    assert emitter.flush(5.0)
    lines = udp_receiver.wait_for_lines(len(HOSTILE_VALUES))
    assert len(lines) == len(HOSTILE_VALUES)
    seen = []
    for line in lines:
        name, tags, value = parse_influx(line)
        assert (name, value) == ("airflow.task_state_store.write", 1)
        assert list(tags) == ["dag_id", "task_id", "run_type", "operator"]
        assert tags["dag_id"] == tags["operator"]
        seen.append(tags["dag_id"])
    assert sorted(seen) == sorted(naming.sanitize_tag_value(v) for v in HOSTILE_VALUES)
    assert "x_airflow.evil_1_c" in seen
    assert not any(line.startswith("airflow.evil") for line in lines)


def test_many_series_are_packed_into_datagrams_of_at_most_512_bytes(udp_receiver: UdpReceiver) -> None:
    emitter = statsd(udp_receiver)
    for i in range(40):
        emitter.counter(WRITE, {**TAGS, "task_id": f"task_{i:02d}"}).add(i + 1)
    assert emitter.flush(5.0)
    lines = udp_receiver.wait_for_lines(40)
    assert sorted(lines) == sorted(
        f"airflow.task_state_store.write,dag_id=d,task_id=task_{i:02d},run_type=manual,operator=X:{i + 1}|c"
        for i in range(40)
    )
    assert 1 < len(udp_receiver.datagrams) < 40
    assert all(len(d) <= 512 for d in udp_receiver.datagrams)
