"""When to look at an alert: the evaluations where Prometheus 2 and 3 agree on its state.

From an alert's firing state after each evaluation (``timeline.firing``, once per window edge),
``moments`` picks the evaluation just before it fires, the one it fires at, one while it keeps
firing and the one it resolves at, each where both edges give the same state (so the exported test
holds on both major versions), or says it never fires.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .timeline import EDGES

__all__ = ["Moments", "moments", "quiet"]


@dataclass(frozen=True)
class Moments:
    """Evaluation steps: ``pending`` (not yet firing), ``fires``, ``holds`` (still firing),
    ``resolved`` (no longer firing; ``None`` when it fires to the end)."""

    pending: int | None
    fires: int
    holds: int
    resolved: int | None


def _both(states: Mapping[bool, Sequence[bool]], step: int, want: bool) -> bool:
    return all(states[edge][step] == want for edge in EDGES)


def moments(states: Mapping[bool, Sequence[bool]], hold_from: int | None = None) -> Moments:
    """The moments of one alert group's states (both edges). ``hold_from``: the earliest step to
    show it still firing at (default: the middle of its firing)."""
    steps = len(states[EDGES[0]])
    fires = next((j for j in range(steps) if _both(states, j, True)), None)
    if fires is None:
        raise AssertionError("the scenario's alert never fires on both Prometheus versions")
    pending = next((j for j in range(fires - 1, -1, -1) if _both(states, j, False)), None)
    last = fires
    while last + 1 < steps and _both(states, last + 1, True):
        last += 1
    resolved = next((j for j in range(last + 1, steps) if _both(states, j, False)), None)
    holds = max(fires, min(last, hold_from)) if hold_from is not None else (fires + last) // 2
    return Moments(pending, fires, holds, resolved)


def quiet(states: Mapping[bool, Mapping[Any, Sequence[bool]]]) -> bool:
    """Whether no group fires at any evaluation, on either edge."""
    return not any(any(group) for edge in EDGES for group in states[edge].values())
