"""The issue's acceptance run under ``airflow standalone``: a retry's trace, and the asset watchers' spans.

One ``airflow standalone`` (api-server, scheduler with the LocalExecutor, dag-processor, triggerer)
per ``count_at`` mode, as a user starts it, with Airflow's traces on (``[traces] otel_on``, exported
over OTLP/HTTP to the pinned Jaeger v2 with the configuration docs/traces.md shows, and read back
through Jaeger's query API, as its UI reads them: support.jaeger). Its DAGs:
the retried tasks of the traces test (``resumes``: try 1 writes and fails, try 2 reads it back;
``starts_over``: both tries find nothing) and the three asset watchers of the triggerer tests, whose
events start their consumer DAGs. Read back from Jaeger:

* each try's ``worker.<task_id>`` span and, under it, its state store calls (the task process's
  CLIENT spans, or under ``count_at = api_server`` the API server's route spans); the retry's
  decision on the first read's span, and on the task's span where the task process decided it;
* each watcher's calls, made in the triggerer, under the span Airflow runs the trigger in (still
  open while the watcher runs; a watcher belongs to no task's trace); a consumer task's read under
  its own task span.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from support.airflow import Standalone
from support.deploy import EXECUTOR_DAGS, MODULES
from support.jaeger import Jaeger, JaegerSpan
from support.traced_airflow import ASSET, DAG_ID, DECIDED, call, retry_tree, route
from support.watchers import CONSUMERS, DAG_FILE
from testbed.ports import free_port
from testbed.repository import python_path
from testbed.waiting import poll

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.peers]

SERVICE = "airflow"  # every component's spans, as docs/traces.md sets OTEL_SERVICE_NAME

RETRIED = DAG_ID


def at_api_server(airflow: Standalone) -> bool:
    return airflow.env["AIRFLOW__STORE_METRICS__COUNT_AT"] == "api_server"


def canonical(tree: list[tuple[str, int, dict[str, Any]]]) -> str:
    """A tree's sort key that does not depend on the order of its attributes (Jaeger's are sorted)."""
    return repr([(name, kind, sorted(attributes.items())) for name, kind, attributes in tree])


class Spans:
    """What Jaeger holds of the service's traces, read again on each call."""

    def __init__(self, jaeger: Jaeger) -> None:
        self.jaeger = jaeger

    def spans(self) -> list[JaegerSpan]:
        return self.jaeger.spans(SERVICE)


def ours(spans: list[JaegerSpan]) -> list[JaegerSpan]:
    return [s for s in spans if s.scope == "store_metrics"]


@pytest.fixture(scope="module", params=["tasks", "api_server"])
def standalone(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Standalone, Spans]]:
    jaeger = Jaeger(tmp_path_factory.mktemp(f"jaeger-{request.param}"))
    airflow = Standalone(
        tmp_path_factory.mktemp(f"traces-standalone-{request.param}"),
        free_port(),
        {
            "AIRFLOW__STORE_METRICS__COUNT_AT": request.param,
            "AIRFLOW__TRACES__OTEL_ON": "True",
            "OTEL_TRACES_EXPORTER": "otlp_proto_http",
            "OTEL_SERVICE_NAME": SERVICE,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": jaeger.traces_endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "AIRFLOW__STORE_METRICS__BACKEND": "none",
            # The watchers' trigger module, which the triggerer imports.
            "PYTHONPATH": python_path(MODULES),
        },
    )
    for dag_file in airflow.home.dags.glob("*.py"):  # the scenario DAGs are not needed here
        dag_file.unlink()
    shutil.copy(DAG_FILE, airflow.home.dags)
    shutil.copy(EXECUTOR_DAGS / f"{RETRIED}.py", airflow.home.dags)
    try:
        airflow.start([RETRIED, *CONSUMERS])
        airflow.trigger(RETRIED)
        assert airflow.wait_for_runs(RETRIED, 1) == ["success"], airflow.log_tail()
        for dag_id in CONSUMERS:
            assert airflow.wait_for_runs(dag_id, 1) == ["success"], airflow.log_tail()
        yield airflow, Spans(jaeger)
    finally:
        airflow.stop()
        jaeger.stop()


def children(held: Spans, parent: JaegerSpan) -> list[tuple[str, int, dict[str, Any]]]:
    found = sorted((s for s in ours(held.spans()) if s.parent_id == parent.span_id), key=lambda s: s.start_ns)
    assert {s.trace_id for s in found} <= {parent.trace_id}
    return [(s.name, s.kind, s.attributes) for s in found]


def test_a_retrys_trace_shows_try_one_writing_failing_and_try_two_reading_found(
    standalone: tuple[Standalone, Spans],
) -> None:
    airflow, held = standalone

    def workers() -> dict[tuple[str, int], JaegerSpan]:
        return {
            (s.attributes["airflow.task_id"], s.attributes["airflow.task_instance.try_number"]): s
            for s in held.spans()
            if s.name in ("worker.resumes", "worker.starts_over")
        }

    poll(
        lambda: len(workers()) == 4 and sum(DECIDED in s.attributes for s in ours(held.spans())) == 2,
        60,
        1.0,
    )
    tree = {key: children(held, worker) for key, worker in workers().items()}
    # count_at = tasks: the task process's CLIENT spans; api_server: the API server's route spans, in
    # the task's trace through the traceparent the supervisor sends on (the task makes none).
    span = route if at_api_server(airflow) else call
    assert tree == retry_tree(span)
    # Both tasks needed their retry (try 1 raised after its calls); both tries of a task are one
    # trace, and the decision is on the retried try's own span too.
    tries = airflow.home.query(
        "select task_id, try_number, state from task_instance where dag_id = ?", RETRIED
    )
    assert sorted(tries) == [("resumes", 2, "success"), ("starts_over", 2, "success")]
    assert workers()[("resumes", 1)].trace_id == workers()[("resumes", 2)].trace_id
    # (Under count_at = api_server the API server decides, after the read was answered: the decision
    # is on its route span only.)
    decided = {key: worker.attributes.get(DECIDED) for key, worker in workers().items()}
    assert decided == {
        ("resumes", 1): None,
        ("resumes", 2): None if at_api_server(airflow) else "resumed",
        ("starts_over", 1): None,
        ("starts_over", 2): None if at_api_server(airflow) else "started_over",
    }


def test_asset_watchers_calls_are_spans_under_their_trigger_span_in_the_triggerer(
    standalone: tuple[Standalone, Spans],
) -> None:
    _, held = standalone

    def watchers() -> dict[str, list[JaegerSpan]]:
        """The triggerer's spans of ours, by parent: Airflow's ``trigger.<name>`` span of each watcher.
        A watcher keeps running, so its span is still open (not exported) while its calls' are."""
        tasks = {s.span_id for s in held.spans() if s.name.startswith("worker.")}
        out: dict[str, list[JaegerSpan]] = {}
        for span in sorted(ours(held.spans()), key=lambda s: s.start_ns):
            if span.parent_id not in tasks:
                out.setdefault(span.parent_id, []).append(span)
        return out

    poll(lambda: sum(map(len, watchers().values())) == 8, 60, 1.0)
    failing = [
        call("get", "error", ASSET, **{"error.type": "airflow.sdk.exceptions.AirflowRuntimeError"}),
        call("set", "error", ASSET, **{"error.type": "ValueError"}),
    ]
    watermark = [call("get", "absent", ASSET), call("set", "written", ASSET), call("get", "found", ASSET)]
    trees = sorted(
        ([(s.name, s.kind, s.attributes) for s in spans] for spans in watchers().values()), key=canonical
    )
    assert trees == sorted([watermark, watermark, failing], key=canonical)
    # Each watcher's calls are under one span (its trigger's), in a trace of its own: a watcher belongs
    # to no task, so none of its calls is in a task's trace.
    task_traces = {s.trace_id for s in held.spans() if s.name.startswith("worker.")}
    for parent, spans in watchers().items():
        assert parent and len({s.trace_id for s in spans}) == 1 and spans[0].trace_id not in task_traces
    # The failing calls' spans are ERROR and hold the exception, which the trigger still got.
    errors = [s for s in ours(held.spans()) if s.attributes.get("store_metrics.outcome") == "error"]
    assert [(s.status_code, [name for name, _ in s.events]) for s in errors] == [(2, ["exception"])] * 2
    # Each consumer task's read of the watermark is a span under its own task's span (the API
    # server's route span under count_at = api_server; the triggerer counts and traces either way).
    reads = Counter(
        (s.name, s.attributes["store_metrics.outcome"])
        for s in ours(held.spans())
        if s.parent_id in {w.span_id for w in held.spans() if w.name.startswith("worker.read_")}
    )
    assert reads == {("get asset_state_store", "found"): 2}
