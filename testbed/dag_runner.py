"""Runs DAG files with dag.test() in a fresh process, as a user's test suite would.

``testbed.airflow.AirflowHome.run`` starts it; the caller chooses the configuration through
environment variables, so every run reads [store_metrics] exactly as a task process would.

    python -m testbed.dag_runner RESULT.json DAG_FILE [DAG_FILE ...]

Writes {"runs": [[dag_id, state], ...], "configured": bool, "emitter": type name}.
``STORE_METRICS_TEST_SIMULATE_NATIVE=1`` makes the plugin believe Airflow counts state store
calls itself (test-only switch, implemented here, not in the product).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    result_path, *dag_files = sys.argv[1:]
    from store_metrics import native
    from store_metrics.commands.demo import _load_dag, _output_to
    from store_metrics.counting import runtime

    if os.environ.get("STORE_METRICS_TEST_SIMULATE_NATIVE") == "1":
        native.airflow_emits_state_store_metrics = lambda: True  # type: ignore[assignment]
    runs = []
    log_path = Path(result_path).with_suffix(".log")
    with log_path.open("a") as log:
        for dag_file in dag_files:
            with _output_to(log):
                dag = _load_dag(Path(dag_file))
                dag_run = dag.test()
            state = getattr(dag_run.state, "value", str(dag_run.state))
            runs.append([dag.dag_id, state])
    emitter = runtime.get_emitter()
    Path(result_path).write_text(
        json.dumps({"runs": runs, "configured": runtime.is_configured(), "emitter": type(emitter).__name__})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
