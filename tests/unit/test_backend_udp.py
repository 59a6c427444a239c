r"""The ``statsd`` and ``dogstatsd`` backends: the exact bytes each sends through a real UDP socket.

Both are ``LineBackend``s over one socket on 127.0.0.1; they
differ in where the tags go (``name,k=v:1|c`` against ``name:1|c|#k:v``), the datagram size and its end.
The DogStatsD one sends no container field (``|c:``), no client telemetry, and no tags taken from
the environment.
"""

from __future__ import annotations

from typing import Any

import pytest

import store_metrics
from store_metrics import catalogue, naming
from store_metrics.emitter import AggregatingEmitter
from support.lines import parse_dogstatsd, parse_influx
from support.tags import DOG_TAGS, HOSTILE_VALUES, TAGS, WIRE_TAGS
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

WRITE = catalogue.get("task_state_store.write")

# Variables datadog's client reads on its own (tags, origin, cardinality, kill switch).
DD_VARIABLES = (
    "DD_ENV",
    "DD_SERVICE",
    "DD_VERSION",
    "DD_ENTITY_ID",
    "DATADOG_TAGS",
    "DD_TAGS",
    "DD_EXTERNAL_ENV",
    "DD_CARDINALITY",
    "DD_DOGSTATSD_DISABLE",
    "DD_ORIGIN_DETECTION_ENABLED",
    "DD_DOGSTATSD_URL",
    "DD_TELEMETRY_HOST",
    "DD_TELEMETRY_PORT",
)


def configure(backend: str, receiver: UdpReceiver, **options: Any) -> AggregatingEmitter:
    """``backend`` sending to ``receiver``, flushed only when a test asks."""
    return store_metrics.configure(
        backend, host="127.0.0.1", port=receiver.port, flush_interval=60.0, **options
    )


class TestStatsd:
    """``statsd``: InfluxDB-style tags in the name, datagrams of at most 512 bytes."""

    def test_one_write_is_exactly_this_datagram(self, udp_receiver: UdpReceiver) -> None:
        emitter = configure("statsd", udp_receiver)
        emitter.counter(WRITE, TAGS).add(1)
        assert emitter.flush(5.0)
        wait_until(lambda: udp_receiver.datagrams)
        assert udp_receiver.datagrams == [
            b"airflow.task_state_store.write,dag_id=d,task_id=t,run_type=manual,operator=X:1|c"
        ]

    def test_summed_value_team_name_and_error_operation(self, udp_receiver: UdpReceiver) -> None:
        emitter = configure("statsd", udp_receiver)
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
    def test_prefix(self, udp_receiver: UdpReceiver, prefix: str, name: str) -> None:
        emitter = configure("statsd", udp_receiver, prefix=prefix)
        emitter.counter(WRITE, TAGS).add(2)
        assert emitter.flush(5.0)
        assert udp_receiver.wait_for_lines(1) == [f"{name}task_state_store.write,{WIRE_TAGS}:2|c"]

    def test_hostile_tag_values_each_yield_one_well_formed_line(self, udp_receiver: UdpReceiver) -> None:
        emitter = configure("statsd", udp_receiver)
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
        assert sorted(seen) == sorted(naming.tag_value(v) for v in HOSTILE_VALUES)
        assert "x%0Aairflow.evil%3A1%7Cc" in seen
        assert not any(line.startswith("airflow.evil") for line in lines)

    def test_many_series_are_packed_into_datagrams_of_at_most_512_bytes(
        self, udp_receiver: UdpReceiver
    ) -> None:
        emitter = configure("statsd", udp_receiver)
        for i in range(40):
            emitter.counter(WRITE, {**TAGS, "task_id": f"task_{i:02d}"}).add(i + 1)
        assert emitter.flush(5.0)
        lines = udp_receiver.wait_for_lines(40)
        assert sorted(lines) == sorted(
            f"airflow.task_state_store.write,dag_id=d,task_id=task_{i:02d},"
            f"run_type=manual,operator=X:{i + 1}|c"
            for i in range(40)
        )
        assert 1 < len(udp_receiver.datagrams) < 40
        assert all(len(d) <= 512 for d in udp_receiver.datagrams)


class TestDogstatsd:
    """``dogstatsd``: ``|#k:v`` tags, datagrams ending with a newline as datadog's client's do."""

    @pytest.fixture(autouse=True)
    def _clean_datadog_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in DD_VARIABLES:
            monkeypatch.delenv(name, raising=False)

    def test_one_write_is_exactly_this_datagram(self, udp_receiver: UdpReceiver) -> None:
        emitter = configure("dogstatsd", udp_receiver)
        emitter.counter(WRITE, TAGS).add(1)
        assert emitter.flush(5.0)
        wait_until(lambda: udp_receiver.datagrams)
        # Each datagram ends with a newline, as datadog's own client ends its buffered ones.
        assert udp_receiver.datagrams == [
            b"airflow.task_state_store.write:1|c|#dag_id:d,task_id:t,run_type:manual,operator:X\n"
        ]

    def test_summed_value_team_name_and_error_operation(self, udp_receiver: UdpReceiver) -> None:
        emitter = configure("dogstatsd", udp_receiver)
        for _ in range(3):
            emitter.counter(WRITE, {**TAGS, "team_name": "ml"}).add(1)
        emitter.counter(catalogue.get("task_state_store.error"), {**TAGS, "operation": "delete"}).add(2)
        assert emitter.flush(5.0)
        assert sorted(udp_receiver.wait_for_lines(2)) == [
            f"airflow.task_state_store.error:2|c|#{DOG_TAGS},operation:delete",
            f"airflow.task_state_store.write:3|c|#{DOG_TAGS},team_name:ml",
        ]

    def test_prefix_is_the_namespace(self, udp_receiver: UdpReceiver) -> None:
        emitter = configure("dogstatsd", udp_receiver, prefix="platform.airflow")
        emitter.counter(WRITE, TAGS).add(1)
        assert emitter.flush(5.0)
        assert udp_receiver.wait_for_lines(1) == [f"platform.airflow.task_state_store.write:1|c|#{DOG_TAGS}"]

    def test_datadogs_environment_variables_change_no_byte(
        self, udp_receiver: UdpReceiver, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Every variable datadog's client reads, set: origin detection on (it would add ``|c:<container
        id>``, which statsd_exporter drops), global tags, a kill switch, another address. The backend
        writes its own bytes (store_metrics.backends.statsd_lines) and reads none of them: the datagram is
        the one a clean environment gives, and it reaches the configured socket."""
        given = {
            "DD_ENV": "prod",
            "DD_SERVICE": "svc",
            "DD_VERSION": "1.2.3",
            "DD_ENTITY_ID": "0f3c7e4a-pod-uid",
            "DATADOG_TAGS": "datadog_tag:x",
            "DD_TAGS": "dd_tag:y",
            "DD_EXTERNAL_ENV": "it-false,cn-airflow,pu-0f3c7e4a",
            "DD_CARDINALITY": "high",
            "DD_DOGSTATSD_DISABLE": "true",
            "DD_ORIGIN_DETECTION_ENABLED": "true",
            "DD_DOGSTATSD_URL": "udp://127.0.0.1:9",
            "DD_TELEMETRY_HOST": "127.0.0.1",
            "DD_TELEMETRY_PORT": "9",
        }
        assert set(given) == set(DD_VARIABLES)
        for name, value in given.items():
            monkeypatch.setenv(name, value)
        emitter = configure("dogstatsd", udp_receiver)
        emitter.counter(WRITE, TAGS).add(1)
        assert emitter.flush(5.0)
        wait_until(lambda: udp_receiver.datagrams)
        assert udp_receiver.datagrams == [f"airflow.task_state_store.write:1|c|#{DOG_TAGS}\n".encode()]

    def test_hostile_tag_values_each_yield_one_well_formed_line(self, udp_receiver: UdpReceiver) -> None:
        emitter = configure("dogstatsd", udp_receiver)
        for hostile in HOSTILE_VALUES:
            emitter.counter(WRITE, {**TAGS, "dag_id": hostile, "task_id": hostile}).add(1)
        assert emitter.flush(5.0)
        lines = udp_receiver.wait_for_lines(len(HOSTILE_VALUES))
        assert len(lines) == len(HOSTILE_VALUES)
        seen = []
        for line in lines:
            name, tags, value = parse_dogstatsd(line)
            assert (name, value) == ("airflow.task_state_store.write", 1)
            assert list(tags) == ["dag_id", "task_id", "run_type", "operator"]
            assert tags["dag_id"] == tags["task_id"]
            seen.append(tags["dag_id"])
        assert sorted(seen) == sorted(naming.tag_value(v) for v in HOSTILE_VALUES)
        assert "x%0Aairflow.evil%3A1%7Cc" in seen

    def test_many_series_in_few_datagrams(self, udp_receiver: UdpReceiver) -> None:
        emitter = configure("dogstatsd", udp_receiver)
        for i in range(40):
            emitter.counter(WRITE, {**TAGS, "task_id": f"task_{i:02d}"}).add(i + 1)
        assert emitter.flush(5.0)
        lines = udp_receiver.wait_for_lines(40)
        assert sorted(lines) == sorted(
            f"airflow.task_state_store.write:{i + 1}|c|#dag_id:d,task_id:task_{i:02d},"
            "run_type:manual,operator:X"
            for i in range(40)
        )
        assert len(udp_receiver.datagrams) < 40

    def test_only_our_lines_never_client_telemetry(self, udp_receiver: UdpReceiver) -> None:
        # The old client-library path could add datadog.dogstatsd.client.* telemetry lines; every byte
        # now comes from store_metrics.backends.statsd_lines, so a flush sends our lines and nothing else.
        emitter = configure("dogstatsd", udp_receiver)
        for _ in range(2):
            emitter.counter(WRITE, TAGS).add(1)
            assert emitter.flush(5.0)
        emitter.counter(catalogue.get("task_state_store.clear"), {"dag_id": "marker"}).add(1)
        assert emitter.flush(5.0)
        marker = "airflow.task_state_store.clear:1|c|#dag_id:marker"
        wait_until(lambda: marker in udp_receiver.lines())
        assert udp_receiver.lines() == [f"airflow.task_state_store.write:1|c|#{DOG_TAGS}"] * 2 + [marker]
