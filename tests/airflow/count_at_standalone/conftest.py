"""The two deployments the ``count_at = api_server`` tests read, each made once per session.

* ``switching``: one ``airflow standalone`` with DogStatsD to one UDP socket, restarted with
  ``count_at = tasks``, then ``api_server``, then ``tasks`` again, the same runs in each phase;
* ``scraped``: ``count_at = api_server`` with the OpenTelemetry backend's Prometheus exporter on
  each of two API server workers, scraped directly by a real Prometheus 3 (the newest pin).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest

from support import e2e
from support.airflow import Standalone
from support.count_at_runs import (
    DAG_IDS,
    FIRST_WAVE,
    JOB,
    PHASES,
    SECOND_WAVE,
    STATE_STORE_SERIES,
    WORKERS,
    Calls,
    Scraped,
    Switching,
    as_prometheus,
    deployment,
    free_ports,
    restarted,
    run_phase,
    run_waves,
)
from support.exported import Exported
from support.prometheus import scraping_job
from support.totals import Key
from testbed.airflow import AirflowHome
from testbed.ports import free_port
from testbed.udp import UdpReceiver


@pytest.fixture(scope="session")
def switching(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Switching]:
    root = tmp_path_factory.mktemp("count-at-switching")
    receiver = UdpReceiver()
    dogstatsd = {
        "AIRFLOW__STORE_METRICS__BACKEND": "dogstatsd",
        "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
        "AIRFLOW__STORE_METRICS__PORT": str(receiver.port),
    }
    calls = Calls()
    phases: dict[str, tuple[Counter[Key], Counter[Key]]] = {}
    logs: dict[str, str] = {}
    airflow: Standalone | None = None
    try:
        for phase, count_at, dag_ids in PHASES:
            settings = {**dogstatsd, **count_at}
            airflow = deployment(root, settings) if airflow is None else restarted(airflow, settings, phase)
            phases[phase], logs[phase] = run_phase(airflow, receiver, calls, phase, dag_ids)
        yield Switching(airflow.home if airflow else AirflowHome(root), phases, logs)
    finally:
        if airflow is not None:
            airflow.stop()
        receiver.close()


@pytest.fixture(scope="session")
def scraped(tmp_path_factory: pytest.TempPathFactory, exported: Exported) -> Iterator[Scraped]:
    root = tmp_path_factory.mktemp("count-at-scraped")
    files = exported(**e2e.ALERTING_SETTINGS)  # the error alert fires a second after its condition
    first = free_ports(WORKERS)
    airflow = deployment(
        root,
        {
            "AIRFLOW__STORE_METRICS__COUNT_AT": "api_server",
            "AIRFLOW__STORE_METRICS__BACKEND": "otel",
            "AIRFLOW__STORE_METRICS__OTEL_EXPORTER": "prometheus",
            "AIRFLOW__STORE_METRICS__PROMETHEUS_HOST": "127.0.0.1",
            "AIRFLOW__STORE_METRICS__PROMETHEUS_PORT": str(free_port()),
            "AIRFLOW__STORE_METRICS__SERVER_PROMETHEUS_PORT": str(first),
            "AIRFLOW__API__WORKERS": str(WORKERS),
        },
    )
    targets = [f"127.0.0.1:{port}" for port in range(first, first + WORKERS)]
    prom = scraping_job(root, files, JOB, targets, role="newest")  # Prometheus 3
    try:
        airflow.start(DAG_IDS)
        calls = Calls()
        expected = calls.runs(FIRST_WAVE) + calls.runs(SECOND_WAVE)
        run_waves(airflow, "scraped")
        model = e2e.Model()
        for key, value in as_prometheus(expected).items():
            model.counts[key] = value
        total = sum(model.counts.values())
        every = f"sum({STATE_STORE_SERIES})"
        e2e.wait_for(lambda: prom.scalar(every) == total, 60, f"Prometheus to hold all {total} calls")
        scraped_at = "max(timestamp(airflow_task_state_store_write_total))"
        evaluated = f"min(timestamp({e2e.CALLS}))"
        holding = prom.scalar(scraped_at)
        assert holding is not None
        e2e.wait_for(
            lambda: (prom.scalar(evaluated) or 0) > holding + 1.5, 30, "a rule evaluation on the totals"
        )
        end = time.time()
        e2e.wait_for(
            lambda: min(prom.scalar(scraped_at) or 0, prom.scalar(evaluated) or 0) > end,
            30,
            "a scrape and a rule evaluation after the end",
        )
        yield Scraped(airflow, prom, model, end, first, files)
    finally:
        airflow.stop()
        prom.stop()
