"""Prometheus 3.16.0 (the pinned ``newest``) scraping an API server worker's native endpoint
(``server_exposition = native``): every series parses and holds the counts made, histograms and
gauges included, and counts made between scrapes arrive too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from store_metrics import catalogue
from store_metrics.catalogue import LOOP_STALL, LOOP_STALL_MAX, SERVER_DURATION
from support.prometheus import PrometheusServer
from support.worker_endpoint import WORKER, serving

pytestmark = [pytest.mark.peers, pytest.mark.prometheus]

WRITE = catalogue.get("task_state_store.write")
READ_FOUND = catalogue.get("task_state_store.read_found")
DAGS = 300  # x 10 tasks x 2 counters: 6,000 task-side series
ROUTE = {"store": "task", "operation": "get", "status_class": "2xx", "worker": WORKER, "value_size": "small"}


def test_prometheus_3_reads_every_series_of_the_native_endpoint(tmp_path: Path) -> None:
    emitter, url = serving("native")
    target = url.split("/")[2]  # 127.0.0.1:<port>
    made: dict[tuple[str, str, str], int] = {}
    for i in range(DAGS * 10):
        dag, task = f"dag_{i // 10}", f"task_{i % 10}"
        tags = catalogue.task_tags(dag_id=dag, task_id=task, run_type="scheduled", operator="PythonOperator")
        emitter.counter(WRITE, tags).add(1 + i % 5)
        emitter.counter(READ_FOUND, tags).add(2 + i % 3)
        made[(WRITE.prometheus_name(), dag, task)] = 1 + i % 5
        made[(READ_FOUND.prometheus_name(), dag, task)] = 2 + i % 3
    for value in (0.25, 3.0, 1e9):
        emitter.histogram(SERVER_DURATION, ROUTE).record(value)
    emitter.histogram(LOOP_STALL, {"worker": WORKER}).record(2.5)
    emitter.gauge(LOOP_STALL_MAX, {"worker": WORKER}).observe(12.5)
    emitter.flush(5.0)

    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
        "scrape_configs": [{"job_name": "worker", "static_configs": [{"targets": [target]}]}],
    }
    prom = PrometheusServer(tmp_path, config, role="newest")
    try:
        task_series = '{__name__=~"airflow_task_state_store_.*_total"}'
        prom.wait(lambda: prom.scalar(f"count({task_series})") == len(made), "every task series scraped")
        assert prom.scalar('up{job="worker"}') == 1.0
        got: dict[tuple[str, str, str], int] = {}
        for sample in prom.query(task_series):
            labels: dict[str, Any] = sample["metric"]
            got[(labels["__name__"], labels["dag_id"], labels["task_id"])] = int(float(sample["value"][1]))
            assert labels["otel_scope_name"] == "store_metrics"
            assert labels["operator"] == "PythonOperator"
        assert got == made
        duration = SERVER_DURATION.prometheus_name()
        assert prom.scalar(f"{duration}_count") == 3
        assert prom.scalar(f"{duration}_sum") == 0.25 + 3.0 + 1e9
        # Prometheus 3 normalises a classic histogram's le to a float ("5" -> "5.0").
        assert prom.scalar(f'{duration}_bucket{{le="5.0"}}') == 2
        assert prom.scalar(f'{duration}_bucket{{le="+Inf"}}') == 3
        assert prom.scalar(f"{LOOP_STALL_MAX.prometheus_name()}") == 12.5
        assert prom.scalar('target_info{service_instance_id="host-0"}') == 1.0

        # Counted between scrapes: the next scrapes carry the new totals.
        one = catalogue.task_tags(
            dag_id="dag_7", task_id="task_3", run_type="scheduled", operator="PythonOperator"
        )
        emitter.counter(WRITE, one).add(100)
        expr = f'{WRITE.prometheus_name()}{{dag_id="dag_7",task_id="task_3"}}'
        prom.wait(
            lambda: prom.scalar(expr) == made[(WRITE.prometheus_name(), "dag_7", "task_3")] + 100,
            "the new total",
        )
    finally:
        prom.stop()
        emitter.close(2.0)
