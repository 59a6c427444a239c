"""Counters as the tests feed them, the calls the rules must record from them, and the ratio alerts
over those calls (StateStoreErrorRateHigh, StateStoreFailingAcrossDags, StateStoreWatcherErrorRateHigh).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from store_metrics import catalogue

from .context import Context, Target
from .document import STALE, Series, Value
from .timeline import EDGES, Recorder, WindowSums, firing, window_steps

__all__ = ["Counter", "RatioAlert", "Recorded", "counting", "flat_after", "job_ups", "record", "up_series"]

Key = tuple[tuple[str, str], ...]


@dataclass
class Counter:
    """One counter series: ``metric`` of ``target`` with the task's ``tags``, a value per step."""

    target: Target
    metric: catalogue.Metric
    tags: dict[str, str]
    values: list[Value]
    comment: str = ""

    def series(self, ctx: Context) -> Series:
        return Series(ctx.name(self.metric), self.target.with_labels(**self.tags), self.values, self.comment)

    def recorded_labels(self, ctx: Context) -> dict[str, str]:
        """The labels of the recorded series its calls go to."""
        assert self.metric.recording is not None
        labels = {ctx.cluster: self.target.get(ctx.cluster), "job": self.target.get("job")}
        labels |= {k: v for k, v in self.tags.items() if k in self.metric.all_tags}
        return {**labels, **dict(self.metric.recording.labels)}


def counting(start: int, per_step: int, steps: int, first: int = 0) -> list[Value]:
    """``None`` before step ``start``, then ``first`` growing by ``per_step`` until ``steps``."""
    values: list[Value] = [None] * start
    return values + [first + per_step * i for i in range(steps - start)]


def flat_after(values: list[Value], step: int) -> list[Value]:
    """``values`` with no more calls from step ``step`` on (the series stays, as exporters keep it)."""
    last = values[step - 1]
    return [*values[:step], *([last] * (len(values) - step))]


def up_series(ctx: Context, target: Target, values: Sequence[Value]) -> Series:
    return Series("up", target.up(), list(values))


@dataclass
class Recorded:
    """What the call-recording rules must record: per recorded series (its labels), a value or
    ``None`` per step; the same for both window edges (checked)."""

    steps: int
    series: dict[Key, list[float | None]]
    _sums: dict[Key, WindowSums] = field(default_factory=dict, init=False, repr=False)

    def window(self, key: Key, end: int, window: Fraction, step: Fraction, closed: bool) -> float | None:
        """Series ``key``'s recorded calls over ``window`` up to step ``end`` (``sum_over_time``);
        ``None`` when it has no sample there."""
        if key not in self._sums:
            self._sums[key] = WindowSums(self.series[key])
        return self._sums[key].over(window_steps(end, window, step, closed))

    def labels(self, key: Key) -> dict[str, str]:
        return dict(key)

    def select(self, keep: Callable[[Mapping[str, str]], bool]) -> dict[Key, list[float | None]]:
        return {k: v for k, v in self.series.items() if keep(dict(k))}


def job_ups(
    ctx: Context, ups: Mapping[Target, Sequence[Value]], steps: int
) -> dict[tuple[str, str], list[Value]]:
    """Per deployment and job, its targets' best ``up`` at each step (what ``max by (cluster, job)``
    of their ``up`` gives): 1 if any was scraped successfully, 0 if all failed, ``None`` if none was
    scraped."""
    out: dict[tuple[str, str], list[Value]] = defaultdict(lambda: [None] * steps)
    for target, values in ups.items():
        job = out[(target.get(ctx.cluster), target.get("job"))]
        for i, value in enumerate(values[:steps]):
            if value in (None, STALE):
                continue
            job[i] = value if job[i] is None else max(job[i], value)  # type: ignore[type-var]
    return out


def record(
    ctx: Context, counters: Sequence[Counter], ups: Mapping[Target, Sequence[Value]], steps: int
) -> Recorded:
    """The recorded series ``counters`` give over ``steps`` evaluations."""
    recorder = Recorder(ctx.clock)
    out: dict[Key, list[float | None]] = defaultdict(lambda: [None] * steps)
    jobs = job_ups(ctx, ups, steps)
    for counter in counters:
        job = jobs[(counter.target.get(ctx.cluster), counter.target.get("job"))]
        per_edge = recorder.recorded(counter.values, ups[counter.target], job, steps)
        key = tuple(sorted((k, v) for k, v in counter.recorded_labels(ctx).items() if v != ""))
        merged = out[key]
        for j, value in enumerate(per_edge[EDGES[0]]):
            if value is not None:
                merged[j] = (merged[j] or 0.0) + value
    return Recorded(steps, dict(out))


@dataclass(frozen=True)
class RatioAlert:
    """An error-ratio alert over the recorded calls: errors / calls of the series ``keep`` selects,
    summed over ``window`` per ``by``, above ``ratio`` with at least ``floor`` calls, for ``hold``."""

    by: tuple[str, ...]
    keep: Callable[[Mapping[str, str]], bool]
    window: Fraction
    ratio: float
    floor: float
    hold: Fraction
    #: The outcome of the calls (attempts) that count against the ratio.
    bad: str = "error"

    def values(self, recorded: Recorded, step: Fraction, end: int, closed: bool) -> dict[Key, float]:
        """Per group, the ratio the alert's expression gives at step ``end`` (groups it drops left out)."""
        errors: dict[Key, float] = defaultdict(float)
        calls: dict[Key, float] = defaultdict(float)
        has_errors: set[Key] = set()
        for key in recorded.select(self.keep):
            labels = dict(key)
            group = tuple((b, labels.get(b, "")) for b in self.by)
            total = recorded.window(key, end, self.window, step, closed)
            if total is None:
                continue
            calls[group] += total
            if labels.get("outcome") == self.bad:
                errors[group] += total
                has_errors.add(group)
        return {
            g: errors[g] / calls[g]
            for g in has_errors
            if calls[g] > 0 and errors[g] / calls[g] > self.ratio and calls[g] >= self.floor
        }

    def states(self, recorded: Recorded, step: Fraction) -> dict[bool, dict[Key, list[bool]]]:
        """Per window edge and group, whether the alert fires after each evaluation."""
        out: dict[bool, dict[Key, list[bool]]] = {}
        for closed in EDGES:
            per_step = [self.values(recorded, step, j, closed) for j in range(recorded.steps)]
            groups = {g for values in per_step for g in values}
            out[closed] = {
                g: firing(lambda j, g=g, p=per_step: g in p[j], recorded.steps, self.hold, step)  # type: ignore[misc]
                for g in groups
            }
        return out
