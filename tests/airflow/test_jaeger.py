"""A retried task's trace, read back from a real Jaeger v2 the way a person debugging the run would.

Real Airflow (the set-up of the traces tests, ``support.traced_airflow``) runs a DAG whose two
tasks are retried once: ``resumes`` finds on its retry what its first try saved, ``starts_over``
finds nothing. Airflow exports its spans over OTLP/HTTP to Jaeger 2.12.0, built from its Go module
(``testbed.peers``) and configured exactly as docs/traces.md shows (``support.jaeger``). The
test then does what the page tells a user to: finds the run's trace by its run id through Jaeger's
query API, reads it back whole (API v3), and checks the state store spans in it, with their names,
kinds and attributes, under each try's ``worker.<task_id>`` span; and that a search for
``store_metrics.retry=started_over`` finds that trace. Under ``count_at = api_server`` the API
server's route spans are in the same trace, under the same task spans.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support.cluster import Cluster
from support.jaeger import Jaeger, JaegerSpan
from support.traced_airflow import CLIENT, DAG_ID, SERVER, TASKS, call, retry_tree, route, traced_cluster

pytestmark = [pytest.mark.airflow, pytest.mark.peers, pytest.mark.slow]

SERVICE = "airflow"
Tree = dict[tuple[str, int], list[tuple[str, int, dict[str, Any]]]]


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    server = Jaeger(tmp_path_factory.mktemp("jaeger"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, jaeger: Jaeger
) -> Iterator[Cluster]:
    """Airflow counting where the test says (``tasks`` or ``api_server``), its traces sent to Jaeger
    under the service name ``airflow``; one at a time (pytest ends one before it starts the next)."""
    count_at = str(request.param)
    with traced_cluster(
        tmp_path_factory.mktemp(f"jaeger-{count_at}"),
        jaeger.traces_endpoint,
        AIRFLOW__STORE_METRICS__COUNT_AT=count_at,
        OTEL_SERVICE_NAME=SERVICE,
    ) as airflow:
        yield airflow


def workers(spans: list[JaegerSpan]) -> dict[tuple[str, int], JaegerSpan]:
    """Each try's ``worker.<task_id>`` span, by (task id, try number)."""
    return {
        (s.attributes["airflow.task_id"], s.attributes["airflow.task_instance.try_number"]): s
        for s in spans
        if s.name in {f"worker.{task}" for task in TASKS}
    }


def ours(spans: list[JaegerSpan]) -> list[JaegerSpan]:
    return [s for s in spans if s.scope == "store_metrics"]


def tree(spans: list[JaegerSpan]) -> Tree:
    """The spans of ours under each try's task span, in the order they started."""
    return {
        key: [
            (s.name, s.kind, s.attributes)
            for s in sorted(ours(spans), key=lambda s: s.start_ns)
            if s.parent_id == worker.span_id
        ]
        for key, worker in workers(spans).items()
    }


def run_and_read_back(cluster: Cluster, jaeger: Jaeger, run_id: str, decisions: int) -> list[JaegerSpan]:
    """Trigger a run, wait for it, then find its trace in Jaeger by run id (the UI's search) and read
    it back whole, once Jaeger holds every try's spans and ``decisions`` retry decisions."""
    cluster.trigger(DAG_ID, run_id)
    assert cluster.wait_for_runs(DAG_ID, [run_id], 240) == {run_id: "success"}, cluster.tails()
    assert {ti["task_id"]: ti["try_number"] for ti in cluster.task_instances(DAG_ID)} == dict.fromkeys(
        TASKS, 2
    )
    found: dict[str, list[str]] = {}
    spans: list[JaegerSpan] = []

    def complete() -> bool:
        nonlocal spans
        found["ids"] = jaeger.find(SERVICE, {"airflow.dag_run.run_id": run_id})
        if len(found["ids"]) != 1:
            return False
        spans = jaeger.trace(found["ids"][0])
        mine = ours(spans)
        return (
            len(workers(spans)) == 4
            and len(mine) == 5
            and sum("store_metrics.retry" in s.attributes for s in mine) == decisions
        )

    # Each task process flushes its spans as it ends, the API server once a retry is decided; the
    # run's success can come a moment before Jaeger has them all.
    cluster.wait(complete, 60, f"one trace of run {run_id} in Jaeger with every try's spans")
    (trace_id,) = found["ids"]
    assert {s.trace_id for s in spans} == {trace_id}
    assert {s.service for s in ours(spans)} == {SERVICE}
    return spans


@pytest.mark.parametrize("cluster", ["tasks"], indirect=True)
def test_a_retried_tasks_trace_in_jaeger_shows_its_state_store_calls_and_the_resume(
    cluster: Cluster, jaeger: Jaeger
) -> None:
    spans = run_and_read_back(cluster, jaeger, "traced", decisions=2)
    # One DAG run, one trace: every try of both tasks, each with its state store calls under it.
    assert tree(spans) == retry_tree(call)
    assert {s.kind for s in ours(spans)} == {CLIENT}
    # The retried try's own span says whether it resumed, so a trace search finds it ...
    retry = {key: span.attributes.get("store_metrics.retry") for key, span in workers(spans).items()}
    assert retry == {
        ("resumes", 1): None,
        ("resumes", 2): "resumed",
        ("starts_over", 1): None,
        ("starts_over", 2): "started_over",
    }
    # ... as docs/traces.md says: every retry that started over, found by that tag.
    assert jaeger.find(SERVICE, {"store_metrics.retry": "started_over"}) == [spans[0].trace_id]


@pytest.mark.parametrize("cluster", ["api_server"], indirect=True)
def test_under_count_at_api_server_jaeger_shows_the_route_spans_in_the_tasks_trace(
    cluster: Cluster, jaeger: Jaeger
) -> None:
    spans = run_and_read_back(cluster, jaeger, "served", decisions=2)
    assert tree(spans) == retry_tree(route)
    # The task processes made no span of ours: under count_at = api_server they count nothing.
    assert {s.kind for s in ours(spans)} == {SERVER}
