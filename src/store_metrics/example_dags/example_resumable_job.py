"""Scenario 4 of the upstream proposal: a ResumableJobMixin operator submitting a mock job.

Expected: task_state_store read_absent=1, write=1 with operator="MockBatchOperator", and
Airflow's own resumable_job.fresh_submit=1 alongside (no shared names, nothing counted twice).
The proposal's operator sleeps 10 s "so you can kill the worker"; here that pause is the
``poll_seconds`` param (default 0) so the scenario runs in a demo.
"""

from __future__ import annotations

import random
import string
import time
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, BaseOperator
from airflow.sdk.bases.resumablejobmixin import ResumableJobMixin

_JOBS: dict[str, str] = {}


def _generate_job_id() -> str:
    return "batch-" + "".join(random.choices(string.ascii_lowercase + string.digits, k=8))


class MockBatchOperator(ResumableJobMixin, BaseOperator):
    """Submits a mock batch job and polls until completion; on retry it reconnects via task_state_store."""

    external_id_key = "job_id"

    def execute(self, context: Any) -> Any:
        return self.execute_resumable(context)

    def submit_job(self, context: Any) -> Any:
        job_id = _generate_job_id()
        _JOBS[job_id] = "RUNNING"
        self.log.info("Submitted batch job %s", job_id)
        return job_id

    def get_job_status(self, external_id: Any, context: Any) -> str:
        simulate = str(context["params"].get("simulate_final_status", ""))
        if simulate:
            return simulate
        return _JOBS.get(str(external_id), "RUNNING")

    def is_job_active(self, status: str) -> bool:
        return status == "RUNNING"

    def is_job_succeeded(self, status: str) -> bool:
        return status == "SUCCEEDED"

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        time.sleep(float(context["params"].get("poll_seconds", 0)))
        _JOBS[str(external_id)] = "SUCCEEDED"

    def get_job_result(self, external_id: Any, context: Any) -> str:
        return f"Job {external_id} finished with status {_JOBS.get(str(external_id), 'UNKNOWN')}"


with DAG(
    dag_id="example_resumable_job",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "resumable", "task-store"],
    params={"simulate_final_status": "", "poll_seconds": 0},
) as dag:
    MockBatchOperator(
        task_id="run_batch_job",
        retries=2,
        retry_delay=timedelta(seconds=5),
    )
