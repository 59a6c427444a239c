"""What the rules must record and when the alerts must fire, worked out from a scenario's samples.

A scenario gives, per input series, one value per step (``interval`` seconds); promtool evaluates
every rule group every step. This module computes, independently of PromQL, what the shipped rules
are specified to give on those samples: each counter's calls as the call-recording rule defines them
(:class:`Recorder`), sums of the recorded calls over a window, and each alert's firing steps under
its ``for`` (:func:`firing`).

Prometheus 2 and 3 differ at the edge of a window: a sample exactly ``window`` old is in it for 2.x
and out of it for 3.x (left-open ranges). Every computation here is made both ways
(:data:`EDGES`), and the test builders only assert where the two agree, so one exported test file
holds for Prometheus 2.42 and 3.x alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .document import STALE, Value

__all__ = ["EDGES", "LOOKBACK_DELTA", "Clock", "Recorder", "firing", "window_steps"]

#: Whether a sample exactly at a window's start is in it: Prometheus 2 (closed) and 3 (left-open).
EDGES = (True, False)
#: How far back an instant selector looks for a sample (Prometheus' default lookback delta).
LOOKBACK_DELTA = Fraction(300)


def steps_in(end: Fraction, window: Fraction, step: Fraction, closed: bool) -> range:
    """The steps whose time is within ``window`` before the time ``end`` (``end`` included)."""
    start = end - window
    first = math.ceil(start / step) if closed else math.floor(start / step) + 1
    return range(max(first, 0), math.floor(end / step) + 1)


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


def _present(values: Sequence[Value], steps: range) -> list[float]:
    """The samples of ``values`` at ``steps``, staleness markers left out (as a range selector)."""
    return [float(values[i]) for i in steps if i < len(values) and values[i] not in (None, STALE)]  # type: ignore[arg-type]


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
    """The call-recording rule of one counter series on a target whose ``up`` is ``up``."""

    clock: Clock

    def record(
        self, values: Sequence[Value], up: Sequence[Value], evaluation: int, closed: bool
    ) -> float | None:
        """The calls the rule records for this series at step ``evaluation`` (``None``: no sample):
        its growth since the previous read, or (a reset, or a series not seen within the lookback)
        its whole value if its target was scraped successfully within the lookback before."""
        clock = self.clock
        now = clock.at(evaluation) - clock.offset
        if now < 0:
            return None
        current = _instant(values, now, clock.step, closed)
        if current is None:
            return None
        before = now - clock.step
        seen = _present(values, steps_in(before, clock.lookback, clock.step, closed)) if before >= 0 else []
        if seen and current >= seen[-1]:
            return current - seen[-1]
        ups = _present(up, steps_in(before, clock.lookback, clock.step, closed)) if before >= 0 else []
        return current if 1.0 in ups else None

    def recorded(
        self, values: Sequence[Value], up: Sequence[Value], steps: int
    ) -> dict[bool, list[float | None]]:
        """:meth:`record` at every step up to ``steps``, both edges. They must agree but where a
        sample exactly as old as the lookback delta is still read (a growth of 0) on one edge only:
        that changes no sum."""
        result = {closed: [self.record(values, up, j, closed) for j in range(steps)] for closed in EDGES}
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


def sums(
    per_step: Mapping[str, Sequence[float | None]], end: int, window: Fraction, step: Fraction, closed: bool
) -> dict[str, float]:
    """Per key, the sum of its recorded values over ``window`` up to step ``end`` (keys with no
    sample in it left out), as ``sum_over_time`` gives it."""
    out: dict[str, float] = {}
    for key, values in per_step.items():
        found = [values[i] for i in window_steps(end, window, step, closed) if i < len(values)]
        present = [v for v in found if v is not None]
        if present:
            out[key] = float(sum(present))
    return out
