"""Pure formatting: tag sanitising and the exact text of StatsD and DogStatsD lines.

Nothing here does I/O, so every byte the UDP adapters send can be unit-tested here.

The sanitising rule (documented in the README, applied to every backend so a DAG gets the
same label values whichever path its metrics take):

* a tag value is turned into a string; every character outside ``A-Z a-z 0-9 _ . -`` (so
  ``,`` ``=`` ``|`` ``#`` ``:`` spaces, newlines, quotes and any non-ASCII character) is
  replaced by ``_``;
* an empty value becomes ``unknown``;
* values are cut to :data:`MAX_TAG_VALUE_LENGTH` characters.

No sanitised value can end a line, start a new metric, or be read as a tag separator, so a
``dag_id`` of ``"x\\nairflow.evil:1|c"`` yields one well-formed line tagged ``x_airflow.evil_1_c``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from . import catalogue

MAX_TAG_VALUE_LENGTH = 200
EMPTY_TAG_VALUE = "unknown"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_SAFE = re.compile(r"[A-Za-z0-9_.\-]+")
_TAG_KEY = re.compile(r"[a-z][a-z0-9_]*")
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*")

#: A tag set as the emitter holds it: sanitised, in wire order, hashable.
TagTuple = tuple[tuple[str, str], ...]


def sanitize_tag_value(value: object) -> str:
    """Apply the sanitising rule to one tag value."""
    text = value if isinstance(value, str) else str(value)
    if _SAFE.fullmatch(text) and len(text) <= MAX_TAG_VALUE_LENGTH:
        return text
    text = _UNSAFE.sub("_", text)[:MAX_TAG_VALUE_LENGTH]
    return text or EMPTY_TAG_VALUE


def normalize_tags(tags: Mapping[str, object]) -> TagTuple:
    """Sanitise a tag mapping and order it for the wire.

    Known keys come in catalogue order (``dag_id, task_id, run_type, operator, team_name,
    operation``), any others after them sorted by name. Keys must be lowercase identifiers:
    they are chosen by code, never by users, so a bad one is a programming error.
    """
    for key in tags:
        if not _TAG_KEY.fullmatch(key):
            raise ValueError(f"tag key {key!r} is not a lowercase identifier")
    known = [k for k in catalogue.TAG_ORDER if k in tags]
    extra = sorted(k for k in tags if k not in catalogue.TAG_ORDER)
    return tuple((k, sanitize_tag_value(tags[k])) for k in (*known, *extra))


def is_valid_prefix(prefix: str) -> bool:
    """Whether ``prefix`` is usable as a metric name prefix (``airflow``, ``my.team``) or empty."""
    return prefix == "" or _PREFIX.fullmatch(prefix) is not None


def full_name(prefix: str, name: str) -> str:
    """``prefix.name``, or ``name`` alone when the prefix is empty."""
    return f"{prefix}.{name}" if prefix else name


def _safe_pairs(tags: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, sanitize_tag_value(v)) for k, v in tags]


def influx_stat(prefix: str, name: str, tags: Iterable[tuple[str, str]]) -> str:
    """The StatsD stat name with InfluxDB-style tags: ``airflow.x.write,dag_id=d,task_id=t``."""
    return full_name(prefix, name) + "".join(f",{k}={v}" for k, v in _safe_pairs(tags))


def influx_counter_line(prefix: str, name: str, tags: Iterable[tuple[str, str]], value: int) -> str:
    """One StatsD counter line with InfluxDB tags, as the ``statsd`` adapter sends it."""
    return f"{influx_stat(prefix, name, tags)}:{int(value)}|c"


def dogstatsd_tag_list(tags: Iterable[tuple[str, str]]) -> list[str]:
    """DogStatsD tags, ``["dag_id:d", "task_id:t", ...]``."""
    return [f"{k}:{v}" for k, v in _safe_pairs(tags)]


def dogstatsd_counter_line(prefix: str, name: str, tags: Iterable[tuple[str, str]], value: int) -> str:
    """One DogStatsD counter line: ``airflow.x.write:1|c|#dag_id:d,task_id:t``."""
    tag_list = dogstatsd_tag_list(tags)
    suffix = "|#" + ",".join(tag_list) if tag_list else ""
    return f"{full_name(prefix, name)}:{int(value)}|c{suffix}"
