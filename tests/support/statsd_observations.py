"""What statsd_exporter makes of sampled histogram lines, as a quick model for unit tests.

A ported rule (statsd_exporter ``pkg/line`` and ``pkg/exporter``): a sampled observer line
``name:value|h|@rate`` is ``int(1 / rate)`` observations of ``value``. The unit tests use it to check
thousands of lines in milliseconds; ``tests/shipped/test_collector_inputs.py`` holds it equal to
the real statsd_exporter (the chart's pin and the minimum) on the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["exporter_buckets", "observations"]


def observations(rate: str | None) -> int:
    """How many observations one line with the sample rate ``rate`` (the text after ``@``) is."""
    return int(1 / float(rate)) if rate else 1


def exporter_buckets(lines: Sequence[str], bounds: Sequence[float]) -> tuple[list[int], float]:
    """Per-bucket counts (not cumulative; the last is above every bound) and the sum, as
    statsd_exporter observes ``lines`` (one metric's ``|h`` lines, in either tag style)."""
    counts = [0] * (len(bounds) + 1)
    total = 0.0
    for line in lines:
        value_part = line.split(":", 1)[1].split("|")
        value = float(value_part[0])
        events = observations(next((p[1:] for p in value_part[2:] if p.startswith("@")), None))
        index = next((i for i, b in enumerate(bounds) if value <= b), len(bounds))
        counts[index] += events
        total += value * events
    return counts, total
