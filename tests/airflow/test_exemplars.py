"""Exemplars through the real pipeline: a real task's counters link to the trace of the call that made them.

A retried DAG runs under the LocalExecutor with Airflow's traces on (exported over OTLP/HTTP to a
real receiver that decodes them, ``testbed.otlp.OtlpReceiver``) and the ``otel`` backend
sending its counters over OTLP to the pinned Collector, whose configuration is the shipped
``collector/otel-collector.yaml`` with the one line docs/traces.md asks for
(``enable_open_metrics: true`` on its Prometheus exporter). The pinned Prometheus scrapes it with
``--enable-feature=exemplar-storage``; its ``/api/v1/query_exemplars`` must return, for each
counter, the trace id and span id of the span the task process made for that call.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from support.cluster import Cluster
from support.peer_servers import Collector
from support.prometheus import PrometheusServer
from testbed.otlp import TRACES_PATH, OtlpReceiver, OtlpSpan
from testbed.repository import ROOT
from testbed.waiting import poll

pytestmark = [pytest.mark.airflow, pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

DAG_ID = "store_metrics_traces"


def traces_env(receiver: OtlpReceiver) -> dict[str, str]:
    """Airflow's traces on, exported over OTLP/HTTP to ``receiver``."""
    return {
        "AIRFLOW__TRACES__OTEL_ON": "True",
        "OTEL_TRACES_EXPORTER": "otlp_proto_http",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{receiver.port}{TRACES_PATH}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }


def ours(spans: list[OtlpSpan]) -> list[OtlpSpan]:
    return [s for s in spans if s.scope == "store_metrics"]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Collector, PrometheusServer]]:
    tmp = tmp_path_factory.mktemp("exemplars")
    shipped: dict[str, Any] = yaml.safe_load((ROOT / "collector" / "otel-collector.yaml").read_text())
    shipped["exporters"]["prometheus"]["enable_open_metrics"] = True
    config = tmp / "otel-collector.yaml"
    config.write_text(yaml.safe_dump(shipped, sort_keys=False))
    collector = Collector(tmp, "newest", config)
    try:
        scrape = {
            "job_name": "store-metrics-otel-collector",
            "static_configs": [{"targets": [collector.target()]}],
        }
        prometheus = PrometheusServer(
            tmp,
            {"global": {"scrape_interval": "1s"}, "scrape_configs": [scrape]},
            "--enable-feature=exemplar-storage",
            role="newest",
        )
        try:
            yield collector, prometheus
        finally:
            prometheus.stop()
    finally:
        collector.stop()


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    sink = OtlpReceiver()
    yield sink
    sink.close()


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
    receiver: OtlpReceiver,
    pipeline: tuple[Collector, PrometheusServer],
) -> Iterator[Cluster]:
    collector, _ = pipeline
    airflow = Cluster(
        tmp_path_factory.mktemp("exemplars-airflow"),
        [f"{DAG_ID}.py"],
        {
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
            **traces_env(receiver),
            "AIRFLOW__STORE_METRICS__BACKEND": "otel",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"{collector.otlp_endpoint}/v1/metrics",
        },
    )
    try:
        airflow.start([DAG_ID])
        yield airflow
    finally:
        airflow.stop()


def exemplars(prometheus: PrometheusServer, since: float) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """{(series name, task_id): {(trace id, span id), ...}} of every state store counter's exemplars."""
    found = prometheus.api(
        "query_exemplars",
        query='{__name__=~"airflow_task_state_store_.+_total"}',
        start=f"{since:.3f}",
        end=f"{time.time() + 60:.3f}",
    )
    out: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for series in found:
        key = (series["seriesLabels"]["__name__"], series["seriesLabels"]["task_id"])
        out.setdefault(key, set()).update(
            (e["labels"]["trace_id"], e["labels"]["span_id"]) for e in series["exemplars"]
        )
    return out


@pytest.mark.slow
def test_each_counter_links_to_the_span_of_the_call_that_counted_it(
    cluster: Cluster, receiver: OtlpReceiver, pipeline: tuple[Collector, PrometheusServer]
) -> None:
    _, prometheus = pipeline
    since = time.time() - 5
    cluster.trigger(DAG_ID, "exemplars")
    assert cluster.wait_for_runs(DAG_ID, ["exemplars"], 240) == {"exemplars": "success"}, cluster.tails()
    poll(lambda: len(ours(receiver.spans())) == 5, 60, 0.2)
    assert len(ours(receiver.spans())) == 5, receiver.spans()

    def hex_ids(span: OtlpSpan) -> tuple[str, str]:
        return span.trace_id, span.span_id

    workers = {s.span_id: s for s in receiver.spans() if s.name.startswith("worker.")}
    calls: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for span in sorted(ours(receiver.spans()), key=lambda s: s.start_ns):
        task_id = workers[span.parent_id].attributes["airflow.task_id"]
        outcome = span.attributes["store_metrics.outcome"]
        name = {"found": "read_found", "absent": "read_absent", "written": "write"}[outcome]
        calls.setdefault((f"airflow_task_state_store_{name}_total", task_id), []).append(hex_ids(span))
        if "store_metrics.retry" in span.attributes:
            decision = {"resumed": "retry_resumed", "started_over": "retry_not_resumed"}
            name = decision[span.attributes["store_metrics.retry"]]
            calls[(f"airflow_task_state_store_{name}_total", task_id)] = [hex_ids(span)]
    # What the spans say the task processes did, each call its own span in its try's trace ...
    assert {key: len(ids) for key, ids in calls.items()} == {
        ("airflow_task_state_store_write_total", "resumes"): 1,
        ("airflow_task_state_store_read_found_total", "resumes"): 1,
        ("airflow_task_state_store_retry_resumed_total", "resumes"): 1,
        ("airflow_task_state_store_read_absent_total", "starts_over"): 2,
        ("airflow_task_state_store_retry_not_resumed_total", "starts_over"): 1,
        ("airflow_task_state_store_write_total", "starts_over"): 1,
    }
    # ... is what Prometheus holds as the counters' exemplars: for each series, the span of the
    # call that counted it. Where two task processes counted one series (both tries of
    # starts_over read and found nothing), the Collector's deltatocumulative keeps the exemplar of
    # the stream's first point: adding a later delta moves the value and the time, not the
    # exemplars. So the series links to try 1's call, the first that counted it.
    expected = {key: {ids[0]} for key, ids in calls.items()}
    poll(lambda: exemplars(prometheus, since) == expected, 60, 0.5)
    assert exemplars(prometheus, since) == expected
