"""Test-only Airflow plugin: a route that blocks the API server's event loop, and one that streams.

Loaded only by tests (``AIRFLOW__CORE__PLUGINS_FOLDER`` pointing here). ``GET
/store-metrics-test/block?ms=200`` runs ``time.sleep`` inside an ``async def``: the worker's
event loop can serve nothing for that long, which the stall monitor must report.
"""

from __future__ import annotations

import time

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI

app = FastAPI()


@app.get("/block")
async def block(ms: int = 200) -> dict[str, int]:
    time.sleep(ms / 1000)  # on the event loop, on purpose
    return {"blocked_ms": ms}


class StoreMetricsTestBlocker(AirflowPlugin):
    name = "store_metrics_test_blocker"
    fastapi_apps = [{"app": app, "url_prefix": "/store-metrics-test", "name": "store_metrics_test_blocker"}]  # noqa: RUF012
