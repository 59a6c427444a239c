"""watcher-rules.test.yml: StateStoreWatcherErrorRateHigh over rules.yml's recorded calls, for the
settings of the export (steps of ``rule_interval``, the ``error_*`` settings, the selector's jobs,
the ``cluster_label``), worked out from the calls each scenario makes as rules.test.yml's are
(``calls``), never copied from a run of promtool.
"""

from __future__ import annotations

import math
from fractions import Fraction

from store_metrics import catalogue
from store_metrics.catalogue import Outcome, Store

from .calls import Counter, counting, record, up_series
from .calls_tests import RULES, error_rate, lifecycle, metric, tags
from .context import Context, TooLong
from .document import Document, Group, Value

__all__ = ["document"]

WATCHER_RULES = "watcher-rules.yml"
ALERT = "StateStoreWatcherErrorRateHigh"


def watcher(asset: str, trigger: str, **extra: str) -> dict[str, str]:
    """An asset watcher's tags: no DAG, the watched asset as task_id, the trigger class as operator."""
    return {
        "dag_id": catalogue.DAG_ID_NONE,
        "task_id": asset,
        "run_type": catalogue.RUN_TYPE_ASSET_WATCHER,
        "operator": trigger,
        **extra,
    }


def _threshold_group(ctx: Context) -> Group:
    """Two watchers of 1000 calls a step, one failing just more than ``error_ratio`` of them (fires),
    one just less (never); a DAG failing every call (rules.yml's, not a watcher: ignored); a watcher
    failing every call but fewer calls than the floor (never)."""
    ratio, floor = Fraction(ctx.values["error_ratio"]), int(ctx.values["error_min_calls"])
    per_step = 1000
    above, below = math.floor(ratio * per_step) + 1, math.ceil(ratio * per_step) - 1
    n = ctx.clock.delay + 2 + ctx.setting_steps("error_window") + ctx.setting_steps("error_for") + 3
    ctx.within_promtool(n, ALERT, "error_window", "error_for")
    triggerer, airflow = ctx.jobs(2)[-1], ctx.jobs(1)[0]
    target, dags = ctx.target(triggerer, "triggerer:9102"), ctx.target(airflow, "airflow:9102")
    error, found = metric(Store.ASSET, Outcome.ERROR), metric(Store.ASSET, Outcome.READ_FOUND)
    counters = []
    for asset, trigger, failed in (("s3_bucket", "S3KeyTrigger", above), ("orders", "SqsTrigger", below)):
        if failed > 0:
            failing = watcher(asset, trigger, operation="get")
            counters.append(
                Counter(target, error, failing, counting(0, failed, n), f"{failed} of {per_step} fail")
            )
        counters.append(Counter(target, found, watcher(asset, trigger), counting(0, per_step - failed, n)))
    counters.append(
        Counter(dags, error, tags("a", operation="set"), counting(0, 5, n), "a DAG: not a watcher")
    )
    if floor > 1:
        few: list[Value] = [min(i, floor - 1) for i in range(n)]
        blip = watcher("events", "KafkaTrigger", operation="set")
        counters.append(Counter(target, error, blip, few, f"{floor - 1} calls, all failing: under the floor"))
    ups = {target: [1] * n, dags: [1] * n}
    recorded = record(ctx, counters, ups, n)
    group = Group(
        f"{ALERT}: just above error_ratio fires, just below, a DAG and fewer calls than the floor do not",
        ctx.step,
        [
            f"{per_step} calls a step each: the watcher of s3_bucket fails {above} of them (more than"
            f" {ctx.values['error_ratio']}),",
            f"the one of orders {below}. Only s3_bucket fires, {ctx.values['error_for']} after its calls"
            " entered the window;",
            "DAG a fails every call (rules.yml's alert, not this one); events fails fewer calls than"
            f" {floor}.",
        ],
        [c.series(ctx) for c in counters] + [up_series(ctx, t, v) for t, v in ups.items()],
    )
    group.alerts += lifecycle(ctx, WATCHER_RULES, ALERT, error_rate(ctx, watchers=True), recorded)
    return group


def document(ctx: Context) -> Document:
    groups, notes = [], []
    try:
        groups.append(_threshold_group(ctx))
    except TooLong as exc:
        notes = ["", "Not generated for these settings (run with a longer rule_interval to test them):"]
        notes.append(f"- {exc}.")
    return Document(
        "Unit tests for watcher-rules.yml:  promtool test rules watcher-rules.test.yml",
        [RULES, WATCHER_RULES],
        ctx.step,
        ["store-metrics.rules", "store-metrics-watchers.alerts"],
        groups,
        [
            "(with rules.yml, whose recorded calls it reads). Written by `store-metrics export` for its",
            f"settings (rule_interval {ctx.values['rule_interval']}, error_window"
            f" {ctx.values['error_window']}, selector {ctx.values['selector']},",
            f"cluster_label {ctx.cluster}, ...): every step is a rule interval, promtool evaluates every",
            "group each step, and each expected value is worked out from the calls the scenario makes,",
            "the same on Prometheus 2 and 3.",
            *notes,
        ],
    )
