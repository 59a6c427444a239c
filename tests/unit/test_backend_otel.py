"""The ``otel`` adapter: what the OpenTelemetry SDK really collects and exports.

Three real outputs: the SDK's ``InMemoryMetricReader`` (on a ``MeterProvider`` passed in), the
Prometheus exposition text of the ``prometheus`` exporter fetched over HTTP, and the protobuf
requests the ``otlp`` exporter POSTs to a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality as ProtoTemporality
from opentelemetry.sdk.metrics import MeterProvider, ObservableCounter
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

import store_metrics
from store_metrics import catalogue, naming
from store_metrics.emitter import AggregatingEmitter
from support.stores import DictStore
from support.tags import HOSTILE_VALUES, TAGS
from testbed.otlp import OtlpReceiver
from testbed.ports import free_port
from testbed.waiting import wait_until

WRITE = catalogue.get("task_state_store.write")
READ_FOUND = catalogue.get("task_state_store.read_found")


def collected(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], int, Any]]]:
    """One collection: {metric name: [(attributes, value, temporality), ...]}."""
    data = reader.get_metrics_data()
    out: dict[str, list[tuple[dict[str, Any], int, Any]]] = {}
    if data is None:
        return out
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out[metric.name] = [
                    (dict(p.attributes), p.value, metric.data.aggregation_temporality)
                    for p in metric.data.data_points
                ]
    return out


def in_memory(
    temporality: AggregationTemporality | None = None,
) -> tuple[MeterProvider, InMemoryMetricReader]:
    preferred = {ObservableCounter: temporality} if temporality is not None else None
    reader = InMemoryMetricReader(preferred_temporality=preferred)
    return MeterProvider(metric_readers=[reader], shutdown_on_exit=False), reader


@pytest.fixture
def otlp() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    yield receiver
    # Close the emitter while the endpoint still answers, so its last export does not retry
    # against a closed port in the background of later tests.
    assert store_metrics.shutdown(10.0)
    receiver.close()


# -- the in-memory reader ----------------------------------------------------------------------


def test_a_task_that_reads_a_missing_key_then_writes_it() -> None:
    provider, reader = in_memory()
    emitter = store_metrics.configure("otel", meter_provider=provider)
    assert emitter.flush(5.0)  # the worker has opened the backend: no race
    store = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    store.get("job_id")
    store.set("job_id", "abc")
    cumulative = AggregationTemporality.CUMULATIVE
    assert collected(reader) == {
        "airflow.task_state_store.read_absent": [(TAGS, 1, cumulative)],
        "airflow.task_state_store.write": [(TAGS, 1, cumulative)],
    }


def test_instruments_have_the_catalogues_names_units_and_descriptions() -> None:
    provider, reader = in_memory()
    emitter = store_metrics.configure("otel", meter_provider=provider, prefix="platform.airflow")
    assert emitter.flush(5.0)  # the worker has opened the backend: no race
    for metric in catalogue.STATE_STORE_METRICS:
        emitter.counter(metric, TAGS).add(1)
    data = reader.get_metrics_data()
    assert data is not None
    (rm,) = data.resource_metrics
    (sm,) = rm.scope_metrics
    assert sm.scope.name == "store_metrics"
    assert sm.scope.version == store_metrics.__version__
    described = {m.name: (m.unit, m.description, m.data.is_monotonic) for m in sm.metrics}
    assert described == {
        f"platform.airflow.{m.name}": ("{call}", m.description, True) for m in catalogue.STATE_STORE_METRICS
    }


def test_cumulative_values_grow_and_two_series_stay_apart() -> None:
    provider, reader = in_memory()
    emitter = store_metrics.configure("otel", meter_provider=provider)
    assert emitter.flush(5.0)  # the worker has opened the backend: no race
    other = {**TAGS, "task_id": "u", "team_name": "ml"}
    emitter.counter(WRITE, TAGS).add(2)
    assert collected(reader)["airflow.task_state_store.write"] == [
        (TAGS, 2, AggregationTemporality.CUMULATIVE)
    ]
    emitter.counter(WRITE, TAGS).add(3)
    emitter.counter(WRITE, other).add(1)
    points = collected(reader)["airflow.task_state_store.write"]
    assert sorted(points, key=lambda p: p[0]["task_id"]) == [
        (TAGS, 5, AggregationTemporality.CUMULATIVE),
        (other, 1, AggregationTemporality.CUMULATIVE),
    ]


def test_delta_values_are_what_was_counted_since_the_last_collection() -> None:
    provider, reader = in_memory(AggregationTemporality.DELTA)
    emitter = store_metrics.configure("otel", meter_provider=provider)
    assert emitter.flush(5.0)  # the worker has opened the backend: no race
    delta = AggregationTemporality.DELTA
    emitter.counter(WRITE, TAGS).add(2)
    assert collected(reader) == {"airflow.task_state_store.write": [(TAGS, 2, delta)]}
    emitter.counter(WRITE, TAGS).add(3)
    assert collected(reader) == {"airflow.task_state_store.write": [(TAGS, 3, delta)]}
    # Nothing new: the series reports a delta of 0.
    assert collected(reader) == {"airflow.task_state_store.write": [(TAGS, 0, delta)]}


def test_hostile_values_become_one_escaped_attribute_each() -> None:
    provider, reader = in_memory()
    emitter = store_metrics.configure("otel", meter_provider=provider)
    assert emitter.flush(5.0)  # the worker has opened the backend: no race
    for hostile in HOSTILE_VALUES:
        emitter.counter(READ_FOUND, {**TAGS, "dag_id": hostile}).add(1)
    points = collected(reader)["airflow.task_state_store.read_found"]
    assert sorted(p[0]["dag_id"] for p in points) == sorted(naming.tag_value(v) for v in HOSTILE_VALUES)
    assert all(p[1] == 1 and set(p[0]) == set(TAGS) for p in points)
    assert "x%0Aairflow.evil%3A1%7Cc" in {p[0]["dag_id"] for p in points}


def test_configuring_again_on_the_same_provider_keeps_counting() -> None:
    provider, reader = in_memory()
    first = store_metrics.configure("otel", meter_provider=provider)
    assert first.flush(5.0)  # the worker has opened the backend: no race
    first.counter(WRITE, TAGS).add(2)
    assert collected(reader)["airflow.task_state_store.write"][0][1] == 2
    second = store_metrics.configure("otel", meter_provider=provider)
    assert second.flush(5.0)  # the worker has opened the backend: no race
    second.counter(WRITE, TAGS).add(5)
    # The first emitter's 2 stay in the cumulative value: a counter never goes down.
    assert collected(reader)["airflow.task_state_store.write"][0][1] == 7
    store_metrics.shutdown(2.0)
    assert collected(reader)["airflow.task_state_store.write"][0][1] == 7


def test_the_global_sdk_provider_is_used_and_never_replaced() -> None:
    # A fresh process: the global provider can be set only once per process.
    script = textwrap.dedent(
        """
        import json
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        import store_metrics
        from store_metrics import catalogue

        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        metrics.set_meter_provider(provider)
        emitter = store_metrics.configure("otel", exporter="prometheus", prometheus_port=1)
        emitter.counter(catalogue.get("task_state_store.write"), {"dag_id": "d"}).add(3)
        assert emitter.flush(5.0)
        data = reader.get_metrics_data()
        points = [(m.name, dict(p.attributes), p.value)
                  for rm in data.resource_metrics for sm in rm.scope_metrics
                  for m in sm.metrics for p in m.data.data_points]
        print(json.dumps({"points": points, "same": metrics.get_meter_provider() is provider}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # No scrape endpoint was started (port 1 would have failed): the global provider was used.
    assert result == {"points": [["airflow.task_state_store.write", {"dag_id": "d"}, 3]], "same": True}


# -- the Prometheus exposition -----------------------------------------------------------------

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode("utf-8"))
    except OSError:
        return None


def samples(text: str, name: str) -> list[tuple[dict[str, str], str]]:
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a well-formed exposition line: {line!r}"
        if match["name"] == name:
            labels = dict(_LABEL.findall(match["labels"] or ""))
            out.append((labels, match["value"]))
    return out


def _serves_instance(port: int, instance_id: str) -> bool:
    text = scrape(port)
    return bool(text and instance_id and f'service_instance_id="{instance_id}"' in text)


def prometheus(**options: Any) -> tuple[AggregatingEmitter, int]:
    """An emitter serving its scrape endpoint on a free port, and that port.

    A free port can be taken by another process before the endpoint binds it; then the
    endpoint answering on it is not ours. The check counter (which the tests here do not read)
    makes ``target_info`` appear with our instance id; with another port if it does not.
    """
    for _ in range(3):
        port = free_port()
        emitter = store_metrics.configure(
            "otel", exporter="prometheus", prometheus_port=port, prometheus_host="127.0.0.1", **options
        )
        emitter.counter(catalogue.CHECK, {}).add(1)
        backend: Any = emitter.backend
        try:
            wait_until(lambda: _serves_instance(port, backend.instance_id), timeout=5)  # noqa: B023
        except AssertionError:
            store_metrics.shutdown(2.0)
            continue
        return emitter, port
    raise AssertionError("could not serve a scrape endpoint on a free port")


def test_prometheus_shows_the_upstream_series() -> None:
    emitter, port = prometheus()
    store = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    store.set("k", 1)
    store.get("k")
    text = scrape(port)
    assert text is not None
    scope = {"otel_scope_name": "store_metrics", "otel_scope_version": store_metrics.__version__}
    (found,) = samples(text, "airflow_task_state_store_read_found_total")
    labels, value = found
    assert value == "1.0"
    assert {k: v for k, v in labels.items() if not k.startswith("otel_scope_")} == TAGS
    assert {k: v for k, v in labels.items() if k in scope} == scope
    assert [v for _, v in samples(text, "airflow_task_state_store_write_total")] == ["1.0"]
    assert samples(text, "airflow_task_state_store_read_absent_total") == []
    (target,) = samples(text, "target_info")
    uuid.UUID(target[0]["service_instance_id"])
    assert target[0]["service_name"] == "airflow"
    # A scrape reads the live totals: no flush needed.
    store.get("k")
    text = scrape(port)
    assert text is not None
    assert [v for _, v in samples(text, "airflow_task_state_store_read_found_total")] == ["2.0"]


def test_prometheus_text_with_a_hostile_dag_id_has_one_clean_series() -> None:
    emitter, port = prometheus()
    emitter.counter(READ_FOUND, {**TAGS, "dag_id": "x\nairflow.evil:1|c"}).add(1)
    text = scrape(port)
    assert text is not None
    (found,) = samples(text, "airflow_task_state_store_read_found_total")
    assert found[0]["dag_id"] == "x%0Aairflow.evil%3A1%7Cc"
    assert found[1] == "1.0"
    assert not any(
        line.startswith("airflow.evil") or line.startswith("airflow_evil") for line in text.splitlines()
    )


# -- OTLP over HTTP ----------------------------------------------------------------------------


def test_otlp_sends_delta_counts_with_a_process_instance_id(
    otlp: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", otlp.endpoint)
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    emitter = store_metrics.configure("otel", flush_interval=60)
    store = store_metrics.instrument_task_store(DictStore(), emitter, TAGS)
    store.get("k")
    store.set("k", 1)
    store.set("k", 2)
    assert emitter.flush(10.0)
    first = otlp.points()
    assert sorted((p.name, p.value) for p in first) == [
        ("airflow.task_state_store.read_absent", 1),
        ("airflow.task_state_store.write", 2),
    ]
    store.set("k", 3)
    assert emitter.flush(10.0)
    second = otlp.points()[len(first) :]
    # Delta: what was counted since the last export (a series with nothing new reports 0).
    assert sorted((p.name, p.value) for p in second) == [
        ("airflow.task_state_store.read_absent", 0),
        ("airflow.task_state_store.write", 1),
    ]
    for point in otlp.points():
        assert point.attributes == TAGS
        assert point.temporality == ProtoTemporality.AGGREGATION_TEMPORALITY_DELTA
        assert point.monotonic
        assert point.resource["service.name"] == "airflow"
        assert point.resource["service.instance.id"] == first[0].resource["service.instance.id"]
    uuid.UUID(first[0].resource["service.instance.id"])
    assert set(otlp.paths) == {"/v1/metrics"}


def test_otlp_cumulative_when_asked(otlp: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", otlp.endpoint)
    emitter = store_metrics.configure("otel", temporality="cumulative", flush_interval=60)
    emitter.counter(WRITE, TAGS).add(2)
    assert emitter.flush(10.0)
    emitter.counter(WRITE, TAGS).add(1)
    assert emitter.flush(10.0)
    values = [(p.value, p.temporality) for p in otlp.points() if p.name == "airflow.task_state_store.write"]
    cumulative = ProtoTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
    assert values == [(2, cumulative), (3, cumulative)]


@pytest.mark.parametrize(
    ("env", "service_name"),
    [
        ({}, "airflow"),
        ({"OTEL_SERVICE_NAME": "workers"}, "workers"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment=prod"}, "from-attrs"),
    ],
)
def test_otlp_service_name_follows_the_standard_variables(
    otlp: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], service_name: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", otlp.endpoint)
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    emitter = store_metrics.configure("otel", flush_interval=60)
    emitter.counter(WRITE, TAGS).add(1)
    assert emitter.flush(10.0)
    (point,) = otlp.points()
    assert point.resource["service.name"] == service_name
    uuid.UUID(point.resource["service.instance.id"])


def test_each_emitter_of_its_own_gets_a_new_instance_id(
    otlp: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", otlp.endpoint)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=shared")
    ids = []
    for _ in range(2):
        emitter = store_metrics.configure("otel", flush_interval=60)
        emitter.counter(WRITE, TAGS).add(1)
        assert emitter.flush(10.0)
        ids.append(otlp.points()[-1].resource["service.instance.id"])
    assert ids[0] != ids[1]
    assert "shared" not in ids


def test_a_process_that_exits_right_after_counting_still_exports() -> None:
    """configure(), count, exit at once: the exit flush reaches a healthy OTLP endpoint.

    The exporter's modules are imported at configuration time, so the worker does not have to
    import them while the interpreter is shutting down.
    """
    import os
    import subprocess
    import sys

    from testbed.otlp import OtlpReceiver

    receiver = OtlpReceiver()
    try:
        script = (
            "import store_metrics\n"
            "from store_metrics import catalogue\n"
            "e = store_metrics.configure('otel', flush_interval=60, exit_timeout=5)\n"
            "c = e.counter(catalogue.get('task_state_store.write'), {'dag_id': 'quick', 'task_id': 't',"
            " 'run_type': 'manual', 'operator': 'Op'})\n"
            "c.add(); c.add(); c.add()\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AIRFLOW__"))}
        env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = receiver.endpoint
        proc = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 0, proc.stderr
        writes = [p for p in receiver.points() if p.name == "airflow.task_state_store.write"]
        assert sum(p.value for p in writes) == 3, proc.stderr
    finally:
        receiver.close()


def test_a_reader_right_after_configure_sees_the_counts() -> None:
    """With a MeterProvider of your own, instruments exist when configure() returns.

    Opening the OTel backend does no network I/O, so it happens on the configuring thread: a
    collection right after configure() sees the counters, with no flush and no race with the
    emitter's worker thread.
    """
    import threading

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    import store_metrics
    from store_metrics import catalogue

    class RecordingProvider(MeterProvider):
        threads: list[threading.Thread] = []  # noqa: RUF012

        def get_meter(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.threads.append(threading.current_thread())
            return super().get_meter(*args, **kwargs)

    reader = InMemoryMetricReader()
    provider = RecordingProvider(metric_readers=[reader])
    emitter = store_metrics.configure("otel", meter_provider=provider)
    assert provider.threads == [threading.current_thread()]
    emitter.counter(
        catalogue.get("task_state_store.write"),
        {"dag_id": "d", "task_id": "t", "run_type": "manual", "operator": "Op"},
    ).add(2)
    data = reader.get_metrics_data()
    points = [
        (m.name, p.value)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        for p in m.data.data_points
    ]
    assert points == [("airflow.task_state_store.write", 2)]
