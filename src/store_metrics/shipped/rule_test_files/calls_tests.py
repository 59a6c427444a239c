"""rules.test.yml: the recorded calls and the task side's alerts, for the settings of the export.

Each group is a scenario; its input series are built for the settings (steps of ``rule_interval``,
jobs and labels the ``selector`` accepts, the ``cluster_label``), and what it must give is worked out
from the calls it makes (``calls``, ``timeline``), never copied from a run of promtool.
"""

from __future__ import annotations

import math
from fractions import Fraction

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store

from .calls import Counter, RatioAlert, Recorded, counting, flat_after, record, up_series
from .context import Context, Target, TooLong
from .document import STALE, AlertCase, Document, ExprCase, Group, Value, duration
from .exact_tests import every_counter_group, rollout_group
from .moments import moments, quiet
from .timeline import firing, window_steps

__all__ = ["document"]

RULES = "rules.yml"
CALLS = "task:store_metrics_calls:increase"
ERROR_RATE, FAILING, NEVER_READ = (
    "StateStoreErrorRateHigh",
    "StateStoreFailingAcrossDags",
    "StateStoreTaskStateNeverRead",
)
START_OVER, MISSING = "StateStoreRetriesStartOver", "StateStoreMetricsMissing"


def tags(dag: str, task: str = "t", **extra: str) -> dict[str, str]:
    """A task's tags (scheduled PythonOperator unless ``extra`` says otherwise)."""
    return {"dag_id": dag, "task_id": task, "run_type": "scheduled", "operator": "PythonOperator", **extra}


def metric(store: Store, outcome: Outcome) -> catalogue.Metric:
    return catalogue.metric_for(store, outcome)


def _whole_range(ctx: Context, recorded: Recorded, end: int, what: str) -> ExprCase:
    """The recorded calls summed over everything up to step ``end``: per recorded series."""
    window = (end + 10) * ctx.step
    expected = {}
    for key, values in recorded.series.items():
        present = [v for v in values[: end + 1] if v is not None]
        if present:
            expected[ctx.sample("", dict(key))] = float(sum(present))
    expr = f"sum_over_time({ctx.record(CALLS)}[{duration(window)}])"
    return ExprCase(expr, end * ctx.step, expected, what)


def _known_target_counters(ctx: Context, main: Target, flaky: Target, n: int) -> list[Counter]:
    etl = tags("etl", "extract")
    return [
        Counter(main, metric(Store.TASK, Outcome.WRITE), etl, counting(0, 2, n), "2 writes a step"),
        Counter(
            main,
            metric(Store.TASK, Outcome.READ_FOUND),
            etl,
            counting(3, 1, n, first=4),
            "first seen at step 3 holding 4 (a task's first run on a target already scraped): counts in full",
        ),
        Counter(
            main,
            metric(Store.TASK, Outcome.READ_ABSENT),
            etl,
            [*counting(0, 3, 6), *counting(0, 1, n - 6, first=1)],
            "3 a step, reset at step 6 (the exporter restarted: 15 -> 1): the 1 counts in full",
        ),
        Counter(
            main,
            metric(Store.TASK, Outcome.DELETE),
            etl,
            [*counting(0, 1, 6), STALE, *counting(0, 1, n - 7, first=5)],
            "1 a step; its exporter restarted: scraped without it at step 6, back at step 7 holding 5, "
            "its old value: the 5 count in full",
        ),
        Counter(
            flaky,
            metric(Store.TASK, Outcome.ERROR),
            {**etl, "operation": "set"},
            [*counting(0, 1, 5), STALE, *counting(0, 1, n - 6, first=6)],
            "1 a step on a target whose scrape failed at step 5: 4 -> 6 across it counts once",
        ),
        Counter(
            main,
            metric(Store.ASSET, Outcome.WRITE),
            tags("report", "publish", team_name="analytics"),
            counting(0, 1, n),
            "a team's asset writes",
        ),
    ]


def _apart_counters(ctx: Context, n: int) -> tuple[list[Counter], list[Target]]:
    """The same DAG in a second job and a second deployment (kept apart), a job of two instances
    (summed), and a target of a job Prometheus never scraped before, first scraped at step 4 with its
    counter already holding 5000 (history: never counted)."""
    jobs, clusters = ctx.jobs(3), ctx.clusters(2)
    write = metric(Store.TASK, Outcome.WRITE)
    etl = tags("etl", "extract")
    out: list[Counter] = []
    if len(jobs) > 1:
        out.append(Counter(ctx.target(jobs[1], "statsd:9102"), write, etl, counting(0, 2, n), "a second job"))
    if len(clusters) > 1:
        other = ctx.target(jobs[0], "east:9102", cluster=clusters[1])
        out.append(Counter(other, write, etl, counting(0, 7, n), "a second deployment"))
    api = jobs[-1]
    for port, per_step in ((9465, 1), (9466, 2)):
        worker = ctx.target(api, f"api:{port}")
        out.append(Counter(worker, write, tags("x", run_type="manual"), counting(0, per_step, n), "a worker"))
    watched = {(c.target.get("job"), c.target.get(ctx.cluster)) for c in out}
    watched.add((jobs[0], ctx.clusters(1)[0]))
    late = ctx.unwatched(watched, "late:9102") or ctx.target(jobs[0], "late:9102")
    new_job = (late.get("job"), late.get(ctx.cluster)) not in watched
    why = "history on a target of a job never scraped before" if new_job else "a new target of a watched job"
    out.append(Counter(late, write, tags("old", "history"), counting(4, 1, n, first=5000), why))
    return out, [c.target for c in out]


def _recorded_group(ctx: Context) -> Group:
    n = ctx.clock.delay + 24
    main, flaky = ctx.target(ctx.jobs(1)[0], "airflow:9102"), ctx.target(ctx.jobs(1)[0], "flaky:9102")
    counters = _known_target_counters(ctx, main, flaky, n)
    others, other_targets = _apart_counters(ctx, n)
    counters += others
    ups: dict[Target, list[Value]] = {main: [1] * n, flaky: [*([1] * 5), 0, *([1] * (n - 6))]}
    for target in other_targets:
        late: list[Value] = [None] * 4
        late += [1] * (n - 4)
        ups[target] = [1] * n if target.get("instance") != "late:9102" else late
    recorded = record(ctx, counters, ups, n)
    end = n - 1
    group = Group(
        "the recorded calls: exact, a task's first run and resets included, history never",
        ctx.step,
        [
            f"Counters scraped every {ctx.values['rule_interval']} (a step), the rules evaluated every",
            f"step and reading {ctx.values['rule_offset']} behind. Summed over the whole range, the recorded",
            "calls are each series' calls while Prometheus watched it; jobs and deployments kept apart,",
            "the workers (instances) of one job summed.",
        ],
        [c.series(ctx) for c in counters] + [up_series(ctx, t, v) for t, v in ups.items()],
    )
    group.exprs.append(_whole_range(ctx, recorded, end, "Every recorded series, summed over the range."))
    return group


def document(ctx: Context) -> Document:
    groups, left_out = [], []
    for build in (
        _recorded_group,
        every_counter_group,
        rollout_group,
        _gap_group,
        _burst_group,
        _threshold_group,
        _background_group,
        _failing_group,
        _retries_group,
        _missing_group,
        _never_read_group,
    ):
        try:
            groups.append(build(ctx))
        except TooLong as exc:
            left_out.append(str(exc))
    if left_out:
        # Said in the file: the settings are valid, only promtool cannot hold a window that long.
        notes = ["", "Not generated for these settings (run with a longer rule_interval to test them):"]
        notes += [f"- {reason}." for reason in left_out]
    else:
        notes = []
    return Document(
        "Unit tests for rules.yml:  promtool test rules rules.test.yml",
        [RULES],
        ctx.step,
        ["store-metrics.rules", "store-metrics.alerts", "store-metrics.hygiene"],
        groups,
        [
            "Written by `store-metrics export` for its settings (rule_interval "
            f"{ctx.values['rule_interval']},",
            f"selector {ctx.values['selector']}, cluster_label {ctx.cluster}, ...): every group's steps are",
            "rule intervals, promtool evaluates every group each step, and each expected value is worked",
            "out from the calls the scenario makes, the same on Prometheus 2 and 3.",
            *notes,
        ],
    )


# -- gaps: a scrape gap and a Prometheus down, shorter and longer than counter_lookback -------------


def _gap_group(ctx: Context) -> Group:
    lookback = ctx.setting_steps("counter_lookback")
    short, long = max(2, lookback // 2), lookback + 3
    job = ctx.jobs(1)[0]
    # The unreachable target has a healthy one beside it in its job: the job was scraped all along,
    # yet what the unreachable one held after its failed scrapes is still history.
    gone, beside = ctx.target(job, "unreachable:9102"), ctx.target(job, "beside:9102")
    # Prometheus down scrapes nothing: the target it watches is alone in its job (no other target
    # of the job scraped meanwhile, as there would be if only this one were new).
    taken = {(job, ctx.clusters(1)[0])}
    down = ctx.unwatched(taken, "watched:9102") or ctx.target(job, "watched:9102")
    write = metric(Store.TASK, Outcome.WRITE)
    n = ctx.clock.delay + 5 + long + 6 + short + 6
    ctx.within_promtool(n, "the scrape gaps", "counter_lookback")
    # The unreachable target: scraped for 5 steps, then failing for longer than the lookback while
    # its exporter keeps counting (1 a step), then scraped again: what it held meanwhile never counts.
    values: list[Value] = [*range(5), STALE, *([None] * (long - 1))]
    values += [5 + long + i for i in range(n - len(values))]
    up: list[Value] = [*([1] * 5), *([0] * long), *([1] * (n - 5 - long))]
    # Prometheus itself down (no sample of anything) for less than the lookback, then for longer.
    first = 5 + short
    second = first + 6 + long
    watched: list[Value] = [None if 5 <= i < first or first + 6 <= i < second else 3 * i for i in range(n)]
    up_watched: list[Value] = [None if v is None else 1 for v in watched]
    counters = [
        Counter(gone, write, tags("gap", "unreachable"), values, "unreachable for longer than the lookback"),
        Counter(beside, write, tags("gap", "beside"), counting(0, 1, n), "scraped all along, in its job"),
        Counter(
            down, write, tags("gap", "prometheus_down"), watched, "Prometheus down: shorter, then longer"
        ),
    ]
    always: list[Value] = [1] * n
    ups: dict[Target, list[Value]] = {gone: up, beside: always, down: up_watched}
    recorded = record(ctx, counters, ups, n)
    group = Group(
        "a scrape gap and a Prometheus down: bridged within counter_lookback, history never counted after",
        ctx.step,
        [
            f"counter_lookback is {ctx.values['counter_lookback']} ({lookback} steps). A target unreachable",
            f"for {long} steps comes back holding what its exporter counted meanwhile: not counted, only",
            "its growth after, though another target of its job was scraped all along. A Prometheus",
            f"down for {short} steps counts the calls made meanwhile once it",
            f"is back; down for {long} steps, it counts nothing of what the counter held.",
        ],
        [c.series(ctx) for c in counters] + [up_series(ctx, t, v) for t, v in ups.items()],
    )
    group.exprs.append(
        _whole_range(ctx, recorded, n - 1, "Each series' calls while Prometheus could see them.")
    )
    return group


# -- the alerts ------------------------------------------------------------------------------------

Groups = dict[tuple[tuple[str, str], ...], dict[bool, list[bool]]]


def error_rate(ctx: Context, watchers: bool = False) -> RatioAlert:
    """StateStoreErrorRateHigh (per DAG, watchers left out), or StateStoreWatcherErrorRateHigh."""
    by = ("operator", "task_id") if watchers else ("dag_id", "team_name")
    return RatioAlert(
        (ctx.cluster, "job", *by),
        lambda labels: (labels.get("run_type") == catalogue.RUN_TYPE_ASSET_WATCHER) == watchers,
        ctx.duration("error_window"),
        float(ctx.values["error_ratio"]),
        float(ctx.values["error_min_calls"]),
        ctx.duration("error_for"),
    )


def failing(ctx: Context) -> RatioAlert:
    return RatioAlert(
        (ctx.cluster, "job"),
        lambda labels: True,
        ctx.duration("failing_window"),
        float(ctx.values["failing_ratio"]),
        float(ctx.values["failing_min_calls"]),
        ctx.duration("failing_for"),
    )


def alert_states(ctx: Context, alert: RatioAlert, recorded: Recorded) -> Groups:
    """Per alert group, whether it fires after each evaluation, per window edge."""
    per_edge = alert.states(recorded, ctx.step)
    groups = {g for edge in per_edge.values() for g in edge}
    return {g: {edge: per_edge[edge].get(g, [False] * recorded.steps) for edge in per_edge} for g in groups}


def agreeing(states: Groups, at: int, direction: int) -> int:
    """``at``, or the nearest evaluation in ``direction`` where both edges agree for every group."""
    while any(s[True][at] != s[False][at] for s in states.values()):
        at += direction
    return at


def alert_case(
    ctx: Context,
    rule_file: str,
    name: str,
    alert: RatioAlert,
    recorded: Recorded,
    *,
    at: int,
    external: dict[str, str] | None = None,
    comment: str = "",
    states: Groups | None = None,
) -> AlertCase:
    """Every group of ``name`` firing after evaluation ``at``, with its labels and annotations
    (``states``: ``alert_states``, when the caller has them)."""
    states = alert_states(ctx, alert, recorded) if states is None else states
    assert all(s[True][at] == s[False][at] for s in states.values()), f"{name}: step {at} is on an edge"
    shown = []
    for group in sorted(g for g, s in states.items() if s[True][at]):
        values = {alert.values(recorded, ctx.step, at, closed)[group] for closed in (True, False)}
        assert len(values) == 1, f"{name}: its value at step {at} depends on the window edge"
        shown.append(ctx.firing(rule_file, name, dict(group), values.pop(), external))
    return AlertCase(name, at * ctx.step, shown, comment)


def lifecycle(
    ctx: Context,
    rule_file: str,
    name: str,
    alert: RatioAlert,
    recorded: Recorded,
    *,
    external: dict[str, str] | None = None,
) -> list[AlertCase]:
    """Pending (not firing yet), firing, still firing and resolved, for the first group to fire."""
    states = alert_states(ctx, alert, recorded)
    first = min(states, key=lambda g: moments(states[g]).fires)
    seen = moments(states[first])
    picks: list[tuple[int, str]] = []
    if seen.pending is not None:
        picks.append((agreeing(states, seen.pending, -1), "pending: not firing yet"))
    picks.append((agreeing(states, seen.fires, 1), f"firing: the condition held for {alert.hold}s"))
    picks.append((agreeing(states, seen.holds, 1), "still firing"))
    if seen.resolved is not None:
        picks.append((agreeing(states, seen.resolved, 1), "resolved: the calls left the window"))
    return [
        alert_case(
            ctx, rule_file, name, alert, recorded, at=at, external=external, comment=why, states=states
        )
        for at, why in picks
    ]


def _burst_group(ctx: Context) -> Group:
    """An hourly-style DAG: a short run whose every call fails, and a second run while the first is
    still in the window: one incident, resolved once both left it. The cluster is an external label
    here (no series carries it): the dashboard link falls back to it."""
    floor, window = int(ctx.values["error_min_calls"]), ctx.setting_steps("error_window")
    run = 4
    per_step = max(3, math.ceil(floor / run))
    start = ctx.clock.delay + 2
    second = start + max(run + 1, window // 2)
    n = second + run + window + ctx.setting_steps("error_for") + ctx.clock.delay + 4
    ctx.within_promtool(n, f"{ERROR_RATE} (a short run)", "error_window", "error_for")
    values: list[Value] = []
    total = 0
    for i in range(n):
        if start <= i < start + run or second <= i < second + run:
            total += per_step
        values.append(total)
    target = ctx.target(ctx.jobs(1)[0], "airflow:9102", cluster="")
    errors = metric(Store.TASK, Outcome.ERROR)
    counter = Counter(target, errors, tags("hourly", "sync", operation="get"), values, "two failing runs")
    recorded = record(ctx, [counter], {target: [1] * n}, n)
    external = {ctx.cluster: "prod"}
    group = Group(
        "StateStoreErrorRateHigh: a short run of a DAG that fails on every call",
        ctx.step,
        [
            f"hourly.sync runs for {run} steps from step {start} and again from step {second}, {per_step}",
            f"failed calls a step (100% > {ctx.values['error_ratio']}, at least {floor} calls): pending,"
            " firing",
            f"{ctx.values['error_for']} later, still firing while a run is in the"
            f" {ctx.values['error_window']}",
            "window, resolved once neither is. The deployment is an external label: the link carries it.",
        ],
        [counter.series(ctx), up_series(ctx, target, [1] * n)],
        external_labels=external,
    )
    group.alerts += lifecycle(ctx, RULES, ERROR_RATE, error_rate(ctx), recorded, external=external)
    return group


def _threshold_group(ctx: Context) -> Group:
    """Two DAGs of 1000 calls a step: one failing just more than ``error_ratio`` of them (fires),
    one just less (never fires)."""
    ratio = Fraction(ctx.values["error_ratio"])
    per_step = 1000
    above, below = math.floor(ratio * per_step) + 1, math.ceil(ratio * per_step) - 1
    n = ctx.clock.delay + 2 + ctx.setting_steps("error_window") + ctx.setting_steps("error_for") + 3
    ctx.within_promtool(n, f"{ERROR_RATE} (the threshold)", "error_window", "error_for")
    target = ctx.target(ctx.jobs(1)[0], "airflow:9102")
    counters = []
    for dag, failed in (("above", above), ("below", below)):
        if failed > 0:
            errors = metric(Store.TASK, Outcome.ERROR)
            counters.append(Counter(target, errors, tags(dag, operation="get"), counting(0, failed, n)))
        writes = metric(Store.TASK, Outcome.WRITE)
        counters.append(Counter(target, writes, tags(dag), counting(0, per_step - failed, n)))
    recorded = record(ctx, counters, {target: [1] * n}, n)
    group = Group(
        "StateStoreErrorRateHigh: just above error_ratio fires, just below does not",
        ctx.step,
        [
            f"{per_step} calls a step each: DAG above fails {above} of them (more than"
            f" {ctx.values['error_ratio']}),",
            f"DAG below {below}. Only above fires, {ctx.values['error_for']} after its calls entered"
            " the window.",
        ],
        [c.series(ctx) for c in counters] + [up_series(ctx, target, [1] * n)],
    )
    group.alerts += lifecycle(ctx, RULES, ERROR_RATE, error_rate(ctx), recorded)
    return group


def _background_group(ctx: Context) -> Group:
    """Many DAGs with a tiny error share, and one DAG failing fewer calls than the floor: no alert."""
    floor, window = int(ctx.values["error_min_calls"]), ctx.setting_steps("error_window")
    n = ctx.clock.delay + window + ctx.setting_steps("error_for") + 3
    ctx.within_promtool(n, "the background error rate", "error_window", "error_for")
    target = ctx.target(ctx.jobs(1)[0], "airflow:9102")
    counters = []
    for dag, store, outcome in (
        ("d1", Store.TASK, Outcome.WRITE),
        ("d2", Store.ASSET, Outcome.WRITE),
        ("d3", Store.TASK, Outcome.READ_FOUND),
    ):
        counters.append(Counter(target, metric(store, outcome), tags(dag), counting(0, 4999, n)))
        errors = metric(store, Outcome.ERROR)
        counters.append(Counter(target, errors, tags(dag, operation="set"), counting(0, 1, n)))
    if floor > 1:
        few: list[Value] = [min(i, floor - 1) for i in range(n)]
        counters.append(
            Counter(target, metric(Store.TASK, Outcome.ERROR), tags("small", operation="get"), few)
        )
    recorded = record(ctx, counters, {target: [1] * n}, n)
    for alert in (error_rate(ctx), failing(ctx)):
        assert quiet(alert.states(recorded, ctx.step)), "the background scenario fires"
    group = Group(
        "a background error rate across many DAGs, and fewer calls than the floor: no alert",
        ctx.step,
        [
            "Three DAGs make 4999 good calls and 1 failed one a step (0.02%, under every ratio the",
            "settings accept)"
            + (f"; small fails {floor - 1} calls, under the floor of {floor}." if floor > 1 else "."),
        ],
        [c.series(ctx) for c in counters] + [up_series(ctx, target, [1] * n)],
    )
    for at in (n // 2, n - 1):
        group.alerts += [AlertCase(ERROR_RATE, at * ctx.step, []), AlertCase(FAILING, at * ctx.step, [])]
    return group


def _failing_group(ctx: Context) -> Group:
    """The store failing for everyone: 15 of 16 calls fail, watchers included."""
    fmin, floor = int(ctx.values["failing_min_calls"]), int(ctx.values["error_min_calls"])
    k = max(1, math.ceil(fmin / 16), math.ceil(floor / 4))
    start = ctx.clock.delay + 2
    n = start + max(ctx.setting_steps("failing_window"), ctx.setting_steps("error_window"))
    n += max(ctx.setting_steps("failing_for"), ctx.setting_steps("error_for")) + 4
    ctx.within_promtool(n, FAILING, "failing_window", "error_window", "failing_for", "error_for")
    target = ctx.target(ctx.jobs(1)[0], "airflow:9102")
    watcher = {"dag_id": catalogue.DAG_ID_NONE, "task_id": "s3_bucket", "run_type": "asset_watcher"}
    rows = [
        ("a", Store.TASK, Outcome.ERROR, 5, {"operation": "get"}),
        ("b", Store.TASK, Outcome.ERROR, 5, {"operation": "set"}),
        ("c", Store.ASSET, Outcome.ERROR, 4, {"operation": "get"}),
        ("w", Store.ASSET, Outcome.ERROR, 1, {**watcher, "operator": "S3KeyTrigger", "operation": "get"}),
        ("d", Store.TASK, Outcome.WRITE, 1, {}),
    ]
    counters = [
        Counter(
            target,
            metric(store, outcome),
            {**tags(dag), **extra},
            [0] * start + counting(0, per * k, n - start),
        )
        for dag, store, outcome, per, extra in rows
    ]
    recorded = record(ctx, counters, {target: [1] * n}, n)
    group = Group(
        "StateStoreFailingAcrossDags: the store fails for everyone",
        ctx.step,
        [
            f"From step {start + 1}, {15 * k} of the {16 * k} calls a step fail (93.75% >"
            f" {ctx.values['failing_ratio']}):",
            "DAGs a, b, c and an asset watcher; DAG d's calls work. One critical alert for the job; the",
            "failing DAGs' own alerts follow (alertmanager-inhibit.yml keeps them quiet meanwhile), the",
            "watcher's is in watcher-rules.yml.",
        ],
        [c.series(ctx) for c in counters] + [up_series(ctx, target, [1] * n)],
    )
    group.alerts += lifecycle(ctx, RULES, FAILING, failing(ctx), recorded)
    group.alerts += lifecycle(ctx, RULES, ERROR_RATE, error_rate(ctx), recorded)
    return group


def _never_read_values(
    ctx: Context, recorded: Recorded, at: int, closed: bool
) -> dict[tuple[tuple[str, str], ...], float]:
    """StateStoreTaskStateNeverRead's expression at evaluation ``at``: per task, its task store
    writes in the window, where it made no read in it."""
    window = ctx.duration("never_read_window")
    by = (ctx.cluster, "job", "dag_id", "task_id", "team_name")
    writes: dict[tuple[tuple[str, str], ...], float] = {}
    reads: set[tuple[tuple[str, str], ...]] = set()
    for key in recorded.series:
        labels = dict(key)
        if labels.get("store") != "task":
            continue
        group = tuple((b, labels.get(b, "")) for b in by)
        total = recorded.window(key, at, window, ctx.step, closed) or 0.0
        if labels.get("outcome") == "write" and total > 0:
            writes[group] = writes.get(group, 0.0) + total
        elif labels.get("outcome") in ("read_found", "read_absent") and total > 0:
            reads.add(group)
    return {g: v for g, v in writes.items() if g not in reads}


def _never_read_group(ctx: Context) -> Group:
    """A task that writes task state for a while and never reads it: info, then resolved."""
    writing = max(4, ctx.setting_steps("never_read_for") // 2)
    window, hold = ctx.setting_steps("never_read_window"), ctx.duration("never_read_for")
    n = ctx.clock.delay + writing + window + ctx.steps(hold) + 4
    ctx.within_promtool(n, NEVER_READ, "never_read_window", "never_read_for")
    target = ctx.target(ctx.jobs(1)[0], "airflow:9102")
    write, absent = metric(Store.TASK, Outcome.WRITE), metric(Store.TASK, Outcome.READ_ABSENT)
    counters = [
        Counter(
            target,
            write,
            tags("cleanup", "purge"),
            flat_after(counting(0, 1, n), writing),
            "writes, never reads",
        ),
        Counter(target, write, tags("resume", "job"), flat_after(counting(0, 1, n), writing)),
        Counter(
            target,
            absent,
            tags("resume", "job"),
            flat_after(counting(0, 1, n), writing),
            "a read: never reported",
        ),
    ]
    recorded = record(ctx, counters, {target: [1] * n}, n)
    states: Groups = {}
    per_step = {
        closed: [_never_read_values(ctx, recorded, j, closed) for j in range(n)] for closed in (True, False)
    }
    for key in {g for edge in per_step.values() for step in edge for g in step}:
        states[key] = {
            closed: firing(lambda j, c=closed, g=key: g in per_step[c][j], n, hold, ctx.step)  # type: ignore[misc]
            for closed in (True, False)
        }
    seen = moments(states[next(iter(states))])
    group = Group(
        "StateStoreTaskStateNeverRead: a hygiene finding that resolves",
        ctx.step,
        [
            f"cleanup.purge writes task state for {writing} steps and never reads it, then stops (its",
            "series stays, as exporters keep it); resume.job writes and reads (a get() that found nothing",
            f"is a read). Pending, firing {ctx.values['never_read_for']} later, resolved once its last write",
            f"is {ctx.values['never_read_window']} old.",
        ],
        [c.series(ctx) for c in counters] + [up_series(ctx, target, [1] * n)],
    )
    for moment, why in (
        (seen.pending, "pending"),
        (seen.fires, "firing"),
        (seen.holds, "still firing"),
        (seen.resolved, "resolved"),
    ):
        if moment is None:
            continue
        direction = 1 if why != "pending" else -1
        at = agreeing(states, moment, direction)
        # Firing on both, but with a value that differs (a write exactly a window old): move on.
        while any(
            per_step[True][at].get(g) != per_step[False][at].get(g) for g, s in states.items() if s[True][at]
        ):
            at = agreeing(states, at + direction, direction)
        shown = [
            ctx.firing(RULES, NEVER_READ, dict(g), per_step[True][at][g])
            for g in sorted(g for g, s in states.items() if s[True][at])
        ]
        group.alerts.append(AlertCase(NEVER_READ, at * ctx.step, shown, why))
    return group


# -- retried attempts that start over ---------------------------------------------------------------


def start_over(ctx: Context) -> RatioAlert:
    """StateStoreRetriesStartOver: per task, the share of its retried attempts that found nothing."""
    return RatioAlert(
        (ctx.cluster, "job", "dag_id", "task_id", "team_name"),
        lambda labels: (
            labels.get("outcome", "").startswith("retry_")
            and labels.get("run_type") != catalogue.RUN_TYPE_ASSET_WATCHER
        ),
        ctx.duration("retry_window"),
        float(ctx.values["retry_start_over_ratio"]),
        float(ctx.values["retry_min_attempts"]),
        Fraction(0),
        bad="retry_not_resumed",
    )


def _retries_group(ctx: Context) -> Group:
    """A task whose every retry starts over (fires), one whose retries resume (never fires), and one
    that started over fewer times than the floor (never fires)."""
    floor = int(ctx.values["retry_min_attempts"])
    start = ctx.clock.delay + 2
    n = start + floor + ctx.clock.delay + 6
    target = ctx.target(ctx.jobs(1)[0], "airflow:9102")
    resumed, not_resumed = catalogue.RETRY_RESUMED, catalogue.RETRY_NOT_RESUMED
    retried = [0] * start + counting(0, 1, n - start)
    counters = [
        Counter(target, not_resumed, tags("etl", "starts_over"), retried, "every retry finds nothing"),
        Counter(target, resumed, tags("etl", "resumes"), retried, "every retry finds its state"),
        Counter(target, not_resumed, tags("etl", "resumes"), [0] * n),
    ]
    if floor > 1:
        once: list[Value] = [0] * start
        once += [min(i, floor - 1) for i in range(n - start)]
        counters.append(
            Counter(target, not_resumed, tags("etl", "rarely"), once, f"{floor - 1}: under the floor")
        )
    recorded = record(ctx, counters, {target: [1] * n}, n)
    group = Group(
        "StateStoreRetriesStartOver: a task whose retries start over, not one whose retries resume",
        ctx.step,
        [
            f"From step {start + 1} etl.starts_over retries once a step and each retry finds nothing",
            "(retry_not_resumed); etl.resumes retries as often and each finds its state. Only",
            f"starts_over fires, once it has {floor} retries in the {ctx.values['retry_window']} window.",
        ],
        [c.series(ctx) for c in counters] + [up_series(ctx, target, [1] * n)],
    )
    group.alerts += lifecycle(ctx, RULES, START_OVER, start_over(ctx), recorded)
    return group


# -- the counters stop arriving -----------------------------------------------------------------------


def _missing_group(ctx: Context) -> Group:
    """A job whose counters stop arriving (its series end) fires, per deployment and job; a job whose
    counters keep arriving does not. Resolved once the last count left ``missing_window``."""
    jobs = ctx.jobs(2)
    stop = ctx.clock.delay + 3
    window, hold = ctx.setting_steps("missing_window"), ctx.duration("missing_for")
    n = stop + window + ctx.steps(hold) + 4
    ctx.within_promtool(n, MISSING, "missing_window", "missing_for")
    gone, kept = ctx.target(jobs[0], "gone:9102"), ctx.target(jobs[-1], "kept:9102")
    write = metric(Store.TASK, Outcome.WRITE)
    values: list[Value] = [*counting(0, 1, stop), STALE, *([None] * (n - stop - 1))]
    counters = [Counter(gone, write, tags("a", "stops"), values, "its target went away")]
    if kept != gone and jobs[-1] != jobs[0]:
        counters.append(Counter(kept, write, tags("b", "keeps"), counting(0, 1, n), "keeps arriving"))
    # The recorded count: evaluated at each step with no offset, it sees the series until it ends.
    # Gone at step j, and its last count (step stop - 1) still within the window.
    states = {
        closed: firing(
            lambda j, c=closed: (
                j >= stop and window_steps(j, ctx.duration("missing_window"), ctx.step, c).start < stop
            ),  # type: ignore[misc]
            n,
            hold,
            ctx.step,
        )
        for closed in (True, False)
    }
    group = Group(
        "StateStoreMetricsMissing: a job whose counters stop arriving",
        ctx.step,
        [
            f"Job {jobs[0]}'s only counter ends at step {stop} (its target went away); it fires",
            f"{ctx.values['missing_for']} later and resolves once its last count is"
            f" {ctx.values['missing_window']} old.",
        ],
        [c.series(ctx) for c in counters] + [up_series(ctx, gone, [1] * stop + [None] * (n - stop))],
    )
    seen = moments(states)
    labels = {ctx.cluster: gone.get(ctx.cluster), "job": jobs[0]}
    for at, why in ((seen.pending, "pending"), (seen.fires, "firing"), (seen.resolved, "resolved")):
        if at is None:
            continue
        firing_now = states[True][at]
        shown = [ctx.firing(RULES, MISSING, labels, 1.0)] if firing_now else []
        group.alerts.append(AlertCase(MISSING, at * ctx.step, shown, why))
    return group
