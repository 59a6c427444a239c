"""The dashboard's last row, collapsed: the API server side.

The state store routes' requests, latency and value sizes, and each worker's event-loop stalls.
These series have no DAG labels, so the dashboard's filters do not apply; the row's queries load
only when it is opened.
"""

from __future__ import annotations

from dataclasses import dataclass

from store_metrics import catalogue

from .queries import RANGE, RATE_INTERVAL, Panel, Row, Server, Target

__all__ = ["SERVER_ROW_TITLE", "server_row"]

SERVER_ROW_TITLE = "API server: state store routes and event loop (not filtered by DAG)"
_ABOUT = (
    " From the API server's root middleware (every task's state store calls reach it as "
    "Execution API requests); one series per worker, summed here."
)


@dataclass(frozen=True)
class _Series:
    """The API server's series names for one prefix."""

    requests: str
    duration: str
    request_size: str
    response_size: str
    stall: str
    stall_max: str
    long_stalls: str

    @classmethod
    def of(cls, prefix: str) -> _Series:
        return cls(
            requests=catalogue.SERVER_REQUESTS.prometheus_name(prefix),
            duration=catalogue.SERVER_DURATION.prometheus_name(prefix),
            request_size=catalogue.SERVER_REQUEST_SIZE.prometheus_name(prefix),
            response_size=catalogue.SERVER_RESPONSE_SIZE.prometheus_name(prefix),
            stall=catalogue.LOOP_STALL.prometheus_name(prefix),
            stall_max=catalogue.LOOP_STALL_MAX.prometheus_name(prefix),
            long_stalls=catalogue.LONG_STALLS.prometheus_name(prefix),
        )


def _quantile(q: str, series: str, by: str) -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({series}_bucket[{RATE_INTERVAL}])))"


def _sizes(series: str, operation: str) -> str:
    return f'sum by (le) (increase({series}_bucket{{operation="{operation}"}}[{RANGE}]))'


def _route_panels(s: _Series) -> list[Panel]:
    """Requests per second, latency quantiles and value sizes of the state store routes."""
    return [
        Panel(
            "timeseries",
            "State store requests per second (API server)",
            "Execution API state store requests per second by store, operation and outcome (a GET "
            "answered 404 is read_absent, as on the task side)." + _ABOUT,
            [
                Target(
                    Server(f"sum by (store, operation, outcome) (rate({s.requests}[{RATE_INTERVAL}]))"),
                    "{{store}} {{operation}} {{outcome}}",
                )
            ],
            unit="reqps",
        ),
        Panel(
            "timeseries",
            "Request latency p99 by operation and value size",
            "99th percentile of the time from the request reaching the API server's app to the last "
            "byte of its response, by store, operation and the size class of the value moved (the "
            "body of a set, the response to a get)." + _ABOUT,
            [
                Target(
                    Server(_quantile("0.99", s.duration, "store, operation, value_size")),
                    "p99 {{store}} {{operation}} {{value_size}}",
                ),
                Target(
                    Server(_quantile("0.5", s.duration, "store, operation, value_size")),
                    "p50 {{store}} {{operation}} {{value_size}}",
                ),
            ],
            unit="ms",
        ),
        Panel(
            "bargauge",
            "Value sizes (selected range)",
            "Requests per body size bucket, cumulative (each bar counts requests up to that size): "
            "request bodies of sets, response bodies of gets." + _ABOUT,
            [
                Target(Server(_sizes(s.request_size, "set"), "count"), "set <= {{le}} B", instant=True),
                Target(Server(_sizes(s.response_size, "get"), "count"), "get <= {{le}} B", instant=True),
            ],
            decimals=0,
        ),
    ]


def _loop_panels(s: _Series) -> list[Panel]:
    """Each worker's event-loop stalls: largest, share of time, long stalls by route, by length."""
    return [
        Panel(
            "timeseries",
            "Event-loop stall: largest per interval, by worker",
            "The longest a worker's event loop could not run anything in each export interval (the "
            "stall monitor's late ticks). Healthy: a few ms. A spike is time every request that worker "
            "serves had to wait.",
            [Target(Server(f"max by (worker) ({s.stall_max})"), "{{worker}}")],
            unit="ms",
        ),
        Panel(
            "timeseries",
            "Event-loop stalled share, by worker",
            "Share of time each worker's event loop was stalled: stalled ms per second / 1000 (alert "
            "StateStoreApiServerLoopStalled above 5% for 10 minutes).",
            [Target(Server(f"sum by (worker) (rate({s.stall}_sum[{RATE_INTERVAL}])) / 1000"), "{{worker}}")],
            unit="percentunit",
        ),
        Panel(
            "timeseries",
            "Long stalls per second by state store route in flight",
            "Stalls of stall_threshold_ms (default 100 ms) or more per second, by the state store "
            "route in flight during them; none/none: no state store request was, look elsewhere "
            "(another route, a plugin, garbage collection).",
            [
                Target(
                    Server(f"sum by (store, operation) (rate({s.long_stalls}[{RATE_INTERVAL}]))"),
                    "{{store}} {{operation}}",
                )
            ],
            unit="ops",
        ),
        Panel(
            "bargauge",
            "Event-loop stalls by length (selected range)",
            "Stalls (ticks at least 1 ms late) per length bucket, cumulative (each bar counts stalls up "
            "to that length), all workers.",
            [
                Target(
                    Server(f"sum by (le) (increase({s.stall}_bucket[{RANGE}]))", "count"),
                    "<= {{le}} ms",
                    instant=True,
                )
            ],
            decimals=0,
        ),
    ]


def server_row(prefix: str) -> Row:
    """Panels over the API server side's series, by store/operation and by worker."""
    series = _Series.of(prefix)
    return Row(SERVER_ROW_TITLE, [*_route_panels(series), *_loop_panels(series)])
