"""An executor with the KubernetesExecutor's process shape, without Kubernetes: one fresh process per task.

``AIRFLOW__CORE__EXECUTOR=support.pod_executor.ProcessPerTaskExecutor`` (``tests/`` on
``PYTHONPATH``). For each task it starts the command the KubernetesExecutor puts in a pod
(``airflow.providers.cncf.kubernetes.pod_generator.workload_to_command_args``), with this
interpreter as ``python``::

    python -m airflow.sdk.execution_time.execute_workload --json-string '<ExecuteTask JSON>'

Its environment: the scheduler's, plus ``AIRFLOW_IS_K8S_EXECUTOR_POD=True`` (as the
KubernetesExecutor's pod spec sets), plus the variables in the JSON file named by
``$STORE_METRICS_TEST_POD_ENV``, read at each launch (the pod template's ``env``). The task is
reported finished when that process exits, as the KubernetesExecutor reports it when the pod
ends. Nothing is reused between tasks: no worker, no fork of a warm parent.

When a "pod" process has exited, one JSON line goes to the file named by
``STORE_METRICS_TEST_PODS`` in the pod's environment: the task instance key, the pid, the exit
code and when it started and exited (``time.time()``), for the test to compare with what the
task itself recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from airflow.executors.base_executor import BaseExecutor

from testbed.waiting import poll


class ProcessPerTaskExecutor(BaseExecutor):
    """Runs every ExecuteTask workload as ``python -m airflow.sdk.execution_time.execute_workload``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pods: dict[Any, subprocess.Popen[bytes]] = {}
        self._exited: list[tuple[Any, int]] = []
        self._lock = threading.Lock()
        self._pod_logs = os.environ.get("STORE_METRICS_TEST_POD_LOGS", "")

    def start(self) -> None:
        self.log.info("ProcessPerTaskExecutor: one fresh execute_workload process per task")

    def _process_workloads(self, workload_items: Sequence[Any]) -> None:
        from airflow.executors.workloads import ExecuteTask

        for workload in workload_items:
            if not isinstance(workload, ExecuteTask):
                raise ValueError(f"ProcessPerTaskExecutor runs tasks only, not {type(workload).__name__}")
            key = workload.key
            self.queued_tasks.pop(key, None)
            self.running.add(key)
            self._launch(key, workload.model_dump_json())

    def _launch(self, key: Any, payload: str) -> None:
        argv = [sys.executable, "-m", "airflow.sdk.execution_time.execute_workload", "--json-string", payload]
        env = {**os.environ, "AIRFLOW_IS_K8S_EXECUTOR_POD": "True"}
        template = os.environ.get("STORE_METRICS_TEST_POD_ENV", "")
        if template and os.path.exists(template):
            with open(template) as f:
                env.update(json.load(f))
        name = f"{key.dag_id}.{key.task_id}.{key.map_index}.{key.run_id}.{key.try_number}"
        out: Any = subprocess.DEVNULL
        if self._pod_logs:
            out = open(os.path.join(self._pod_logs, f"{name}.log".replace("/", "_")), "wb")  # noqa: SIM115
        started = time.time()
        proc = subprocess.Popen(
            # In the scheduler's process group, so that stopping the scheduler's group ends them too.
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        if out is not subprocess.DEVNULL:
            out.close()
        self._pods[key] = proc
        # A thread per pod notes the exit the moment it happens (sync() only runs every heartbeat).
        record = env.get("STORE_METRICS_TEST_PODS", os.devnull)
        threading.Thread(target=self._watch, args=(key, proc, started, record), daemon=True).start()

    def _watch(self, key: Any, proc: subprocess.Popen[bytes], started: float, record: str) -> None:
        returncode = proc.wait()
        exited = time.time()
        line = json.dumps(
            {
                "dag_id": key.dag_id,
                "task_id": key.task_id,
                "run_id": key.run_id,
                "map_index": key.map_index,
                "try_number": key.try_number,
                "pid": proc.pid,
                "returncode": returncode,
                "started": started,
                "exited": exited,
            }
        )
        with self._lock:
            with open(record, "a") as f:
                f.write(line + "\n")
            self._exited.append((key, returncode))

    def sync(self) -> None:
        with self._lock:
            exited, self._exited = self._exited, []
        for key, returncode in exited:
            self._pods.pop(key, None)
            if returncode == 0:
                self.success(key)
            else:
                self.fail(key)

    def end(self) -> None:
        def done() -> bool:
            self.sync()
            return not self._pods

        poll(done, 10, 0.1)  # the pods still running get 10 s to finish, then are killed
        self.terminate()

    def terminate(self) -> None:
        for proc in self._pods.values():
            if proc.poll() is None:
                proc.kill()
