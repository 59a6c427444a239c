"""The upstream proposal's four scenarios, as DAG files shipped with the package.

``store-metrics demo`` and the test suite run them with ``dag.test()``; copy them into a
DAGs folder to run them under a real scheduler. Each module defines one ``dag``.
"""

from __future__ import annotations

#: module name -> dag_id, in the proposal's order
SCENARIOS: dict[str, str] = {
    "state_store_metrics_01": "state_store_metrics_01",
    "state_store_metrics_02": "state_store_metrics_02",
    "state_store_metrics_03": "state_store_metrics_03",
    "example_resumable_job": "example_resumable_job",
}
#: The demo's asset watcher and the DAG its asset schedules (not one of the proposal's scenarios).
WATCHER = "example_asset_watcher"
#: The demo's retried tasks (one resumes, one starts over) and failing call: the Retries and Errors
#: rows (not one of the proposal's scenarios either).
RETRIES = "example_retries"
