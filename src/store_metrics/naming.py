"""The tag sanitising rule every backend applies, the order tags travel in, and what a prefix may be.

The rule (documented in the README, applied to every backend so a DAG gets the same label values
whichever path its metrics take):

* a tag value is turned into a string; every character outside ``A-Z a-z 0-9 _ . -`` (so
  ``,`` ``=`` ``|`` ``#`` ``:`` spaces, newlines, quotes and any non-ASCII character) is
  replaced by ``_``;
* an empty value becomes ``unknown``;
* values are cut to :data:`MAX_TAG_VALUE_LENGTH` characters.

No sanitised value can end a line, start a new metric, or be read as a tag separator, so a
``dag_id`` of ``"x\\nairflow.evil:1|c"`` yields one well-formed line tagged ``x_airflow.evil_1_c``
(the StatsD lines themselves: :mod:`store_metrics.backends.statsd_lines`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from . import catalogue
from .counting.deltas import TagTuple

MAX_TAG_VALUE_LENGTH = 200
EMPTY_TAG_VALUE = catalogue.UNKNOWN

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_SAFE = re.compile(r"[A-Za-z0-9_.\-]+")
_TAG_KEY = re.compile(r"[a-z][a-z0-9_]*")
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*")


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
