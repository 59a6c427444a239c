"""Shared fixtures only; the helpers the tests import live in the ``support`` package.

Nothing here fakes a backend: the UDP receiver is a real socket on 127.0.0.1 and tests read
the exact datagrams the adapters sent.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store_metrics.counting import runtime
from testbed.udp import UdpReceiver


@pytest.fixture
def udp_receiver() -> Iterator[UdpReceiver]:
    receiver = UdpReceiver()
    yield receiver
    receiver.close()


@pytest.fixture(autouse=True)
def _reset_active_emitter() -> Iterator[None]:
    """Every test starts and ends with no configured emitter."""
    runtime.shutdown(timeout=1.0)
    yield
    runtime.shutdown(timeout=1.0)
