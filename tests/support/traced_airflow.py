"""Airflow with its traces on, exported over OTLP/HTTP: the set-up every traces test shares.

The traces tests read a DAG run's spans back from a real Jaeger through its query API: under the
LocalExecutor (``tests/airflow/test_jaeger.py``, started here: each try in the Task SDK's own task
process) and under ``airflow standalone`` (``tests/airflow/test_traces_standalone.py``). Both run
the DAG ``store_metrics_traces`` (one retry that resumes, one that starts over), counts sent
nowhere, and expect the trees ``retry_tree`` makes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from support.cluster import Cluster

DAG_ID = "store_metrics_traces"
#: The tasks of ``DAG_ID``, each retried once (``testbed/dags/executors/store_metrics_traces.py``).
TASKS = ("resumes", "starts_over")

SERVER = 2  # opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER
CLIENT = 3  # opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_CLIENT
TASK = {"db.system.name": "airflow.state_store", "db.collection.name": "task_state_store"}
ASSET = {"db.system.name": "airflow.state_store", "db.collection.name": "asset_state_store"}
#: The attribute that says whether a retried try resumed (``resumed``) or started over.
DECIDED = "store_metrics.retry"
METHODS = {"get": "GET", "set": "PUT"}
STATUSES = {"found": 200, "absent": 404, "written": 204}


Span = tuple[str, int, dict[str, Any]]


def call(operation: str, outcome: str, store: dict[str, str] = TASK, **more: str) -> Span:
    """A span of a state store call made in a task or triggerer process (``store``: ``TASK``
    or ``ASSET``), as (name, kind, attributes) (docs/traces.md)."""
    return (
        f"{operation} {store['db.collection.name']}",
        CLIENT,
        {**store, "db.operation.name": operation, "store_metrics.outcome": outcome, **more},
    )


def route(operation: str, outcome: str, **more: str) -> Span:
    """An API server route span of a task store request under ``count_at = api_server``."""
    return (
        f"{operation} task_state_store",
        SERVER,
        {
            **TASK,
            "db.operation.name": operation,
            "store_metrics.outcome": outcome,
            "http.request.method": METHODS[operation],
            "http.response.status_code": STATUSES[outcome],
            **more,
        },
    )


def retry_tree(span: Callable[..., Span]) -> dict[tuple[str, int], list[Span]]:
    """The spans under each try's ``worker.<task_id>`` span of ``DAG_ID``'s run, by (task, try),
    made by ``span`` (``call`` for the task processes', ``route`` for the API server's):
    try 1 of ``resumes`` writes and fails, try 2 reads it back; both tries of ``starts_over`` find
    nothing. The decision is on the retried try's first read."""
    return {
        ("resumes", 1): [span("set", "written")],
        ("resumes", 2): [span("get", "found", **{DECIDED: "resumed"})],
        ("starts_over", 1): [span("get", "absent")],
        ("starts_over", 2): [span("get", "absent", **{DECIDED: "started_over"}), span("set", "written")],
    }


def traces_env(endpoint: str, otel_on: bool, **more: str) -> dict[str, str]:
    """Airflow's traces exported over OTLP/HTTP to ``endpoint`` (the full URL, ``.../v1/traces``),
    batched for 200 ms; counts sent nowhere; ``more`` on top."""
    return {
        "AIRFLOW__TRACES__OTEL_ON": str(otel_on),
        "OTEL_TRACES_EXPORTER": "otlp_proto_http",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "AIRFLOW__STORE_METRICS__BACKEND": "none",
        **more,
    }


@contextlib.contextmanager
def traced_cluster(root: Path, endpoint: str, **settings: str) -> Iterator[Cluster]:
    """Airflow's components under the LocalExecutor, traces on and exported to ``endpoint``, with
    ``DAG_ID`` parsed (``settings``: more of their environment, ``AIRFLOW__STORE_METRICS__COUNT_AT``
    for instance); stopped on exit."""
    airflow = Cluster(
        root,
        [f"{DAG_ID}.py"],
        {
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
            **traces_env(endpoint, otel_on=True),
            **settings,
        },
    )
    try:
        airflow.start([DAG_ID])
        yield airflow
    finally:
        airflow.stop()
