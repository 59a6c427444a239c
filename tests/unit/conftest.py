"""What the unit tests share: an emitter to count into, a plugin fresh as in a new task process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store_metrics.counting.runtime import create_emitter
from store_metrics.emitter import AggregatingEmitter
from store_metrics.integration import startup, task_listener


@pytest.fixture
def emitter() -> Iterator[AggregatingEmitter]:
    """An emitter that sends nothing (backend none, a 60 s flush interval): the test reads it back."""
    em = create_emitter("none", flush_interval=60)
    yield em
    em.close(1)


@pytest.fixture
def fresh_plugin_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """The listener and the process set-up as a new task process has them (nothing configured yet),
    and every task instance taken for one the Task SDK's task runner runs."""
    monkeypatch.setattr(task_listener, "_state", task_listener._Active())
    monkeypatch.setattr(startup, "_setup", startup._Setup())
    monkeypatch.setattr(task_listener, "_is_task_runner_ti", lambda ti: True)
