"""The dashboard's last row, collapsed: the API server side.

The state store routes' requests, latency and value sizes, and each worker's event-loop stalls,
from server-rules.yml's recorded series. These series have no DAG labels, so only the dashboard's
deployment and the API server's own job ($server_job) apply; the row's queries load only when it is opened.
"""

from __future__ import annotations

from ..render_context import RenderContext
from . import promql
from .queries import Panel, Row, Server, Target

__all__ = ["REQUESTS", "SERVER_ROW_TITLE", "server_row"]

SERVER_ROW_TITLE = "API server: state store routes and event loop (not filtered by DAG)"
_ABOUT = (
    " From the API server's root middleware (every task's state store calls reach it as "
    "Execution API requests), recorded by server-rules.yml: the workers summed."
)
#: The recorded requests (base name): the dashboard's $server_job offers the jobs that carry it.
REQUESTS = "store_operation_outcome:store_metrics_api_requests:rate5m"
_DURATIONS = "store_operation_value_size_le:store_metrics_api_request_duration_ms_bucket:rate5m"
_REQUEST_SIZES = "operation_le:store_metrics_api_request_size_bytes_bucket:rate5m"
_RESPONSE_SIZES = "operation_le:store_metrics_api_response_size_bytes_bucket:rate5m"
_STALL_MAX = "worker:store_metrics_api_loop_stall_max_ms:max"
_STALLED = "worker:store_metrics_api_loop_stalled:ratio_rate5m"
_LONG_STALLS = "store_operation:store_metrics_api_long_stalls:rate5m"
_STALL_LENGTHS = "le:store_metrics_api_loop_stall_ms_bucket:rate5m"


def _scope(ctx: RenderContext) -> str:
    return f"{{{promql.server_scope(ctx)}}}"


def _over(ctx: RenderContext, aggregation: str, base: str) -> str:
    """``aggregation`` over the recorded series ``base`` in the dashboard's deployment and server job."""
    return f"{aggregation} ({ctx.record(base)}{_scope(ctx)})"


def _quantile(ctx: RenderContext, q: str) -> str:
    return f"histogram_quantile({q}, {_over(ctx, 'sum by (le, store, operation, value_size)', _DURATIONS)})"


def _per_bound(ctx: RenderContext, recorded: str, selector: str) -> str:
    """Events per bucket within the range: the recorded per-second rates, integrated, one series per
    bound however ``le`` was spelled. Prometheus 3 stores a classic bucket's ``le="1024"`` as
    ``le="1024.0"`` (the Python exporter writes that from the start), so over a range reaching back
    before an upgrade one bound comes as two ``le`` values. The bound without a trailing ``.0`` goes
    to a label of its own (``bound``), since rewriting ``le`` in place makes two series with one label
    set, which label_replace refuses; the values that Prometheus spells in exponent form
    (``1.048576e+06``) are spelled so by every path."""
    integrated = f"sum_over_time({ctx.record(recorded)}{selector}[$__range])"
    normalised = f'label_replace({integrated}, "bound", "$1", "le", "(.+?)(?:\\\\.0)?")'
    return f"sum by (bound) ({normalised}) * {ctx.setting('rule_interval_seconds')}"


def _sizes(ctx: RenderContext, recorded: str, operation: str) -> str:
    """Requests per size bucket within the range."""
    return _per_bound(ctx, recorded, f'{{{promql.server_scope(ctx)},operation="{operation}"}}')


def _latency(ctx: RenderContext, q: str) -> Panel:
    name = f"p{round(float(q) * 100)}"
    return Panel(
        "timeseries",
        f"Request latency {name} by operation and value size",
        f"{name} of the time from the request reaching the API server's app to the last byte of its "
        "response, by store, operation and the size class of the value moved (the body of a set, the "
        "response to a get), over 5 minutes." + _ABOUT,
        [Target(Server(_quantile(ctx, q)), "{{store}} {{operation}} {{value_size}}")],
        unit="ms",
        w=6,
    )


def _route_panels(ctx: RenderContext) -> list[Panel]:
    """Requests per second, latency quantiles and value sizes of the state store routes."""
    return [
        Panel(
            "timeseries",
            "State store requests per second (API server)",
            "Execution API state store requests per second by store, operation and outcome (a GET "
            "answered 404 is read_absent, as on the task side), over 5 minutes." + _ABOUT,
            [
                Target(
                    Server(_over(ctx, "sum by (store, operation, outcome)", REQUESTS)),
                    "{{store}} {{operation}} {{outcome}}",
                )
            ],
            unit="reqps",
            w=6,
        ),
        _latency(ctx, "0.99"),
        _latency(ctx, "0.5"),
        Panel(
            "bargauge",
            "Value sizes (selected range)",
            "Requests per body size bucket, cumulative (each bar counts requests up to that size): "
            "request bodies of sets, response bodies of gets; from the recorded 5-minute rates, so "
            "within a few percent." + _ABOUT,
            [
                Target(
                    Server(
                        _sizes(ctx, _REQUEST_SIZES, "set"),
                        "count",
                    ),
                    "set <= {{bound}} B",
                    instant=True,
                ),
                Target(
                    Server(
                        _sizes(ctx, _RESPONSE_SIZES, "get"),
                        "count",
                    ),
                    "get <= {{bound}} B",
                    instant=True,
                ),
            ],
            decimals=0,
            w=6,
        ),
    ]


def _loop_panels(ctx: RenderContext) -> list[Panel]:
    """Each worker's event-loop stalls: largest, share of time, long stalls by route, by length."""
    return [
        Panel(
            "timeseries",
            "Event-loop stall: largest per interval, by worker",
            "The longest a worker's event loop could not run anything in each export interval (the "
            "stall monitor's late ticks). Healthy: a few ms. A spike is time every request that worker "
            "serves had to wait.",
            [
                Target(
                    Server(_over(ctx, "max by (instance, worker)", _STALL_MAX)),
                    "{{worker}} {{instance}}",
                )
            ],
            unit="ms",
            w=6,
        ),
        Panel(
            "timeseries",
            "Event-loop stalled share, by worker",
            "Share of time each worker's event loop was stalled: stalled ms per second / 1000. The line "
            "is the alert threshold (StateStoreApiServerLoopStalled, export setting loop_stalled_ratio).",
            [
                Target(
                    Server(_over(ctx, "max by (instance, worker)", _STALLED)),
                    "{{worker}} {{instance}}",
                )
            ],
            unit="percentunit",
            w=6,
            threshold="loop_stalled_ratio",
        ),
        Panel(
            "timeseries",
            "Long stalls per second by state store route in flight",
            "Stalls of stall_threshold_ms (default 100 ms) or more per second, by the state store "
            "route in flight during them; none/none: no state store request was, look elsewhere "
            "(another route, a plugin, garbage collection).",
            [
                Target(
                    Server(_over(ctx, "sum by (store, operation)", _LONG_STALLS)),
                    "{{store}} {{operation}}",
                )
            ],
            unit="ops",
            w=6,
        ),
        Panel(
            "bargauge",
            "Event-loop stalls by length (selected range)",
            "Stalls (ticks at least 1 ms late) per length bucket, cumulative (each bar counts stalls up "
            "to that length), all workers; from the recorded 5-minute rates, so within a few percent.",
            [
                Target(
                    Server(
                        _per_bound(ctx, _STALL_LENGTHS, _scope(ctx)),
                        "count",
                    ),
                    "<= {{bound}} ms",
                    instant=True,
                )
            ],
            decimals=0,
            w=6,
        ),
    ]


def server_row(ctx: RenderContext) -> Row:
    """Panels over the API server side's recorded series, by store/operation and by worker."""
    return Row(SERVER_ROW_TITLE, [*_route_panels(ctx), *_loop_panels(ctx)])
