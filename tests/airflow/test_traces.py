"""Traces through real Airflow: state store calls as spans under the task's own span, read off the wire.

Airflow exports its traces (``[traces] otel_on``, ``OTEL_TRACES_EXPORTER=otlp_proto_http``) to a
real OTLP/HTTP receiver on 127.0.0.1 (:class:`testbed.otlp.OtlpReceiver`), which decodes every
export. The span tree is Airflow's own: under the LocalExecutor each try runs in the Task SDK's task
process, whose runner opens ``worker.<task_id>``; the plugin's spans must be its children. A retried
attempt's decision is on its first read's span and on the task's span. With Airflow's traces off,
or ``[store_metrics] traces = off``, the plugin makes no span at all (``dag.test()`` runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cluster import Cluster
from support.traced_airflow import DAG_ID, SERVER, call, retry_tree, route, traced_cluster, traces_env
from testbed.airflow import AirflowHome
from testbed.otlp import TRACES_PATH, OtlpReceiver, OtlpSpan

pytestmark = [pytest.mark.airflow]


def endpoint(receiver: OtlpReceiver) -> str:
    return f"http://127.0.0.1:{receiver.port}{TRACES_PATH}"


def ours(spans: list[OtlpSpan]) -> list[OtlpSpan]:
    return [s for s in spans if s.scope == "store_metrics"]


# -- a real task process under the LocalExecutor: the span tree ---------------------------------------


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    sink = OtlpReceiver()
    yield sink
    sink.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver) -> Iterator[Cluster]:
    with traced_cluster(tmp_path_factory.mktemp("traces"), endpoint(receiver)) as airflow:
        yield airflow


@pytest.mark.slow
def test_a_retrys_state_store_calls_are_spans_under_each_tries_task_span(
    cluster: Cluster, receiver: OtlpReceiver
) -> None:
    cluster.trigger(DAG_ID, "traced")
    assert cluster.wait_for_runs(DAG_ID, ["traced"], 240) == {"traced": "success"}, cluster.tails()
    instances = {ti["task_id"]: ti["try_number"] for ti in cluster.task_instances(DAG_ID)}
    assert instances == {"resumes": 2, "starts_over": 2}

    def workers() -> dict[tuple[str, int], OtlpSpan]:
        found = [s for s in receiver.spans() if s.name in ("worker.resumes", "worker.starts_over")]
        return {
            (s.attributes["airflow.task_id"], s.attributes["airflow.task_instance.try_number"]): s
            for s in found
        }

    # Each task process flushes its spans as it ends; the run's success can come a moment before.
    cluster.wait(lambda: len(workers()) == 4 and len(ours(receiver.spans())) == 5, 60, "every try's spans")
    by_id = {s.span_id: s for s in receiver.spans()}
    tree: dict[tuple[str, int], list[tuple[str, int, dict[str, Any]]]] = {}
    for (task_id, try_number), worker in workers().items():
        children = sorted(
            (s for s in ours(receiver.spans()) if s.parent_id == worker.span_id), key=lambda s: s.start_ns
        )
        assert {s.trace_id for s in children} <= {worker.trace_id}
        tree[(task_id, try_number)] = [(s.name, s.kind, s.attributes) for s in children]
    assert tree == retry_tree(call)
    # Every span of ours is one of those (none orphaned, none under anything else) ...
    assert all(by_id[s.parent_id].name.startswith("worker.") for s in ours(receiver.spans()))
    # ... and the decision is on the task's own span of the retried try, so a trace search finds it.
    retry = {key: span.attributes.get("store_metrics.retry") for key, span in workers().items()}
    assert retry == {
        ("resumes", 1): None,
        ("resumes", 2): "resumed",
        ("starts_over", 1): None,
        ("starts_over", 2): "started_over",
    }


# -- count_at = api_server: the route spans, in the task's trace --------------------------------------


@pytest.fixture(scope="module")
def api_server_receiver() -> Iterator[OtlpReceiver]:
    sink = OtlpReceiver()
    yield sink
    sink.close()


@pytest.fixture(scope="module")
def counted_at_api_server(
    tmp_path_factory: pytest.TempPathFactory, api_server_receiver: OtlpReceiver
) -> Iterator[Cluster]:
    with traced_cluster(
        tmp_path_factory.mktemp("traces-api-server"),
        endpoint(api_server_receiver),
        AIRFLOW__STORE_METRICS__COUNT_AT="api_server",
    ) as airflow:
        yield airflow


@pytest.mark.slow
def test_under_count_at_api_server_the_route_spans_are_in_each_tries_trace(
    counted_at_api_server: Cluster, api_server_receiver: OtlpReceiver
) -> None:
    cluster, receiver = counted_at_api_server, api_server_receiver
    cluster.trigger(DAG_ID, "served")
    assert cluster.wait_for_runs(DAG_ID, ["served"], 240) == {"served": "success"}, cluster.tails()

    def workers() -> dict[tuple[str, int], OtlpSpan]:
        found = [s for s in receiver.spans() if s.name in ("worker.resumes", "worker.starts_over")]
        return {
            (s.attributes["airflow.task_id"], s.attributes["airflow.task_instance.try_number"]): s
            for s in found
        }

    # A retried attempt's first read is exported once the API server has decided it.
    cluster.wait(
        lambda: (
            len(workers()) == 4
            and len(ours(receiver.spans())) == 5
            and sum("store_metrics.retry" in s.attributes for s in ours(receiver.spans())) == 2
        ),
        60,
        "every try's spans and both decisions",
    )
    tree: dict[tuple[str, int], list[tuple[str, int, dict[str, Any]]]] = {}
    for (task_id, try_number), worker in workers().items():
        children = sorted(
            (s for s in ours(receiver.spans()) if s.parent_id == worker.span_id), key=lambda s: s.start_ns
        )
        assert {s.trace_id for s in children} <= {worker.trace_id}
        tree[(task_id, try_number)] = [(s.name, s.kind, s.attributes) for s in children]
    assert tree == retry_tree(route)
    # The task processes made no span of ours: they count nothing under count_at = api_server.
    assert {s.kind for s in ours(receiver.spans())} == {SERVER}


# -- traces off: no span (dag.test(), one fresh process a run) --------------------------------------


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    from store_metrics import example_dags

    home = AirflowHome(tmp_path_factory.mktemp("traces-home"))
    home.dags.mkdir(parents=True)
    source = Path(example_dags.__file__).parent / "state_store_metrics_01.py"
    (home.dags / source.name).write_text(source.read_text())
    home.migrate()
    return home


@pytest.mark.parametrize(
    ("otel_on", "traces", "spans_of_ours"),
    [
        (False, "auto", 0),  # Airflow's traces off: no provider, no span at all
        (False, "on", 0),  # the plugin's on, but nothing to send spans through: said once
        (True, "off", 0),  # Airflow's traces on, the plugin's off
        (True, "auto", 3),  # both on: the DAG's three calls (what the two above would have sent)
    ],
)
def test_a_dag_run_with_traces_off_produces_no_span(
    home: AirflowHome, tmp_path: Path, otel_on: bool, traces: str, spans_of_ours: int
) -> None:
    receiver = OtlpReceiver()
    try:
        env = home.env(**traces_env(endpoint(receiver), otel_on, AIRFLOW__STORE_METRICS__TRACES=traces))
        result = home.run(tmp_path, ["state_store_metrics_01"], env)
        assert result["runs"] == [["state_store_metrics_01", "success"]]
        # The exporter posts synchronously, and the process has exited: whatever it sent is here.
        spans = receiver.spans()
        if not otel_on:
            assert receiver.trace_requests == []
        no_provider = "traces = on, but no OpenTelemetry tracer provider is set in this process"
        assert (no_provider in result["log"]) == (traces == "on")
        assert [(s.name, s.attributes["store_metrics.outcome"]) for s in ours(spans)] == [
            ("get task_state_store", "absent"),
            ("set task_state_store", "written"),
            ("get task_state_store", "found"),
        ][:spans_of_ours]
    finally:
        receiver.close()
