"""The KubernetesExecutor's process shape: every task a fresh process that exits right after it.

No Kubernetes: ``airflow api-server``, ``scheduler`` and ``dag-processor`` run as separate
processes, and the scheduler's executor (``support.pod_executor``) starts each task as a pod
would, ``python -m airflow.sdk.execution_time.execute_workload --json-string '<workload>'`` in a
fresh process with the pod's environment (``AIRFLOW_IS_K8S_EXECUTOR_POD``, and the plugin's
``AIRFLOW__STORE_METRICS__*`` as a pod template would set them). The plugin's background flush is
set to an hour, so what reaches the socket is only what each process hands over at the end of its
task and at exit: the totals must be exact per task, and each process must have exited right
after its task.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cluster import Cluster, dag_module
from support.totals import Key, totals
from testbed.udp import UdpReceiver

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG_ID = "store_metrics_pods"
PYOP = "_PythonDecoratedOperator"
#: A pod process must be gone this soon after its task's last statement. The plugin's periodic
#: flush is set to an hour here, so a process that waited for it (or whose counts only it would
#: send) fails by far. The bound leaves room for what Airflow itself does after the task: its
#: supervisor notices the task process's exit at its next poll, every ``[workers]
#: min_heartbeat_interval`` seconds (5 by default, 1 here), then the interpreter tears down:
#: 1 to 2.5 s in all on an idle 2-core machine, up to 5.5 s at a load average of 7.
EXIT_WITHIN = 15.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("pods")
    (root / "pod-logs").mkdir()
    airflow = Cluster(
        root,
        [f"{DAG_ID}.py"],
        {
            "AIRFLOW__CORE__EXECUTOR": "support.pod_executor.ProcessPerTaskExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "STORE_METRICS_TEST_POD_ENV": str(root / "pod-env.json"),
            "STORE_METRICS_TEST_POD_LOGS": str(root / "pod-logs"),
        },
    )
    try:
        airflow.start([DAG_ID])
        yield airflow
    finally:
        airflow.stop()


def expected_totals() -> Counter[Key]:
    dag = dag_module(DAG_ID)

    def series(task_id: str) -> tuple[tuple[str, str], ...]:
        return (("dag_id", DAG_ID), ("task_id", task_id), ("run_type", "manual"), ("operator", PYOP))

    expected: Counter[Key] = Counter()
    for outcome, calls in dag.TASK_CALLS.items():
        for n in range(dag.PODS):
            expected[(f"airflow.task_state_store.{outcome}", series(f"pod_{n}"))] = calls * (n + 1)
        expected[(f"airflow.task_state_store.{outcome}", series("resume"))] = calls * dag.RESUME_PARTS
    for outcome, calls in dag.ASSET_CALLS.items():
        expected[(f"airflow.asset_state_store.{outcome}", series("watermark"))] = calls
    return expected


@pytest.mark.parametrize("backend", ["dogstatsd", "statsd"])
def test_each_task_in_a_fresh_process_loses_nothing_at_exit(
    cluster: Cluster, backend: str, tmp_path: Path
) -> None:
    receiver = UdpReceiver()
    pods_file = tmp_path / "pods.jsonl"
    out = tmp_path / "tasks"
    out.mkdir()
    # The "pod template" for this backend: the executor reads it at each launch.
    Path(cluster.env["STORE_METRICS_TEST_POD_ENV"]).write_text(
        json.dumps(
            {
                "AIRFLOW__STORE_METRICS__BACKEND": backend,
                "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
                "AIRFLOW__STORE_METRICS__PORT": str(receiver.port),
                "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "3600",
                "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
                "STORE_METRICS_TEST_PODS": str(pods_file),
                "STORE_METRICS_TEST_OUT": str(out),
            }
        )
    )
    try:
        run_id = f"pods-{backend}"
        cluster.trigger(DAG_ID, run_id)
        assert cluster.wait_for_runs(DAG_ID, [run_id], 180) == {run_id: "success"}, cluster.tails()
        dag = dag_module(DAG_ID)
        instances = [ti for ti in cluster.task_instances(DAG_ID) if ti["run_id"] == run_id]
        task_count = dag.PODS + dag.RESUME_PARTS + 1
        assert len(instances) == task_count
        assert {(ti["state"], ti["try_number"]) for ti in instances} == {("success", 1)}

        # The executor notes each pod's exit in its own thread; the run may finish a moment before.
        cluster.wait(
            lambda: pods_file.exists() and len(pods_file.read_text().splitlines()) == task_count,
            30,
            "every pod process exited",
        )
        pods = {
            (p["task_id"], p["map_index"]): p for p in map(json.loads, pods_file.read_text().splitlines())
        }
        assert len(pods) == task_count  # one fresh process per task instance, none reused
        assert len({p["pid"] for p in pods.values()}) == task_count
        for (task_id, map_index), pod in pods.items():
            task = json.loads((out / f"{task_id}.{map_index}.json").read_text())
            assert pod["returncode"] == 0, (task_id, map_index)
            # The task ran in the Task SDK's task process, forked by this pod's supervisor
            # (execute_workload), not in a long-lived worker.
            assert task["ppid"] == pod["pid"], (task_id, map_index, task, pod)
            assert pod["started"] < task["ended"] < pod["exited"]
            assert pod["exited"] - task["ended"] < EXIT_WITHIN, (task_id, map_index, task, pod)

        style = "dogstatsd" if backend == "dogstatsd" else "influx"
        # Every pod process has exited: whatever it sent is ahead of a marker sent now.
        before = receiver.lines_before_marker()
        got = Counter({k: v for k, v in totals(before, style).items() if dict(k[1]).get("dag_id") == DAG_ID})
        assert got == expected_totals(), cluster.tails(1500)
        lingering = max(
            p["exited"] - json.loads((out / f"{t}.{m}.json").read_text())["ended"]
            for (t, m), p in pods.items()
        )
        print(f"{backend}: {task_count} pod processes, each gone at most {lingering:.2f} s after its task")
    finally:
        receiver.close()
