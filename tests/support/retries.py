"""The retried tasks' DAG (``testbed/dags/retries``) and what one run of it counts.

Used by tests/airflow/count_at_standalone/test_retried_attempts.py (both count_at modes) and by the
topologies through the real peers (support.peer_topologies), where the retried attempts reach
statsd_exporter, the Collector and Prometheus.
"""

from __future__ import annotations

from collections import Counter

from support.deploy import RETRY_DAGS
from support.totals import Key

DAG_ID = "store_metrics_retries"
DAG_FILE = RETRY_DAGS / f"{DAG_ID}.py"
PYOP = "_PythonDecoratedOperator"


def model(pauses: int) -> Counter[Key]:
    """What one run of ``store_metrics_retries`` counts, by series: its calls and its retried
    attempts, each reading retry pausing ``pauses`` times (``STORE_METRICS_TEST_PAUSE`` set)."""
    out: Counter[Key] = Counter()

    def add(task_id: str, name: str, n: int = 1) -> None:
        if n == 0:
            return  # no call: no series
        tags = (("dag_id", DAG_ID), ("task_id", task_id), ("run_type", "manual"), ("operator", PYOP))
        out[(f"airflow.task_state_store.{name}", tags)] += n

    # saves_then_fails: try 1 reads (absent), saves, fails; try 2 reads (found), then reads again.
    add("saves_then_fails", "read_absent")
    add("saves_then_fails", "write")
    add("saves_then_fails", "read_found", 1 + pauses)
    add("saves_then_fails", "retry_resumed")
    # fails_before_saving: both tries read nothing; try 2 saves, then reads again.
    add("fails_before_saving", "read_absent", 2)
    add("fails_before_saving", "write")
    add("fails_before_saving", "read_found", pauses)
    add("fails_before_saving", "retry_not_resumed")
    # never_reads: try 2 writes and deletes; no read, no retry counter.
    add("never_reads", "write")
    add("never_reads", "delete")
    # first_try_success: one try, no retry counter.
    add("first_try_success", "read_absent")
    add("first_try_success", "write")
    # mapped: 0 reads once (absent); 1 reads (absent), saves and fails, its retry reads (found);
    # 2 reads (absent) and fails, its retry reads (absent) and reads again (absent).
    add("mapped", "read_absent", 1 + 1 + 1 + 1 + pauses)
    add("mapped", "write")
    add("mapped", "read_found", 1 + pauses)
    add("mapped", "retry_resumed")
    add("mapped", "retry_not_resumed")
    return out
