"""The values that travel from the emitter to a backend: what one series counted since the last push.

Plain immutable data, imported by the tags (``store_metrics.naming``), the contracts
(``store_metrics.contracts``), the errors, the emitter and every backend; it imports nothing of ours
but the catalogue, so none of them import each other through it. A histogram's buckets also say
which observations stand for them downstream (``sampled_observations``), the same for every backend.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .catalogue import Metric

#: A tag set as the emitter holds it: put to the tag value rule, in wire order, hashable.
TagTuple = tuple[tuple[str, str], ...]


class CounterDelta(NamedTuple):
    """What one counter series counted since the last push."""

    metric: Metric
    tags: TagTuple
    value: int


class Buckets(NamedTuple):
    """Observations per bucket: ``counts[i]``/``sums[i]`` for values in ``(bounds[i-1], bounds[i]]``.

    The last entry of ``counts`` and ``sums`` is the overflow bucket (above the last bound).
    Keeping each bucket's sum lets a backend hand the observations on exactly: every bucket's
    mean lies inside that bucket, so ``counts[i]`` observations of it land in the same bucket
    downstream and add up to the same sum.
    """

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    sums: tuple[float, ...]

    @property
    def observations(self) -> int:
        return sum(self.counts)

    @property
    def total(self) -> float:
        return sum(self.sums)

    def only(self, i: int) -> Buckets:
        """These buckets with every bucket but ``i`` emptied (one StatsD line's worth)."""
        size = len(self.counts)
        counts = tuple(self.counts[i] if j == i else 0 for j in range(size))
        sums = tuple(self.sums[i] if j == i else 0.0 for j in range(size))
        return Buckets(self.bounds, counts, sums)


class HistogramDelta(NamedTuple):
    """What one histogram series observed since the last push."""

    metric: Metric
    tags: TagTuple
    buckets: Buckets


class GaugeValue(NamedTuple):
    """The largest value one gauge series observed since the last push."""

    metric: Metric
    tags: TagTuple
    value: float


def bucket_mean(buckets: Buckets, i: int) -> float:
    """The mean of bucket ``i``'s observations, kept inside the bucket despite rounding."""
    mean = buckets.sums[i] / buckets.counts[i]
    bounds = buckets.bounds
    if i < len(bounds):
        mean = min(mean, bounds[i])
    if i > 0:
        mean = max(mean, math.nextafter(bounds[i - 1], math.inf))
    return mean


def sampled_observations(buckets: Buckets) -> list[tuple[float, int]]:
    """(value, observations) per non-empty bucket: what the StatsD lines of one histogram carry."""
    return [(bucket_mean(buckets, i), n) for i, n in enumerate(buckets.counts) if n]


#: What ``export`` receives.
Delta = CounterDelta | HistogramDelta | GaugeValue
