"""footprint-rules.test.yml: the footprint's records and alerts (the gauges of ``store-metrics
inventory --serve``), for the settings of the export: ``inventory_down_for``,
``inventory_stale_after``/``_for``, ``retention_window``/``_for``, ``missing_window``, the selector's
jobs and the ``cluster_label``.

These rules record gauges, not increments: promtool evaluates them every minute whatever the
``rule_interval`` (it changes when they record, not what). Every evaluation time is worked out from
the settings on that minute grid, where Prometheus 2 (closed windows) and 3 (left-open) agree; the
inventory reports every minute, or every 5 minutes (its default interval) in the retention scenarios.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from store_metrics import catalogue

from .context import PROMTOOL_MAX_SAMPLES, Context, Target, TooLong
from .document import AlertCase, Document, ExprCase, Firing, Group, Series, Value, duration
from .timeline import LOOKBACK_DELTA

__all__ = ["document"]

FOOTPRINT = "footprint-rules.yml"
DOWN, STALE, RETENTION = (
    "StateStoreInventoryDown",
    "StateStoreInventoryStale",
    "StateStoreRetentionNotApplied",
)
MINUTE = 60
#: How long an instant selector still finds a series after its last sample, in minutes.
LOOKBACK = int(LOOKBACK_DELTA) // MINUTE
#: The inventory's default interval: the retention scenarios' input interval, in minutes.
INVENTORY_EVERY = 5

ENTRIES, BYTES, EXPIRED = (
    catalogue.get(f"task_state_store.footprint.{n}") for n in ("entries", "bytes", "expired_entries")
)
ASSET_ENTRIES, ASSET_BYTES = (catalogue.get(f"asset_state_store.footprint.{n}") for n in ("entries", "bytes"))
UP, AGE, QUERY = (
    catalogue.get(f"state_store_inventory.{n}") for n in ("up", "footprint.age", "query.duration")
)


def minutes(ctx: Context, name: str) -> int:
    """A duration setting in whole minutes, rounded up."""
    return math.ceil(ctx.duration(name) / MINUTE)


def at(minute: int) -> int:
    return minute * MINUTE


def inventory(ctx: Context, cluster: str | None = None) -> Target:
    return ctx.target(ctx.labels.values("job", 1, ("store-metrics-inventory",))[0], "inventory:9490", cluster)


def series(
    ctx: Context, metric: catalogue.Metric, target: Target, values: list[Value], **tags: str
) -> Series:
    return Series(ctx.name(metric), target.with_labels(**tags), values)


def firing(ctx: Context, name: str, labels: Mapping[str, str], value: float = 0.0) -> Firing:
    return ctx.firing(FOOTPRINT, name, labels, value)


# -- the records: two replicas in a rollout, counted once -------------------------------------------

#: (metric, its own labels, replica a's value, replica b's value): b read report.publish before its
#: last write; b cannot read the task table (up 0, a footprint 20 minutes old).
REPLICA_ROWS: tuple[tuple[catalogue.Metric, dict[str, str], float, float], ...] = (
    (ENTRIES, {"dag_id": "etl", "task_id": "extract"}, 5, 5),
    (ENTRIES, {"dag_id": "etl", "task_id": "<other>"}, 3, 3),
    (ENTRIES, {"dag_id": "report", "task_id": "publish"}, 2, 1),
    (ENTRIES, {"dag_id": "<other>", "task_id": "<other>"}, 7, 7),
    (BYTES, {"dag_id": "etl", "task_id": "extract"}, 4000, 4000),
    (BYTES, {"dag_id": "etl", "task_id": "<other>"}, 1000, 1000),
    (BYTES, {"dag_id": "report", "task_id": "publish"}, 500, 480),
    (BYTES, {"dag_id": "<other>", "task_id": "<other>"}, 2500, 2500),
    (EXPIRED, {"dag_id": "etl", "task_id": "extract"}, 1, 1),
    (EXPIRED, {"dag_id": "<other>", "task_id": "<other>"}, 2, 2),
    (ASSET_ENTRIES, {"asset": "orders"}, 2, 2),
    (ASSET_ENTRIES, {"asset": "events"}, 1, 1),
    (ASSET_ENTRIES, {"asset": "<other>"}, 4, 4),
    (ASSET_BYTES, {"asset": "orders"}, 2029, 2029),
    (ASSET_BYTES, {"asset": "<other>"}, 300, 300),
    (UP, {"store": "task"}, 1, 0),
    (UP, {"store": "asset"}, 1, 1),
    (AGE, {"store": "task"}, 60, 1200),
    (AGE, {"store": "asset"}, 90, 60),
    (QUERY, {"store": "task"}, 12.5, 450),
    (QUERY, {"store": "asset"}, 3, 4),
)
#: (recorded series, (its labels, the value) ...), with why.
RECORDED: tuple[tuple[str, tuple[tuple[dict[str, str], float], ...], str], ...] = (
    (
        "dag_id:store_metrics_footprint_entries:sum",
        (({"dag_id": "etl"}, 8), ({"dag_id": "report"}, 2), ({"dag_id": "<other>"}, 7)),
        "Per DAG, the max across replicas, then the sum over tasks: etl 5 + 3 = 8 (not 16), report\n"
        "max(2, 1) = 2, other 7.",
    ),
    (
        "dag_id:store_metrics_footprint_bytes:sum",
        (({"dag_id": "etl"}, 5000), ({"dag_id": "report"}, 500), ({"dag_id": "<other>"}, 2500)),
        "",
    ),
    (
        "dag_id:store_metrics_footprint_expired_entries:sum",
        (({"dag_id": "etl"}, 1), ({"dag_id": "<other>"}, 2)),
        "",
    ),
    (
        "asset:store_metrics_footprint_entries:sum",
        (({"asset": "orders"}, 2), ({"asset": "events"}, 1), ({"asset": "<other>"}, 4)),
        "",
    ),
    (
        "asset:store_metrics_footprint_bytes:sum",
        (({"asset": "orders"}, 2029), ({"asset": "<other>"}, 300)),
        "",
    ),
    (
        "store:store_metrics_footprint_expired_entries:sum",
        (({"store": "task"}, 3),),
        "The store's expired entries count the `<other>` buckets: 1 + 2 = 3.",
    ),
    (
        "store:store_metrics_inventory_up:max",
        (({"store": "task"}, 1), ({"store": "asset"}, 1)),
        "Health per store: up if any replica reads the table (max), the freshest footprint (min), the\n"
        "slowest last query (max).",
    ),
    (
        "store:store_metrics_inventory_footprint_age_seconds:min",
        (({"store": "task"}, 60), ({"store": "asset"}, 60)),
        "",
    ),
    (
        "store:store_metrics_inventory_query_duration_ms:max",
        (({"store": "task"}, 450), ({"store": "asset"}, 4)),
        "",
    ),
)


def _replicas_group(ctx: Context) -> Group:
    jobs = ctx.labels.values("job", 2, ("store-metrics-inventory", "kubernetes-pods"))
    a, b = ctx.target(jobs[0], "10.0.0.1:9490"), ctx.target(jobs[-1], "10.0.0.2:9490")
    extra_a = {"pod": "store-metrics-inventory-5d8c7-a"}
    group = Group(
        "the footprint: two replicas in a rollout counted once, the top N and `<other>` summed",
        MINUTE,
        [
            "Two inventory replicas (a rollout: two pods; b found by Kubernetes service discovery, another",
            "job, with the namespace and container labels its scrape config adds: never a reason to count",
            "it twice) report the same footprint, except that b read report.publish before its last write",
            "and cannot read the task table (up 0, its footprint 20 minutes old). etl keeps one task and",
            "the rest under task_id other; DAGs and assets outside the top N are under other.",
        ],
    )
    extra_b = {"pod": "store-metrics-inventory-5d8c7-b", "namespace": "airflow", "container": "inventory"}
    for metric, tags, value_a, value_b in REPLICA_ROWS:
        group.series.append(series(ctx, metric, a, [value_a] * 31, **tags, **extra_a))
        group.series.append(series(ctx, metric, b, [value_b] * 31, **tags, **extra_b))
    cluster = {ctx.cluster: a.get(ctx.cluster)}
    for base, samples, why in RECORDED:
        name = ctx.record(base)
        expected = {ctx.sample(name, {**cluster, **labels}): value for labels, value in samples}
        group.exprs.append(ExprCase(name, at(10), expected, why))
    why = "One replica failing while the other reads is not an inventory down, nor a stale footprint;\n"
    why += "30 minutes of expired entries are not yet a retention problem."
    group.alerts += [
        AlertCase(DOWN, at(30), [], why),
        AlertCase(STALE, at(30), []),
        AlertCase(RETENTION, at(30), []),
    ]
    return group


# -- down and stale ----------------------------------------------------------------------------------


def _down_group(ctx: Context) -> Group:
    """The task table unreadable from the start (down, then stale); the asset table's outage and slow
    read shorter than the ``for`` durations (blips)."""
    down, hold = minutes(ctx, "inventory_down_for"), minutes(ctx, "inventory_stale_for")
    stale = math.floor(ctx.duration("inventory_stale_after") / MINUTE) + 1  # first minute older than it
    outage, blip = min(4, down), min(2, hold)
    n = max(down + 16, stale + hold + 2, 11 + outage + 2) + 1
    target = inventory(ctx)
    asset_up: list[Value] = [*([1] * 11), *([0] * outage)]
    asset_up += [1] * (n - len(asset_up))
    asset_age: list[Value] = [MINUTE * i for i in range(stale + blip)]
    asset_age += [MINUTE * i for i in range(n - len(asset_age))]
    group = Group(
        "StateStoreInventoryDown and StateStoreInventoryStale: a table that cannot be read, and blips",
        MINUTE,
        [
            "The task table cannot be read from the start: up 0, and the footprint shown gets 60 s older",
            f"a minute (older than {ctx.values['inventory_stale_after']} from minute {stale}).",
            f"The asset table: a {outage}-minute outage from minute 11, and a footprint older than",
            f"that for {blip} minute(s) before a fresh read: blips, shorter than inventory_down_for",
            f"({ctx.values['inventory_down_for']}) and inventory_stale_for"
            f" ({ctx.values['inventory_stale_for']}).",
        ],
        [
            series(ctx, UP, target, [0] * n, store="task"),
            series(ctx, UP, target, asset_up, store="asset"),
            series(ctx, AGE, target, [MINUTE * i for i in range(n)], store="task"),
            series(ctx, AGE, target, asset_age, store="asset"),
        ],
    )
    task = {ctx.cluster: target.get(ctx.cluster), "store": "task"}
    shown = [firing(ctx, DOWN, task)]
    group.alerts += [
        AlertCase(DOWN, at(down - 1), [], "down from the start: pending"),
        AlertCase(DOWN, at(down), shown, f"firing after {ctx.values['inventory_down_for']}"),
        AlertCase(DOWN, at(down + 15), shown, "still firing; never for the asset table's outage"),
        AlertCase(STALE, at(stale + hold - 1), [], "stale: pending"),
        AlertCase(
            STALE,
            at(stale + hold),
            [firing(ctx, STALE, task, MINUTE * (stale + hold))],
            f"firing after {ctx.values['inventory_stale_for']}; never for the asset footprint's blip",
        ),
    ]
    return group


def _absent(ctx: Context, clusters: Mapping[str, bool], reported: bool) -> list[Firing]:
    """StateStoreInventoryDown's alerts while the inventory's series are gone: one per deployment
    whose series were there within missing_window (``clusters``: deployment -> still within it), and
    absent()'s (labelled with the selector's equality matchers) where no series is left at all."""
    labels = [{ctx.cluster: c} if c else {} for c, within in clusters.items() if within]
    if not reported:
        labels.append({m.label: m.value for m in ctx.labels.matchers if m.op == "="})
    unique = {tuple(sorted((k, v) for k, v in x.items() if v)): x for x in labels}
    return [firing(ctx, DOWN, unique[key]) for key in sorted(unique)]


def _gone_groups(ctx: Context) -> list[Group]:
    """The inventory goes away at minute 10: absent from minute 15 (Prometheus 3) or 16 (2.x)."""
    down, window = minutes(ctx, "inventory_down_for"), minutes(ctx, "missing_window")
    last, pending, fires = 10, 10 + LOOKBACK + down - 1, 10 + LOOKBACK + 1 + down
    target = inventory(ctx)
    cluster = target.get(ctx.cluster)
    gone = Group(
        "StateStoreInventoryDown: the inventory goes away",
        MINUTE,
        [
            f"Its last samples at minute {last}; its series gone {LOOKBACK} minutes later: pending, firing"
            f" {ctx.values['inventory_down_for']} later.",
        ],
        [series(ctx, UP, target, [1] * (last + 1), store=store) for store in ("task", "asset")],
    )
    gone.alerts += [
        AlertCase(DOWN, at(pending), [], "pending"),
        AlertCase(DOWN, at(fires), _absent(ctx, {cluster: True}, reported=False), "firing"),
    ]
    groups = [gone]
    deployments = ctx.labels.values(ctx.cluster, 2, ("east", "west"))
    if len(deployments) == 2 and deployments[0]:
        east, west = (inventory(ctx, c) for c in deployments)
        both = Group(
            "StateStoreInventoryDown: one deployment's inventory goes away, another's keeps reporting",
            MINUTE,
            [
                f"{deployments[0]}'s inventory goes away at minute {last},"
                f" {deployments[1]}'s keeps reporting."
                f" Only {deployments[0]} fires, with its",
                "deployment label: absent() alone never fires while another deployment reports.",
            ],
            [
                series(ctx, UP, east, [1] * (last + 1), store="task"),
                series(ctx, UP, west, [1] * (fires + 3), store="task"),
            ],
        )
        both.alerts += [
            AlertCase(DOWN, at(pending), [], "pending"),
            AlertCase(DOWN, at(fires), _absent(ctx, {deployments[0]: True}, reported=True), "firing"),
        ]
        groups.append(both)
    late = Group(
        "StateStoreInventoryDown: an inventory that last reported longer ago than missing_window",
        MINUTE,
        [f"No deployment to name ({ctx.values['missing_window']} ago), and still firing (absent())."],
        [series(ctx, UP, inventory(ctx, deployments[0] or None), [1] * (last + 1), store="task")],
    )
    late.alerts.append(AlertCase(DOWN, at(last + window + 1), _absent(ctx, {}, reported=False), "firing"))
    groups.append(late)
    # A restart: no sample for a while, the series gone for less than inventory_down_for.
    back = 17 if down > 6 else 10
    restart = Group(
        "StateStoreInventoryDown: a restart shorter than inventory_down_for",
        MINUTE,
        [f"No sample from minute 6 to {back - 1}, back at {back}: never down."],
        [series(ctx, UP, target, [*([1] * 6), *([None] * (back - 6)), *([1] * 20)], store="task")],
    )
    restart.alerts += [AlertCase(DOWN, at(back - 1), []), AlertCase(DOWN, at(30), [])]
    groups.append(restart)
    return groups


# -- retention ---------------------------------------------------------------------------------------


def _retention_groups(ctx: Context) -> list[Group]:
    """Read every 5 minutes: a clean more often than retention_window (quiet), none for longer (fires,
    resolves at the clean)."""
    window = ctx.duration("retention_window")
    if window / MINUTE > PROMTOOL_MAX_SAMPLES:
        raise TooLong(
            f"{RETENTION}: retention_window {ctx.values['retention_window']} is more than"
            f" {PROMTOOL_MAX_SAMPLES} evaluations a minute apart; promtool's rule tests load at most"
            f" {PROMTOOL_MAX_SAMPLES} samples a query"
        )
    every = INVENTORY_EVERY * MINUTE
    hold = minutes(ctx, "retention_for")
    w5 = math.ceil(window / every)  # the window in inventory reads
    target = inventory(ctx)
    cluster = {ctx.cluster: target.get(ctx.cluster)}
    # A clean every `period` reads (shorter than the window) while entries keep expiring: the count
    # never reaches 0 but drops at every clean, in the store's total of two DAGs.
    period = w5 - 1
    cycles = math.ceil((w5 + math.ceil(hold / INVENTORY_EVERY) + 1) / period)  # ends after W + R
    values: list[Value] = [1 + i for _ in range(cycles) for i in range(period)]
    cleans = Group(
        f"{RETENTION}: a clean every {duration(period * every)}, shorter than retention_window",
        every,
        [
            f"Entries expire all the time (1 more per DAG every {INVENTORY_EVERY} minutes); a clean every"
            f" {duration(period * every)} removes",
            f"them all but the newest: the count never reaches 0, but it drops within every"
            f" {ctx.values['retention_window']}: no alert.",
        ],
        [series(ctx, EXPIRED, target, values, dag_id=d, task_id="t") for d in ("etl", "<other>")],
    )
    record = ctx.record("store:store_metrics_footprint_expired_entries:sum")
    cleans.exprs.append(
        ExprCase(
            record,
            period * every,
            {ctx.sample(record, {**cluster, "store": "task"}): 2},
            "1 + 1 just after a clean",
        )
    )
    end = cycles * period * INVENTORY_EVERY
    for minute in (end - period * INVENTORY_EVERY - INVENTORY_EVERY, end - INVENTORY_EVERY):
        cleans.alerts.append(AlertCase(RETENTION, at(minute), [], "just before a clean"))
    # Nobody cleans for longer: firing once the count has been there retention_window without a
    # drop, for retention_for; resolved at the first clean.
    start = math.ceil(window / MINUTE)  # the first minute the count recorded a window ago exists
    fires = start + hold
    clean = math.ceil((fires + 60) / INVENTORY_EVERY)  # a read index, about an hour after it fires
    values = [*range(clean), *range(12)]
    late = Group(
        f"{RETENTION}: nobody cleans for {duration(clean * every)}",
        every,
        [
            f"Entries expire from the start, none removed for {duration(clean * every)}: pending once the",
            f"count has been recorded for {ctx.values['retention_window']} without a drop, firing"
            f" {ctx.values['retention_for']} later, resolved at the clean.",
        ],
        [series(ctx, EXPIRED, target, values, dag_id="etl", task_id="extract")],
    )
    task = {**cluster, "store": "task"}
    last_read = clean * INVENTORY_EVERY - INVENTORY_EVERY
    late.alerts += [
        AlertCase(RETENTION, at(fires - 1), [], "pending"),
        AlertCase(RETENTION, at(fires), [firing(ctx, RETENTION, task, fires // INVENTORY_EVERY)], "firing"),
        AlertCase(
            RETENTION,
            at(last_read),
            [firing(ctx, RETENTION, task, clean - 1)],
            "still firing before the clean",
        ),
        AlertCase(RETENTION, at(last_read + 2 * INVENTORY_EVERY), [], "resolved: a clean removed entries"),
    ]
    return [cleans, late]


def document(ctx: Context) -> Document:
    groups, left_out = [_replicas_group(ctx), _down_group(ctx), *_gone_groups(ctx)], []
    try:
        groups += _retention_groups(ctx)
    except TooLong as exc:
        left_out.append(str(exc))
    notes = (
        ["", "Not generated for these settings:", *(f"- {reason}." for reason in left_out)]
        if left_out
        else []
    )
    return Document(
        "Unit tests for footprint-rules.yml:  promtool test rules footprint-rules.test.yml",
        [FOOTPRINT],
        MINUTE,
        ["store-metrics-footprint.rules", "store-metrics-footprint.alerts"],
        groups,
        [
            "Written by `store-metrics export` for its settings (inventory_down_for"
            f" {ctx.values['inventory_down_for']}, inventory_stale_after",
            f"{ctx.values['inventory_stale_after']}, retention_window {ctx.values['retention_window']},"
            f" missing_window {ctx.values['missing_window']}, selector {ctx.values['selector']}, ...):",
            "evaluated every minute (these rules record gauges: rule_interval changes when they record, not",
            "what), each expected value and time worked out from the settings, the same on Prometheus",
            "2 and 3.",
            *notes,
        ],
    )
