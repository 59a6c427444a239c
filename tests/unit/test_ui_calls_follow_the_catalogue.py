"""The State store tab's calls keep whatever counter the rules record with the calls: a counter the
catalogue gains (recorded under an ``outcome`` of its own) counts in its task's total, and the
tab's other figures stay as they were. Prometheus here is a stand-in on a real socket answering
``/api/v1/query`` as Prometheus does."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from store_metrics.ui.calls import Prometheus, read_calls
from store_metrics.ui.payload import calls_payload
from store_metrics.ui.sources import Answer

#: What Prometheus answers: two counters of the catalogue today, and one it gains.
SAMPLES: list[dict[str, Any]] = [
    {"metric": {"task_id": "load", "store": "task", "outcome": "read_found"}, "value": [0, "3"]},
    {"metric": {"task_id": "load", "store": "task", "outcome": "read_absent"}, "value": [0, "1"]},
    {"metric": {"task_id": "load", "store": "task", "outcome": "read_stale"}, "value": [0, "2"]},
]


class _Query(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": SAMPLES}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Query)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Prometheus(url=f"http://127.0.0.1:{server.server_address[1]}", timeout=5.0)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_counter_recorded_with_the_calls_counts_in_its_tasks_total(prometheus: Prometheus) -> None:
    calls = read_calls(prometheus, "orders", "1d", "airflow")
    assert calls.tasks == {
        "load": {
            "task_state_store.read_found": 3.0,
            "task_state_store.read_absent": 1.0,
            "task_state_store.read_stale": 2.0,
        }
    }
    (row,) = calls_payload("1d", Answer(calls, "", 0.0))["tasks"]
    assert row["total"] == 6.0
    assert row["found_ratio"] == {"task_state_store": 0.75, "asset_state_store": None}
