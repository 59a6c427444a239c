"""Barriers that prove delivery: one last count sent through the same path, whose arrival means every
count sent before it has arrived too (no "wait a little longer for anything more").

``testbed.udp.UdpReceiver.lines_before_marker`` is the barrier for senders that have finished
(exited, or flushed): its marker datagram is queued after theirs. ``api_server_marker`` is
the one for a running API server: the server itself counts one more request and sends it.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid

from store_metrics import catalogue
from support.totals import totals
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

#: The series an unauthenticated task store read is counted on (no task instance to name).
MARKER_SERIES = (
    "airflow.task_state_store.error",
    (
        ("dag_id", catalogue.UNKNOWN),
        ("task_id", catalogue.UNKNOWN),
        ("run_type", catalogue.UNKNOWN),
        ("operator", catalogue.UNKNOWN),
        ("operation", "get"),
    ),
)


def _markers(receiver: UdpReceiver, style: str) -> int:
    return totals(receiver.lines(), style).get(MARKER_SERIES, 0)


def api_server_marker(api_port: int, receiver: UdpReceiver, style: str, timeout: float = 30) -> None:
    """Have a running API server (``count_at = api_server``, one worker) count one more request, and
    wait until that count has reached ``receiver``.

    The request carries no token: the Execution API refuses it (401/403) and the plugin counts it at
    once on ``MARKER_SERIES``, with no metadata query. The worker counts requests in the order
    they are answered (one still waiting for its task instance's query is counted when the query
    answers: call this once the calls awaited have been counted) and sends each flush on one UDP
    socket, in order; so when the marker's count has arrived, every count made before it has too.
    Counts other than this marker's are left to the caller (the marker series is its own).
    """
    before = _markers(receiver, style)
    url = f"http://127.0.0.1:{api_port}/execution/store/ti/{uuid.uuid4()}/store-metrics-test-marker"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            status = response.status
    except urllib.error.HTTPError as refused:
        status = refused.code
    assert status in (401, 403), status
    wait_until(lambda: _markers(receiver, style) > before, timeout)
    assert _markers(receiver, style) == before + 1
