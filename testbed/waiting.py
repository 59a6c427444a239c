"""Bounded waiting: poll a condition until it holds or the time is up; never an unbounded sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(condition: Callable[[], T], timeout: float, interval: float = 0.01) -> T:
    """Call ``condition`` until it returns something truthy or ``timeout`` seconds have passed;
    return its last value (falsy when the time ran out)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def wait_until(condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.01) -> None:
    """Poll ``condition`` until it is truthy; fail (``AssertionError``) after ``timeout`` seconds."""
    if not poll(condition, timeout, interval):
        raise AssertionError(f"condition not met within {timeout} s: {condition}")


def settle(value: Callable[[], T], quiet: float, timeout: float, interval: float = 0.1) -> T:
    """Poll ``value`` until it has not changed for ``quiet`` seconds, or ``timeout`` seconds have
    passed; return its last value. (What a receiver does once its senders have delivered everything:
    nothing more arrives.)"""
    deadline = time.monotonic() + timeout
    last, since = value(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(interval)
        now = value()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last
