"""The step, ``$__interval``, ``$__rate_interval`` and ``$__range`` Grafana sends a Prometheus query
with, for a panel's time range, width and query options: a pure function of them.

Read in Grafana's Prometheus data source (``pkg/promlib/models/query.go``: ``Parse``,
``calculatePrometheusInterval``, ``calculateRateInterval``, ``interpolateVariables``,
``AlignTimeRange``; ``safeResolution`` 11000) and its interval calculator
(``pkg/tsdb/intervalv2/intervalv2.go``: ``Calculate``, ``CalculateSafeInterval``,
``GetIntervalFrom``, ``roundInterval``, ``FormatDuration``), grafana/grafana main as stored in
December 2026. Grafana's docs (panels, "Query options"): *Max data points* defaults to the panel's
width in pixels; *Min interval* is the query's ``interval`` (the dashboard sets ``rule_interval``
there), else the data source's *Scrape interval*, else 15 s.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_SCRAPE", "GrafanaQuery", "format_duration", "grafana_query", "round_interval"]

#: Grafana's defaults: the scrape interval when the data source sets none; the resolution when a
#: query has no max data points (intervalv2.DefaultRes); at most this many points (safeResolution).
DEFAULT_SCRAPE, DEFAULT_RESOLUTION, SAFE_RESOLUTION = 15.0, 1500, 11000

#: roundInterval: (up to this many seconds, round to this many), in order; larger -> a year.
_ROUNDING = (
    (0.010, 0.001),
    (0.015, 0.010),
    (0.035, 0.020),
    (0.075, 0.050),
    (0.150, 0.100),
    (0.350, 0.200),
    (0.750, 0.500),
    (1.5, 1),
    (3.5, 2),
    (7.5, 5),
    (12.5, 10),
    (17.5, 15),
    (25, 20),
    (45, 30),
    (90, 60),
    (210, 120),
    (450, 300),
    (750, 600),
    (1050, 900),
    (1500, 1200),
    (2700, 1800),
    (5400, 3600),
    (9000, 7200),
    (16200, 10800),
    (32400, 21600),
    (86400, 43200),
    (172800, 86400),
    (604800, 86400),
    (1814400, 604800),
)
_UNITS = (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def round_interval(seconds: float) -> float:
    """intervalv2.roundInterval: a raw interval to the next "nice" one Grafana uses."""
    for limit, rounded in _ROUNDING:
        if seconds <= limit:
            return float(rounded)
    return 2592000.0 if seconds < 3628800 else 31536000.0


def format_duration(seconds: float) -> str:
    """intervalv2.FormatDuration: the largest unit that fits, truncated (``90`` -> ``1m``)."""
    for unit, size in _UNITS:
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(int(seconds * 1000), 1)}ms"


def parse_duration(text: str) -> float:
    """A Grafana interval string (``15s``, ``1m``, ``2h``; a bare number is seconds) in seconds."""
    sizes = dict(_UNITS) | {"w": 7 * 86400, "ms": 0.001}
    for unit in sorted(sizes, key=len, reverse=True):
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            return int(text[: -len(unit)]) * sizes[unit]
    if text.isdigit():
        return float(text)
    raise ValueError(f"not a Grafana interval: {text!r}")


@dataclass(frozen=True)
class GrafanaQuery:
    """What Grafana sends: the step, the range aligned to it, and the built-in variables' values."""

    step: float
    start: float
    end: float
    interval: str  # $__interval
    rate_interval: str  # $__rate_interval
    range: str  # $__range

    def expr(self, expr: str) -> str:
        """``expr`` with Grafana's built-in time variables replaced (rate interval before interval)."""
        expr = expr.replace("$__rate_interval", self.rate_interval).replace("$__interval", self.interval)
        return expr.replace("$__range", self.range)


def _min_interval(query_interval: str, scrape_interval: str, interval_ms: float) -> float:
    """gtime.GetIntervalFrom: the query's min interval, else the panel's interval (ms), else the
    data source's scrape interval, else 15 s. A variable ($__interval...) counts as none."""
    if query_interval and not query_interval.startswith("$"):
        return parse_duration(query_interval)
    if interval_ms:
        return interval_ms / 1000
    return parse_duration(scrape_interval) if scrape_interval else DEFAULT_SCRAPE


def grafana_query(
    start: float,
    end: float,
    max_data_points: int,
    *,
    query_interval: str = "",
    scrape_interval: str = "",
    interval_ms: float = 0,
) -> GrafanaQuery:
    """The query Grafana's Prometheus data source sends for a panel over ``[start, end]`` (epoch
    seconds) whose width (or *Max data points*) is ``max_data_points``, with the query's *Min
    interval* ``query_interval`` and the data source's *Scrape interval* ``scrape_interval``.
    ``interval_ms`` is the interval the browser computed (intervalMs): the floor where the query
    sets no min interval, and what ``$__rate_interval`` adds a scrape interval to (the step when not
    given)."""
    span = end - start
    minimum = _min_interval(query_interval, scrape_interval, interval_ms)
    raw = span / (max_data_points or DEFAULT_RESOLUTION)
    calculated = minimum if raw < minimum else round_interval(raw)
    safe = round_interval(span / SAFE_RESOLUTION)
    step = max(calculated, safe)
    if query_interval in ("$__rate_interval", "${__rate_interval}"):
        step = _rate_interval(step, scrape_interval)
    # interpolateVariables: $__rate_interval from the browser's interval and the query's min step
    # (or the scrape interval); $__interval is the step; $__range the span in whole seconds.
    requested = query_interval or scrape_interval
    if query_interval in ("$__interval", "${__interval}"):
        requested = format_duration(step)
    rate = step if query_interval in ("$__rate_interval", "${__rate_interval}") else None
    rate_seconds = rate if rate is not None else _rate_interval(interval_ms / 1000 or step, requested)
    return GrafanaQuery(
        step=step,
        # AlignTimeRange: start and end rounded down to a multiple of the step (UTC offset 0).
        start=(start // step) * step,
        end=(end // step) * step,
        interval=format_duration(step),
        rate_interval=f"{rate_seconds:g}s",
        range=f"{round(span)}s",
    )


def _rate_interval(interval: float, scrape: str) -> float:
    """calculateRateInterval: max(interval + scrape, 4 * scrape), scrape 15 s when unset."""
    scrape_seconds = parse_duration(scrape) if scrape else DEFAULT_SCRAPE
    return max(interval + scrape_seconds, 4 * scrape_seconds)
