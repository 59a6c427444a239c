"""``datadog/monitors/*.json``: one Datadog monitor per Prometheus alert, over the DogStatsD series.

Each file is the body of ``POST /api/v1/monitor``, the twin of one alert of the rule files: the same
ratio, floor, window and threshold (the same export settings), alerting per environment (the tag
named by the export setting ``datadog_env_tag``; environments never mix) and per DAG, watcher,
worker or store as the alert does. A ratio's floor of calls uses Datadog's ``is_greater`` (a
ratio times 0 below it); a count of calls over a window uses ``as_count()``, whose monitor
evaluation sums each side over the window before dividing.

Every monitor carries the alert's name (tag ``prometheus_alert:<name>``), a priority from its
severity (critical 1, warning 3, info 5), ``renotify_interval`` (setting
``datadog_renotify_minutes``), and a message with the runbook and a link to the Datadog
dashboard filtered to the environment and DAG (setting ``datadog_dashboard_url``). The messages
name no notification handle: add yours (``@slack-...``, ``@pagerduty-...``) before creating them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store_metrics import catalogue

from ..dashboard_facts import DAG_ID, OPERATOR, TASK_ID, WATCHER
from ..render_context import RenderContext, dumps
from .queries import ALL_CALLS, ERRORS, READ_CALLS, RETRIED, STARTED_OVER, Term, metric_query, scope, terms

__all__ = ["FOLDER", "MONITORS", "PRIORITY", "monitors", "render"]

FOLDER = "monitors"
TAGS = ["airflow", "store-metrics"]
#: Datadog priority (1 highest) from the alert's severity.
PRIORITY = {"critical": 1, "warning": 3, "info": 5}
WATCHERS = (WATCHER,)


@dataclass(frozen=True)
class Twin:
    """What a monitor repeats of its Prometheus alert."""

    alert: str
    severity: str
    summary: str
    #: The monitor's group tags after the environment (the alert's labels after cluster and job).
    by: tuple[str, ...]


def _env(ctx: RenderContext) -> str:
    """The environment's tag (export setting datadog_env_tag): every monitor alerts per environment."""
    return ctx.setting("datadog_env_tag")


def _env_name(ctx: RenderContext) -> str:
    """The environment of the alerting group, in a message."""
    return f"{{{{{_env(ctx)}.name}}}}"


def _sum(ctx: RenderContext, terms_: Sequence[Term], by: Sequence[str], scope_text: str) -> str:
    return " + ".join(metric_query(t, ctx, scope_text, by) for t in terms_)


def _ratio_monitor(
    ctx: RenderContext, twin: Twin, scope_text: str, settings_of: str, texts: tuple[str, str, str]
) -> dict[str, Any]:
    """Errors / all calls (both stores) over the window ``<settings_of>_window``, 0 unless the calls
    reach ``<settings_of>_min_calls``, above ``<settings_of>_ratio``: the error alerts' twins.

    ``texts``: whose calls raised (``{{value}} of ...``), what it means, the recovery message.
    """
    alert, meaning, recovery = texts
    by = (_env(ctx), *twin.by)
    errors, calls = _sum(ctx, ERRORS, by, scope_text), _sum(ctx, ALL_CALLS, by, scope_text)
    floor = ctx.setting(f"{settings_of}_min_calls_minus_one")
    window = ctx.setting(f"{settings_of}_window")
    query = f"sum(last_{window}):({errors}) / ({calls}) * is_greater({calls}, {floor})"
    ratio, floor_calls = ctx.setting(f"{settings_of}_ratio_percent"), ctx.setting(f"{settings_of}_min_calls")
    said = (
        f"{alert} over the last {window} ({_env_name(ctx)}): more than {ratio} of at least {floor_calls} "
        f"calls. {meaning}"
    )
    return _monitor(ctx, twin, query, (said, recovery), f"{settings_of}_ratio")


def _link(ctx: RenderContext, twin: Twin) -> str:
    variables = [f"tpl_var_env={_env_name(ctx)}"]
    variables += [
        f"tpl_var_{tag}={{{{{tag}.name}}}}" for tag in twin.by if tag in (DAG_ID, OPERATOR, TASK_ID)
    ]
    return ctx.setting("datadog_dashboard_link") + "&".join(variables)


def _message(ctx: RenderContext, twin: Twin, alert: str, recovery: str) -> str:
    runbook = f"{ctx.setting('runbook_url_base')}{twin.alert.lower()}/"
    return (
        f"{{{{#is_alert}}}}{alert}{{{{/is_alert}}}}\n"
        f"{{{{#is_recovery}}}}{recovery}{{{{/is_recovery}}}}\n"
        f"Runbook: {runbook}\nDashboard: {_link(ctx, twin)}"
    )


def _monitor(
    ctx: RenderContext, twin: Twin, query: str, texts: tuple[str, str], threshold: str | float, **options: Any
) -> dict[str, Any]:
    """``texts``: the message's alert and recovery text. ``threshold``: an export setting's name (the
    alert's threshold), or a number of the query's own."""
    message = _message(ctx, twin, *texts)
    limit: Any = ctx.number(threshold) if isinstance(threshold, str) else threshold
    text = ctx.setting(threshold) if isinstance(threshold, str) else f"{threshold:g}"
    return {
        "name": f"[store-metrics] {twin.summary}",
        "type": "query alert",
        "query": f"{query} > {text}",
        "message": message,
        "tags": [*TAGS, f"prometheus_alert:{twin.alert}", f"severity:{twin.severity}"],
        "priority": PRIORITY[twin.severity],
        "options": {
            "thresholds": {"critical": limit},
            "notify_no_data": False,
            "require_full_window": False,
            "include_tags": True,
            "new_group_delay": 60,
            "renotify_interval": ctx.number("datadog_renotify_minutes"),
            **options,
        },
    }


def error_ratio_monitor(ctx: RenderContext) -> dict[str, Any]:
    return _ratio_monitor(
        ctx,
        Twin(
            "StateStoreErrorRateHigh", "warning", "State store calls fail in DAG {{dag_id.name}}", (DAG_ID,)
        ),
        scope(variables=False, exclude=WATCHERS),
        "error",
        (
            "{{value}} of DAG {{dag_id.name}}'s state store calls raised",
            "Its tasks cannot read or keep their state.",
            "DAG {{dag_id.name}}'s state store calls succeed again.",
        ),
    )


def failing_monitor(ctx: RenderContext) -> dict[str, Any]:
    return _ratio_monitor(
        ctx,
        Twin("StateStoreFailingAcrossDags", "critical", "The Airflow state store is failing", ()),
        scope(variables=False),
        "failing",
        (
            "{{value}} of all state store calls (every DAG and asset watcher) raised",
            "The store itself (the Execution API or its database) is failing, not one DAG.",
            "State store calls succeed again.",
        ),
    )


def watcher_error_ratio_monitor(ctx: RenderContext) -> dict[str, Any]:
    twin = Twin(
        "StateStoreWatcherErrorRateHigh",
        "warning",
        "State store calls fail in asset watcher {{operator.name}} on {{task_id.name}}",
        (OPERATOR, TASK_ID),
    )
    return _ratio_monitor(
        ctx,
        twin,
        scope(WATCHERS, variables=False),
        "error",
        (
            "{{value}} of the state store calls of the asset-watcher trigger {{operator.name}} watching "
            "{{task_id.name}} raised in the triggerer",
            "The watcher cannot keep its watermark and may miss or repeat events.",
            "Asset watcher {{operator.name}} on {{task_id.name}}: state store calls succeed again.",
        ),
    )


def never_read_monitor(ctx: RenderContext) -> dict[str, Any]:
    twin = Twin(
        "StateStoreTaskStateNeverRead",
        "info",
        "Task {{dag_id.name}}.{{task_id.name}} writes task state it never reads back",
        (DAG_ID, TASK_ID),
    )
    by = (_env(ctx), DAG_ID, TASK_ID)
    writes = _sum(ctx, terms((catalogue.Store.TASK,), (catalogue.Outcome.WRITE,)), by, scope(variables=False))
    task_reads = [t for t in READ_CALLS if t[0] is catalogue.Store.TASK]
    reads = " + ".join(
        f"default_zero({metric_query(t, ctx, scope(variables=False), by)})" for t in task_reads
    )
    # Writes in the window, times 1 when no read: a task without any read series has none to add.
    query = f"sum(last_{ctx.setting('never_read_window')}):({writes}) * is_lesser({reads}, 1)"
    return _monitor(
        ctx,
        twin,
        query,
        (
            f"Over the last {ctx.setting('never_read_window')}, task {{{{task_id.name}}}} of DAG "
            "{{dag_id.name}} "
            "called task_state_store.set() and no attempt of it called get(): these writes cannot help "
            "a retry resume.",
            "Task {{dag_id.name}}.{{task_id.name}} reads its task state, or no longer writes it.",
        ),
        0.0,
    )


def retries_start_over_monitor(ctx: RenderContext) -> dict[str, Any]:
    twin = Twin(
        "StateStoreRetriesStartOver",
        "warning",
        "Retries of {{dag_id.name}}.{{task_id.name}} start over",
        (DAG_ID, TASK_ID),
    )
    by = (_env(ctx), DAG_ID, TASK_ID)
    scope_text = scope(variables=False)
    started_over, retried = _sum(ctx, STARTED_OVER, by, scope_text), _sum(ctx, RETRIED, by, scope_text)
    window = ctx.setting("retry_window")
    floor = ctx.setting("retry_min_attempts_minus_one")
    query = f"sum(last_{window}):({started_over}) / ({retried}) * is_greater({retried}, {floor})"
    return _monitor(
        ctx,
        twin,
        query,
        (
            f"Over the last {window} ({_env_name(ctx)}), {{{{value}}}} of the retried attempts of task "
            "{{task_id.name}} in DAG {{dag_id.name}} found nothing at their first task state store "
            f"read and started over (more than {ctx.setting('retry_start_over_ratio_percent')} of at least "
            f"{ctx.setting('retry_min_attempts')} retries): what its earlier attempts saved did not reach "
            "their retries.",
            "Retries of {{dag_id.name}}.{{task_id.name}} resume again (or no longer start over).",
        ),
        "retry_start_over_ratio",
    )


def _server_query(ctx: RenderContext, metric: catalogue.Metric, aggregation: str, by: Sequence[str]) -> str:
    grouping = f" by {{{','.join(by)}}}"
    return f"{aggregation}:{ctx.full_name(metric)}{{*}}{grouping}"


def loop_stalled_monitor(ctx: RenderContext) -> dict[str, Any]:
    twin = Twin(
        "StateStoreApiServerLoopStalled",
        "warning",
        "API server worker {{worker.name}}: event loop stalled",
        (catalogue.WORKER,),
    )
    stall = _server_query(ctx, catalogue.LOOP_STALL, "sum", (_env(ctx), catalogue.WORKER))
    window = ctx.setting("loop_stalled_for")
    # Stalled ms over the window / the window's ms: the share of time stalled.
    query = f"sum(last_{window}):{stall}.as_count() / ({ctx.setting('loop_stalled_for_seconds')} * 1000)"
    return _monitor(
        ctx,
        twin,
        query,
        (
            f"API server worker {{{{worker.name}}}} ({_env_name(ctx)}): its event loop was stalled "
            f"{{{{value}}}} of the last {window} (more than {ctx.setting('loop_stalled_ratio_percent')}): "
            "every request it serves waits that much longer.",
            "API server worker {{worker.name}}: its event loop runs freely again.",
        ),
        "loop_stalled_ratio",
    )


def long_stalls_monitor(ctx: RenderContext) -> dict[str, Any]:
    twin = Twin(
        "StateStoreApiServerLongStalls",
        "warning",
        "API server worker {{worker.name}}: long event-loop stalls",
        (catalogue.WORKER,),
    )
    stalls = _server_query(ctx, catalogue.LONG_STALLS, "sum", (_env(ctx), catalogue.WORKER))
    window = ctx.setting("long_stalls_for")
    query = f"sum(last_{window}):{stalls}.as_count() / {ctx.setting('long_stalls_for_seconds')} * 60"
    return _monitor(
        ctx,
        twin,
        query,
        (
            f"API server worker {{{{worker.name}}}} ({_env_name(ctx)}) had {{{{value}}}} event-loop "
            f"stalls of stall_threshold_ms (keep it at {ctx.setting('long_stall_ms')} ms) or more a minute "
            f"over the last {window}, more than {ctx.setting('long_stalls_per_minute')}. (Counted once per "
            "state store route in flight during a stall.)",
            "API server worker {{worker.name}}: no more long stalls.",
        ),
        "long_stalls_per_minute",
    )


def retention_monitor(ctx: RenderContext) -> dict[str, Any]:
    twin = Twin(
        "StateStoreRetentionNotApplied",
        "warning",
        "Expired state store entries are not cleaned up",
        (catalogue.STORE,),
    )
    expired = catalogue.get("task_state_store.footprint.expired_entries")
    total = _server_query(ctx, expired, "sum", (_env(ctx),))
    window = ctx.setting("retention_window")
    # 1 at every point where expired entries are there and none was removed since the last one;
    # its minimum over the window is 1 only if that held for the whole window.
    query = f"min(last_{window}):is_greater({total}, 0) * is_greater(diff({total}), -0.5)"
    return _monitor(
        ctx,
        twin,
        query,
        (
            f"Expired task state store entries have been there ({_env_name(ctx)}), and not one removed, for "
            f"{window}: nobody runs `airflow state-store clean` (or it fails).",
            "Expired state store entries are removed again.",
        ),
        0.5,
        require_full_window=True,
    )


def inventory_down_monitor(ctx: RenderContext) -> dict[str, Any]:
    twin = Twin(
        "StateStoreInventoryDown",
        "warning",
        "The state store inventory cannot read the {{store.name}} store",
        (catalogue.STORE,),
    )
    up = _server_query(ctx, catalogue.INVENTORY_UP, "max", (_env(ctx), catalogue.STORE))
    window = ctx.setting("inventory_down_for")
    monitor = _monitor(
        ctx,
        twin,
        f"max(last_{window}):1 - {up}",
        (
            f"For {window} every query of store-metrics inventory on the {{{{store.name}}}} state store's "
            f"table has failed ({_env_name(ctx)}), or no inventory reports at all (no data).",
            "The state store inventory reads the {{store.name}} store again.",
        ),
        0.0,
        notify_no_data=True,
        no_data_timeframe=ctx.number("inventory_down_for_minutes"),
    )
    return monitor


def metrics_missing_monitor(ctx: RenderContext) -> dict[str, Any]:
    """A no-data monitor: the call counters of an environment stop arriving for ``missing_for``.
    The query's value never exceeds its threshold (a count is never negative): only no data alerts."""
    twin = Twin("StateStoreMetricsMissing", "warning", "store-metrics counters stopped arriving", ())
    counters = " + ".join(
        _server_query(ctx, m, "sum", (_env(ctx),)) + ".as_count()" for m in catalogue.STATE_STORE_METRICS
    )
    window = ctx.setting("missing_for")
    return _monitor(
        ctx,
        twin,
        f"sum(last_{window}):-1 * ({counters})",
        (
            f"No store-metrics counter has arrived for {window} ({_env_name(ctx)}): a target down or no "
            "longer scraped, a changed prefix or mapping, or the plugin no longer loaded. Every other "
            "monitor of this environment is blind meanwhile.",
            "store-metrics counters arrive again.",
        ),
        0.0,
        notify_no_data=True,
        no_data_timeframe=ctx.number("missing_for_minutes"),
    )


def inventory_stale_monitor(ctx: RenderContext) -> dict[str, Any]:
    twin = Twin(
        "StateStoreInventoryStale",
        "warning",
        "The {{store.name}} state store footprint is stale",
        (catalogue.STORE,),
    )
    age = _server_query(ctx, catalogue.INVENTORY_FOOTPRINT_AGE, "min", (_env(ctx), catalogue.STORE))
    return _monitor(
        ctx,
        twin,
        f"min(last_{ctx.setting('inventory_stale_for')}):{age}",
        (
            f"The footprint store-metrics inventory shows for the {{{{store.name}}}} state store "
            f"({_env_name(ctx)}) was read more than {ctx.setting('inventory_stale_after')} ago and has not "
            "been refreshed since.",
            "The {{store.name}} state store footprint is fresh again.",
        ),
        "inventory_stale_after_seconds",
    )


#: File name -> monitor, one per Prometheus alert.
MONITORS = {
    "state-store-error-ratio.json": error_ratio_monitor,
    "state-store-failing.json": failing_monitor,
    "state-store-watcher-error-ratio.json": watcher_error_ratio_monitor,
    "state-store-never-read.json": never_read_monitor,
    "state-store-retries-start-over.json": retries_start_over_monitor,
    "state-store-api-server-loop-stalled.json": loop_stalled_monitor,
    "state-store-api-server-long-stalls.json": long_stalls_monitor,
    "state-store-retention.json": retention_monitor,
    "state-store-inventory-down.json": inventory_down_monitor,
    "state-store-inventory-stale.json": inventory_stale_monitor,
    "state-store-metrics-missing.json": metrics_missing_monitor,
}


def monitors(ctx: RenderContext) -> dict[str, dict[str, Any]]:
    """Every monitor's definition, by file name."""
    return {name: build(ctx) for name, build in MONITORS.items()}


def render(name: str, ctx: RenderContext) -> str:
    """``datadog/monitors/<name>`` for the export's prefix and settings."""
    return dumps(MONITORS[name](ctx))
