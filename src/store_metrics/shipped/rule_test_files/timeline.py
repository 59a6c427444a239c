"""What the rules must record and when the alerts must fire, worked out from a scenario's samples.

A scenario gives, per input series, one value per step (``interval`` seconds); promtool evaluates
every rule group every step. This module computes, independently of PromQL, what the shipped rules
are specified to give on those samples: each counter's calls as the call-recording rule defines them
(``Recorder``), sums of the recorded calls over a window, and each alert's firing steps under
its ``for`` (``firing``).

Prometheus 2 and 3 differ at the edge of a window: a sample exactly ``window`` old is in it for 2.x
and out of it for 3.x (left-open ranges). Every computation here is made both ways
(``EDGES``), and the test builders only assert where the two agree, so one exported test file
holds for Prometheus 2.42 and 3.x alike.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .document import STALE, Value

__all__ = ["EDGES", "LOOKBACK_DELTA", "Clock", "Recorder", "WindowSums", "firing", "window_steps"]

#: Whether a sample exactly at a window's start is in it: Prometheus 2 (closed) and 3 (left-open).
EDGES = (True, False)
#: How far back an instant selector looks for a sample (Prometheus' default lookback delta).
LOOKBACK_DELTA = Fraction(300)


def steps_in(end: Fraction, window: Fraction, step: Fraction, closed: bool) -> range:
    """The steps whose time is within ``window`` before the time ``end`` (``end`` included)."""
    start = end - window
    first = math.ceil(start / step) if closed else math.floor(start / step) + 1
    return range(max(first, 0), math.floor(end / step) + 1)


@functools.lru_cache(maxsize=1 << 16)
def window_steps(end: int, window: Fraction, step: Fraction, closed: bool) -> range:
    """The steps whose time is within ``window`` before step ``end``'s time (``end`` included)."""
    return steps_in(end * step, window, step, closed)


@dataclass(frozen=True)
class Clock:
    """The test's steps: rule evaluations and input samples every ``step`` seconds; the call-recording
    rules read ``offset`` seconds behind and look ``lookback`` seconds back."""

    step: Fraction
    offset: Fraction
    lookback: Fraction

    @property
    def delay(self) -> int:
        """How many steps behind an evaluation the sample it reads is."""
        return math.ceil(self.offset / self.step)

    def at(self, index: int) -> Fraction:
        return index * self.step


def _newest(values: Sequence[Value], steps: range) -> float | None:
    """The newest sample of ``values`` at ``steps`` (what ``last_over_time`` reads), or ``None``."""
    for i in reversed(steps):
        if i < len(values) and values[i] not in (None, STALE):
            return float(values[i])  # type: ignore[arg-type]
    return None


def _instant(values: Sequence[Value], at: Fraction, step: Fraction, closed: bool) -> float | None:
    """An instant selector at the time ``at``: the newest sample within the lookback delta, unless
    the newest is a staleness marker."""
    for i in steps_in(at, LOOKBACK_DELTA, step, closed)[::-1]:
        value = values[i] if i < len(values) else None
        if value == STALE:
            return None
        if value is not None:
            return float(value)
    return None


@dataclass(frozen=True)
class Recorder:
    """The call-recording rule of one counter series on a target whose ``up`` is ``up``, in a job
    (of one deployment) whose targets' best ``up`` at each step is ``job_up``."""

    clock: Clock

    def record(
        self,
        values: Sequence[Value],
        up: Sequence[Value],
        job_up: Sequence[Value],
        evaluation: int,
        closed: bool,
    ) -> float | None:
        """The calls the rule records for this series at step ``evaluation`` (``None``: no sample):
        its growth since the previous read (present then; or, where its target was not scraped
        then, since its newest value within the lookback), or (a reset, a series gone from a target
        scraped successfully at the previous read and back, or a series not seen within the
        lookback) its whole value if its target was scraped successfully within the lookback before
        -- or, for a target new to Prometheus (a new pod, a new exporter: not scraped at all when
        the lookback starts), if its job was scraped successfully within the lookback before the
        read before that."""
        clock = self.clock
        now = clock.at(evaluation) - clock.offset
        if now < 0:
            return None
        current = _instant(values, now, clock.step, closed)
        if current is None:
            return None
        before = now - clock.step
        if before < 0:
            return None
        looked = steps_in(before, clock.lookback, clock.step, closed)
        previous = _instant(values, before, clock.step, closed)
        if previous is None and _instant(up, before, clock.step, closed) != 1:
            previous = _newest(values, looked)
        if previous is not None and current >= previous:
            return current - previous
        if any(up[i] == 1 for i in looked if i < len(up)):
            return current
        # A target new to Prometheus: not scraped (even failing) when the lookback starts, scraped
        # successfully now, in a job scraped successfully within the lookback before the read
        # before the previous one (so not a fresh Prometheus's first scrape interval).
        settled = steps_in(before - clock.step, clock.lookback, clock.step, closed)
        job_watched = any(job_up[i] == 1 for i in settled if i < len(job_up))
        new = _instant(up, before - clock.lookback, clock.step, closed) is None
        return current if job_watched and new and _instant(up, now, clock.step, closed) == 1 else None

    def recorded(
        self, values: Sequence[Value], up: Sequence[Value], job_up: Sequence[Value], steps: int
    ) -> dict[bool, list[float | None]]:
        """``record`` at every step up to ``steps``, both edges. They must agree but where a
        sample exactly as old as the lookback delta is still read (a growth of 0) on one edge only:
        that changes no sum."""
        result = {
            closed: [self.record(values, up, job_up, j, closed) for j in range(steps)] for closed in EDGES
        }
        for a, b in zip(result[True], result[False], strict=True):
            if a != b and (a or 0.0) != (b or 0.0):
                raise AssertionError("a scenario whose recorded calls depend on the window edge")
        return result


def firing(condition: Callable[[int], bool], steps: int, hold: Fraction, step: Fraction) -> list[bool]:
    """Whether an alert with ``for: hold`` is firing after each evaluation, given its condition."""
    out, since = [], None
    for j in range(steps):
        if condition(j):
            since = j if since is None else since
            out.append((j - since) * step >= hold)
        else:
            since = None
            out.append(False)
    return out


class WindowSums:
    """Sums of a per-step series (``None``: no sample) over any window, in constant time: what
    ``sum_over_time`` gives at each evaluation, without adding up the window again each step."""

    def __init__(self, values: Sequence[float | None]) -> None:
        self.totals, self.counts = [0.0], [0]
        for value in values:
            self.totals.append(self.totals[-1] + (value or 0.0))
            self.counts.append(self.counts[-1] + (value is not None))

    def over(self, steps: range) -> float | None:
        """The sum of the samples at ``steps`` (``None`` when there is none)."""
        start, stop = min(steps.start, len(self.counts) - 1), min(steps.stop, len(self.counts) - 1)
        if stop <= start or self.counts[stop] == self.counts[start]:
            return None
        return self.totals[stop] - self.totals[start]
