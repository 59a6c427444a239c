"""The step and built-in variables Grafana sends a Prometheus query with (support.grafana_step),
worked by hand from Grafana's own code: pkg/promlib/models/query.go (calculatePrometheusInterval,
calculateRateInterval, interpolateVariables, AlignTimeRange; safeResolution = 11000) and
pkg/tsdb/intervalv2/intervalv2.go (Calculate, CalculateSafeInterval, GetIntervalFrom,
roundInterval, FormatDuration)."""

from __future__ import annotations

import pytest

from support.grafana_step import format_duration, grafana_query, parse_duration, round_interval

DAY, WEEK = 86400, 7 * 86400


@pytest.mark.parametrize(
    ("raw", "rounded"),
    [
        (0.005, 0.001),
        (1.2, 1),
        (7.85, 10),
        (45.47, 60),
        (139.35, 120),
        (975.5, 900),
        (1051, 1200),
        (100000, 86400),
        (700000, 604800),
        (2e6, 2592000),
        (4e6, 31536000),
    ],
)
def test_round_interval_is_grafanas_table(raw: float, rounded: float) -> None:
    assert round_interval(raw) == rounded


def test_durations_as_grafana_writes_and_reads_them() -> None:
    assert [format_duration(s) for s in (0.0005, 0.02, 15, 90, 120, 900, 7200, DAY, WEEK)] == [
        "1ms",
        "20ms",
        "15s",
        "1m",
        "2m",
        "15m",
        "2h",
        "1d",
        "7d",
    ]
    assert [parse_duration(t) for t in ("15s", "1m", "2h", "1d", "1w", "30", "500ms")] == [
        15,
        60,
        7200,
        DAY,
        WEEK,
        30,
        0.5,
    ]
    with pytest.raises(ValueError, match="not a Grafana interval"):
        parse_duration("soon")


def test_a_day_on_a_third_of_the_screen_steps_two_minutes() -> None:
    # 86400 s / 640 px = 135 s, above the 1m min interval: rounded to 2m; the safe interval
    # (86400 / 11000 = 7.9 s -> 10 s) is smaller. The range is the span in whole seconds.
    q = grafana_query(1_000_000 - DAY, 1_000_000, 640, query_interval="1m", scrape_interval="15s")
    assert (q.step, q.interval, q.range) == (120, "2m", "86400s")
    assert (q.start, q.end) == (913_560, 999_960)  # both rounded down to a multiple of the step


def test_a_week_steps_fifteen_minutes_and_a_wide_day_keeps_the_min_interval() -> None:
    assert grafana_query(0, WEEK, 640, query_interval="1m").interval == "15m"  # 945 s -> 15m
    # 86400 / 1920 = 45 s is under the query's min interval: the min interval itself, not rounded.
    assert grafana_query(0, DAY, 1920, query_interval="1m").step == 60


def test_without_a_min_interval_the_scrape_interval_then_15_s_is_the_floor() -> None:
    assert grafana_query(0, 3600, 1920, scrape_interval="30s").step == 30
    assert grafana_query(0, 3600, 1920).step == 15
    # No max data points: 1500 (intervalv2.DefaultRes): 86400 / 1500 = 57.6 s -> 1m.
    assert grafana_query(0, DAY, 0).step == 60


def test_the_safe_interval_caps_the_points_at_11000() -> None:
    # 7 d over 100,000 px at a 1 s min interval: 6 s -> 5 s, but 604800 / 11000 = 55 s -> 1m wins.
    assert grafana_query(0, WEEK, 100_000, query_interval="1s").step == 60


def test_rate_interval_is_the_interval_plus_one_scrape_at_least_four_scrapes() -> None:
    # calculateRateInterval(intervalMs, requested min step): max(2m + 1m, 4 * 1m) = 4m.
    q = grafana_query(0, DAY, 640, query_interval="1m", interval_ms=120_000)
    assert q.rate_interval == "240s"
    # No min interval: the scrape interval (15 s): max(15 s + 15 s, 60 s) = 60 s.
    assert grafana_query(0, 3600, 1920, scrape_interval="15s").rate_interval == "60s"
    # $__rate_interval as the min step: the step itself is the rate interval, max(2m + 15s, 60s).
    q = grafana_query(0, DAY, 640, query_interval="$__rate_interval", scrape_interval="15s")
    assert q.step == 135 and q.rate_interval == "135s"


def test_the_variables_are_replaced_rate_interval_first() -> None:
    q = grafana_query(0, DAY, 640, query_interval="1m", interval_ms=120_000)
    assert q.expr("rate(x[$__rate_interval]) + avg_over_time(y[$__interval]) + z[$__range]") == (
        "rate(x[240s]) + avg_over_time(y[2m]) + z[86400s]"
    )
