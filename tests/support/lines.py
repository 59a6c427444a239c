"""Strict parsers for one StatsD counter line: a line that does not match fails the test."""

from __future__ import annotations

import re

#: A tag value on a line: one character or more, none a separator of either format or a line end
#: (Unicode otherwise, as the tag value rule of store_metrics.naming leaves it).
_VALUE = r"[^,=:|#\[\] \x00-\x1f\x7f-\x9f\u2028\u2029]+"
_INFLUX_LINE = re.compile(rf"^(?P<name>[A-Za-z0-9_.]+)(?P<tags>(?:,[a-z_]+={_VALUE})*):(?P<value>\d+)\|c$")
_DOG_TAG = rf"[a-z_]+:{_VALUE}"
_DOG_LINE = re.compile(
    rf"^(?P<name>[A-Za-z0-9_.]+):(?P<value>\d+)\|c(?:\|#(?P<tags>{_DOG_TAG}(?:,{_DOG_TAG})*))?$"
)


def parse_influx(line: str) -> tuple[str, dict[str, str], int]:
    """(name, tags, value) of one InfluxDB-StatsD counter line."""
    match = _INFLUX_LINE.match(line)
    assert match, f"not one well-formed InfluxDB-StatsD counter line: {line!r}"
    tags = dict(pair.split("=", 1) for pair in match["tags"].split(",")[1:])
    return match["name"], tags, int(match["value"])


def parse_dogstatsd(line: str) -> tuple[str, dict[str, str], int]:
    """(name, tags, value) of one DogStatsD counter line."""
    match = _DOG_LINE.match(line)
    assert match, f"not one well-formed DogStatsD counter line: {line!r}"
    tags = dict(pair.split(":", 1) for pair in match["tags"].split(",")) if match["tags"] else {}
    return match["name"], tags, int(match["value"])
