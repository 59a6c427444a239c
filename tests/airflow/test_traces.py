"""Traces off through real Airflow: with Airflow's traces off, or ``[store_metrics] traces = off``,
the plugin makes no span at all (``dag.test()`` runs, exporting to a real OTLP/HTTP receiver on
127.0.0.1, ``testbed.otlp.OtlpReceiver``, which decodes every export).

The span trees with traces on are read back from a real Jaeger: under the LocalExecutor in
``test_jaeger.py``, under ``airflow standalone`` in ``test_traces_standalone.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.traced_airflow import traces_env
from testbed.airflow import AirflowHome
from testbed.otlp import TRACES_PATH, OtlpReceiver, OtlpSpan

pytestmark = [pytest.mark.airflow]


def endpoint(receiver: OtlpReceiver) -> str:
    return f"http://127.0.0.1:{receiver.port}{TRACES_PATH}"


def ours(spans: list[OtlpSpan]) -> list[OtlpSpan]:
    return [s for s in spans if s.scope == "store_metrics"]


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
