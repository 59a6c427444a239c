"""Test-only Airflow plugin: which API server worker served each Execution API request of each attempt.

A root middleware that appends one JSON line per Execution API request to the file named by
``STORE_METRICS_TEST_REQUEST_LOG``: the task instance the Execution API verified (its token's
subject), the worker's process id, the client's port (one per connection), method, path, status,
and when the response ended. ``tests/airflow/count_at_standalone/test_retried_attempts.py`` reads it to
measure how an attempt's requests spread over connections and workers.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from airflow.plugins_manager import AirflowPlugin


class RequestLog:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.path = os.environ.get("STORE_METRICS_TEST_REQUEST_LOG", "")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if not self.path or scope["type"] != "http" or "/execution/" not in scope["path"]:
            await self.app(scope, receive, send)
            return
        status = 0

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, sending)
        token = scope.get("ti_token")  # what the Execution API verified (Airflow 3.3 and 3.4)
        line = {
            "ti": str(getattr(token, "id", "") or ""),
            "time": time.time(),
            "pid": os.getpid(),
            "client": list(scope.get("client") or ()),
            "method": scope["method"],
            "path": scope["path"],
            "status": status,
        }
        with open(self.path, "a") as log:  # one short append per request: a test's own plugin
            log.write(json.dumps(line) + "\n")


class StoreMetricsTestRequestLog(AirflowPlugin):
    name = "store_metrics_test_request_log"
    fastapi_root_middlewares = [  # noqa: RUF012 - Airflow reads the class attribute
        {"name": "store_metrics_test_request_log", "middleware": RequestLog}
    ]
