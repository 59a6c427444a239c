"""The StatsD counter lines a test received, summed per series (name, tags).

Each line is parsed strictly: a line that does not parse fails the test.
"""

from __future__ import annotations

import re
from collections import Counter

_DOG = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+):(?P<value>\d+)\|c(?:\|#(?P<tags>[^|]*))?$")
#: A tag value: no separator of either format and no line end (Unicode otherwise, as the tag value
#: rule of store_metrics.naming leaves it).
_VALUE = r"[^,=:|#\[\] \x00-\x1f\x7f-\x9f\u2028\u2029]+"
_INFLUX = re.compile(rf"^(?P<stat>[A-Za-z0-9_.\-]+(?:,[a-z_]+={_VALUE})*):(?P<value>\d+)\|c$")

Key = tuple[str, tuple[tuple[str, str], ...]]


def _parse_dogstatsd(line: str) -> tuple[Key, int]:
    match = _DOG.match(line)
    if not match:
        raise AssertionError(f"not a well-formed DogStatsD counter line: {line!r}")
    tags = tuple(tuple(t.split(":", 1)) for t in match["tags"].split(",")) if match["tags"] else ()
    for tag in tags:
        if len(tag) != 2:
            raise AssertionError(f"malformed tag in {line!r}")
    return (match["name"], tags), int(match["value"])  # type: ignore[return-value]


def _parse_influx(line: str) -> tuple[Key, int]:
    match = _INFLUX.match(line)
    if not match:
        raise AssertionError(f"not a well-formed InfluxDB-StatsD counter line: {line!r}")
    name, *pairs = match["stat"].split(",")
    tags = tuple(tuple(p.split("=", 1)) for p in pairs)
    for tag in tags:
        if len(tag) != 2:
            raise AssertionError(f"malformed tag in {line!r}")
    return (name, tags), int(match["value"])  # type: ignore[return-value]


def totals(lines: list[str], style: str, prefix: str = "airflow.") -> Counter[Key]:
    """Sum counter lines per (name, tags), keeping only names starting with ``prefix``.

    The API server's own lines (``<prefix>api_server.*``: histograms and gauges too, sent to the
    same socket under ``airflow standalone``) are not task counters and are left out; they are
    checked by tests/airflow/test_server_airflow.py.
    """
    parse = _parse_dogstatsd if style == "dogstatsd" else _parse_influx
    result: Counter[Key] = Counter()
    for line in lines:
        if not line.startswith(prefix) or line.startswith(f"{prefix}api_server."):
            continue
        key, value = parse(line)
        result[key] += value
    return result


def by_name(result: Counter[Key], **tags: str) -> dict[str, int]:
    """Totals per metric name over the series whose tags include ``tags``."""
    out: dict[str, int] = {}
    for (name, series_tags), value in result.items():
        have = dict(series_tags)
        if all(have.get(k) == v for k, v in tags.items()):
            out[name] = out.get(name, 0) + value
    return out
