"""What the unit tests share: an emitter to count into."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store_metrics.counting.runtime import create_emitter
from store_metrics.emitter import AggregatingEmitter


@pytest.fixture
def emitter() -> Iterator[AggregatingEmitter]:
    """An emitter that sends nothing (backend none, a 60 s flush interval): the test reads it back."""
    em = create_emitter("none", flush_interval=60)
    yield em
    em.close(1)
