"""Bounded waiting: :func:`testbed.waiting.wait_until` (shared with the benchmarks) polls a condition
and fails the test when it does not hold in time."""

from __future__ import annotations

from testbed.waiting import wait_until

__all__ = ["wait_until"]
