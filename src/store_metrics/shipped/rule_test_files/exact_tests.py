"""rules.test.yml's exact-sum groups: a rollout's new targets count in full, and every recorded
counter's calls summed over a range are the calls made.

A target new to Prometheus (a rolled-out API server pod, an exporter pod replacing the old one, a job
scaled up) in a job Prometheus already watches holds calls made since it started: they count in
full. A fresh Prometheus, whose jobs are all new, counts none of what its targets held when it
first scraped them. Each group's expected sums are worked out twice: by the rule's model
(``timeline``) and as the calls the scenario made; the builder checks that they agree, so a
scenario that is not exact cannot be written down as one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store

from .calls import Counter, Recorded, counting, record, up_series
from .context import Context, Target
from .document import STALE, ExprCase, Group, Value, duration

__all__ = ["calls_made", "every_counter_group", "rollout_group"]


def calls_made(values: Sequence[Value], last: int, history: float = 0.0) -> float:
    """The calls a counter's samples up to step ``last`` show, less ``history`` (what it held
    before Prometheus could see it): each life of the counter (until a staleness marker or a value
    lower than before: its exporter restarted) adds its last value."""
    total, held = -history, None
    for value in values[: last + 1]:
        if value is None:
            continue
        if value == STALE:
            total += held or 0.0
            held = None
            continue
        number = float(value)
        if held is not None and number < held:
            total += held
        held = number
    return total + (held or 0.0)


@dataclass(frozen=True)
class _Pod:
    """A scrape target's life: first scraped at step ``first`` (failing its first ``failing``
    scrapes while it starts), gone from step ``stop``; its counter holds ``held`` calls at its first
    successful scrape and grows by ``per_step``."""

    instance: str
    first: int
    stop: int | None
    held: int
    per_step: int
    failing: int = 0


@dataclass
class _Case:
    counter: Counter
    history: float = 0.0


def _last_read(ctx: Context, end: int) -> int:
    """The newest step the evaluation at step ``end`` reads (``rule_offset`` behind)."""
    return math.floor((end * ctx.step - ctx.duration("rule_offset")) / ctx.step)


def _sums(ctx: Context, cases: Sequence[_Case], recorded: Recorded, end: int, what: str) -> list[ExprCase]:
    """Per recorded series (calls and retries apart), its sum over the whole range at step ``end``:
    the calls made, checked against the rule's model."""
    made: dict[str, dict[str, float]] = {}
    last = _last_read(ctx, end)
    for case in cases:
        counter = case.counter
        assert counter.metric.recording is not None
        labels = dict(sorted((k, v) for k, v in counter.recorded_labels(ctx).items() if v != ""))
        per_record = made.setdefault(counter.metric.recording.series, {})
        key = ctx.sample("", labels)
        per_record[key] = per_record.get(key, 0.0) + calls_made(counter.values, last, case.history)
    modelled = {
        ctx.sample("", dict(key)): float(sum(v for v in values[: end + 1] if v is not None))
        for key, values in recorded.series.items()
        if any(v is not None for v in values[: end + 1])
    }
    window = (end + 10) * ctx.step
    out = []
    for base, expected in made.items():
        shown = {k: v for k, v in expected.items() if v or k in modelled}
        for key, value in shown.items():
            if modelled.get(key, 0.0) != value:
                raise AssertionError(f"{what}: {key} records {modelled.get(key)}, {value} calls made")
        out.append(
            ExprCase(f"sum_over_time({ctx.record(base)}[{duration(window)}])", end * ctx.step, shown, what)
        )
    return out


def _scopes(ctx: Context, wanted: int) -> list[tuple[str, str]]:
    """Up to ``wanted`` distinct (job, deployment) pairs the selector accepts, jobs first."""
    jobs = ctx.jobs(wanted)
    return [(job, cluster) for cluster in ctx.clusters(wanted) for job in jobs][:wanted]


def rollout_group(ctx: Context) -> Group:
    """A rollout in each job Prometheus watches: its new targets' calls count in full; a fresh
    Prometheus beside them still counts no history."""
    write = catalogue.metric_for(Store.TASK, Outcome.WRITE)
    found_read = catalogue.metric_for(Store.TASK, Outcome.READ_FOUND)
    scopes = _scopes(ctx, 5)
    # The rollout comes once every job was watched for a few steps.
    at = ctx.clock.delay + 4
    n = at + ctx.clock.delay + 8
    cases: list[_Case] = []
    ups: dict[Target, list[Value]] = {}

    def target(
        scope: tuple[str, str], instance: str, first: int, stop: int | None, failing: int = 0
    ) -> Target:
        job, cluster = scope
        found = ctx.target(job, instance, cluster=cluster)
        scraped: list[Value] = [None] * first
        scraped += [0] * failing + [1] * ((stop or n) - first - failing)
        if stop is not None:
            scraped += [STALE] + [None] * (n - stop - 1)
        ups[found] = scraped[:n]
        return found

    def lives(first: int, stop: int | None, held: int, per_step: int) -> list[Value]:
        values = counting(first, per_step, stop or n, first=held)
        if stop is not None:
            values += [STALE] + [None] * (n - stop - 1)
        return values[:n]

    tags = {"dag_id": "rollout", "run_type": "scheduled", "operator": "PythonOperator"}
    described: list[str] = []
    stories = [
        (
            "a job's only target replaced: a worker's endpoint stops, a step later another starts on a "
            "new address",
            "only_target_replaced",
            [_Pod("worker-old:8793", 0, at, 0, 2)],
            [_Pod("worker-new:8793", at + 1, None, 4, 2)],
            write,
        ),
        (
            "a new statsd_exporter pod replacing the old one (both scraped for a step)",
            "exporter_replaced",
            [_Pod("statsd-old:9102", 0, at + 1, 0, 3)],
            [_Pod("statsd-new:9102", at, None, 2, 1)],
            write,
        ),
        (
            "API server pods rolled out (count_at = api_server): two new pods start while the old two "
            "still serve (one failing its first scrape while it starts), then the old stop",
            "api_server_rollout",
            [_Pod("api-old-1:9465", 0, at + 1, 0, 2), _Pod("api-old-2:9465", 0, at + 1, 0, 1)],
            [_Pod("api-new-1:9465", at, None, 3, 2, 1), _Pod("api-new-2:9465", at, None, 1, 3)],
            found_read,
        ),
        (
            "a job scaled from 1 to 3: two new triggerers beside the first",
            "scaled_1_to_3",
            [_Pod("triggerer-0:9465", 0, None, 0, 1)],
            [_Pod("triggerer-1:9465", at, None, 5, 1), _Pod("triggerer-2:9465", at, None, 6, 2)],
            write,
        ),
    ]
    # Each story in a job of its own where the selector accepts enough, else all in one job.
    apart = len(scopes) > len(stories)
    for index, (story, task, old, new, metric) in enumerate(stories):
        scope = scopes[index] if apart else scopes[0]
        for pod in [*old, *new]:
            found = target(scope, pod.instance, pod.first, pod.stop, pod.failing)
            values = lives(pod.first + pod.failing, pod.stop, pod.held, pod.per_step)
            cases.append(_Case(Counter(found, metric, {**tags, "task_id": task}, values, pod.instance)))
        described.append(f"- {scope[0]}: {story}.")
    if apart:
        # A fresh Prometheus: every target of its job first scraped in its first scrape interval
        # (here one step apart), each holding calls made before: history, never counted.
        scope = scopes[-1]
        for instance, first, held in (("fresh-0:9102", 0, 100), ("fresh-1:9102", 1, 200)):
            found = target(scope, instance, first, None)
            values = counting(first, 1, n, first=held)
            counter = Counter(
                found, write, {**tags, "task_id": "fresh_prometheus"}, values, f"{instance}: holds {held}"
            )
            cases.append(_Case(counter, history=held))
        described.append(
            f"- {scope[0]}: a fresh Prometheus, its targets first scraped a step apart: no history."
        )
    recorded = record(ctx, [c.counter for c in cases], ups, n)
    end = n - 1
    group = Group(
        "a rollout: a new target in a job Prometheus watches counts in full, a fresh Prometheus no history",
        ctx.step,
        [
            f"At step {at} each job's targets are replaced or added (new instances, new addresses);",
            "the new ones hold the calls made since they started. Summed over the range, the recorded",
            "calls are every call made, old targets' and new ones'.",
            *described,
        ],
        [c.counter.series(ctx) for c in cases] + [up_series(ctx, t, v) for t, v in ups.items()],
    )
    group.exprs += _sums(ctx, cases, recorded, end, "Every call made, old pods' and new ones'.")
    return group


def _lives(seed: int, n: int) -> list[Value]:
    """A counter's samples: first seen at a step after the start holding its first calls (a task's
    first run on a watched target), growing unevenly, restarted once (its exporter: back lower),
    and gone for a scrape, then back holding the calls since (dropped after its ttl, made again)."""
    first = 1 + seed % 3
    reset, gone = first + 5 + seed % 2, first + 10
    values: list[Value] = [None] * first
    held = 1 + seed
    for step in range(first, n):
        if step == reset:
            held = 1 + seed % 2
        elif step == gone:
            values.append(STALE)
            continue
        elif step > first:
            held += (step * (seed + 1)) % 4
        values.append(held)
    return values


def every_counter_group(ctx: Context) -> Group:
    """Every recorded counter, each with its own calls: its recorded sum is exactly its calls."""
    job = ctx.jobs(1)[0]
    main = ctx.target(job, "airflow:9102")
    n = ctx.clock.delay + 20
    cases: list[_Case] = []
    for seed, metric in enumerate(catalogue.recorded_counters()):
        labels = {"dag_id": "exact", "task_id": metric.name.replace(".", "_"), "run_type": "manual"}
        labels["operator"] = "PythonOperator"
        if "operation" in metric.all_tags:
            labels["operation"] = "get"
        cases.append(_Case(Counter(main, metric, labels, _lives(seed, n), metric.name)))
    ups: dict[Target, list[Value]] = {main: [1] * n}
    recorded = record(ctx, [c.counter for c in cases], ups, n)
    group = Group(
        "every recorded counter: its recorded calls are exactly the calls made",
        ctx.step,
        [
            "One series of each counter (each store's reads, writes, deletes, clears and errors, and",
            "the retried attempts), each first seen holding its first calls on a watched target,",
            "growing unevenly, restarted once and gone for a scrape: summed over the range, each",
            "recorded series is that counter's calls.",
        ],
        [c.counter.series(ctx) for c in cases] + [up_series(ctx, main, ups[main])],
    )
    group.exprs += _sums(ctx, cases, recorded, n - 1, "Each counter's calls, exactly.")
    return group
