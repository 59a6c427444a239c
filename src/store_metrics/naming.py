"""The tag value rule every backend applies, the order tags travel in, and what a prefix may be.

The rule keeps identity: one value, one label value, the same on every backend (so a DAG gets the
same labels whichever path its metrics take, and a query by its id finds exactly its series).

* a tag value is turned into a string and kept as it is, Unicode included, except for the
  characters some wire format reads as a separator or that the plugin keeps for its own values:
  ``%`` ``,`` ``=`` ``:`` ``|`` ``#`` ``[`` ``]`` ``<`` ``>`` space, control characters (newlines
  included), U+2028 and U+2029, and lone surrogates (no UTF-8 for them), each written as ``%`` and
  its UTF-8 bytes in hex (``a,b`` is ``a%2Cb``, ``50%`` is ``50%25``). Percent-encoding ``%``
  itself makes the rule injective: two different values never give one label value.
* Every id Airflow accepts (``[\\w.-]+``, Unicode word characters, up to 250) has none of those
  characters, so it reaches every backend unchanged: ``données_2024`` is ``données_2024``, and
  ``donn_es_2024`` another series.
* The values the plugin makes up (``store_metrics.catalogue.RESERVED_VALUES``: ``<unknown>``,
  ``<none>``, ``<other>``, ``<overflow>``) are written between angle brackets, which no escaped
  value contains; an empty value is ``<unknown>``. They are recognised by their text, so a value
  from outside equal to one of them is kept too: only an asset name can be (Airflow does not
  restrict those), never a DAG or task id.
* A value longer than ``MAX_TAG_VALUE_LENGTH`` characters once escaped (never an Airflow id:
  asset names reach 1500) keeps its first characters and ends with ``~`` and 16 hex digits of its
  SHA-256, so long values that share a beginning stay apart.

No value can end a line, start a new metric or be read as a tag separator on a StatsD line, so a
``dag_id`` of ``"x\\nairflow.evil:1|c"`` yields one well-formed line tagged
``x%0Aairflow.evil%3A1%7Cc`` (the StatsD lines themselves: ``store_metrics.backends.statsd_lines``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from . import catalogue
from .deltas import TagTuple

#: The longest tag value, in characters after escaping: an asset name's limit in Airflow (a DAG or
#: task id is at most 250).
MAX_TAG_VALUE_LENGTH = 1500
EMPTY_TAG_VALUE = catalogue.UNKNOWN
#: How many hex digits of the SHA-256 end a value cut to ``MAX_TAG_VALUE_LENGTH``.
_DIGEST_HEX = 16

#: What is escaped: every StatsD separator (InfluxDB tags ``, = : |`` and space, DogStatsD ``, | #``,
#: statsd_exporter's SignalFx ``[ ]``), ``%`` (the escape itself), ``< >`` (the plugin's own values),
#: control characters and Unicode's line and paragraph separators (line ends to some readers), and
#: lone surrogates.
_ESCAPED = re.compile(r"[%,=:|#\[\]<> \x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
#: What a StatsD line must never carry inside a tag value (the separators; not ``%`` nor ``< >``).
_WIRE_UNSAFE = re.compile(r"[,=:|#\[\] \x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_TAG_KEY = re.compile(r"[a-z][a-z0-9_]*")
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*")


def _percent(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8", "surrogatepass"))


def _cut(escaped: str, original: str) -> str:
    digest = hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_HEX]
    return f"{escaped[: MAX_TAG_VALUE_LENGTH - _DIGEST_HEX - 1]}~{digest}"


def tag_value(value: object) -> str:
    """The label value of one tag value, by the rule above: the same string on every backend."""
    text = value if isinstance(value, str) else str(value)
    if text in catalogue.RESERVED_VALUES:
        return text
    if not text:
        return EMPTY_TAG_VALUE
    escaped = _ESCAPED.sub(_percent, text)
    return escaped if len(escaped) <= MAX_TAG_VALUE_LENGTH else _cut(escaped, text)


def wire_safe(value: object) -> str:
    """``value`` with any StatsD separator left in it escaped (and never empty): a no-op on
    ``tag_value``'s results (what the backends are given), so a line stays one well-formed line
    whatever reaches it."""
    text = value if isinstance(value, str) else str(value)
    if not text:
        return EMPTY_TAG_VALUE
    return _WIRE_UNSAFE.sub(_percent, text) if _WIRE_UNSAFE.search(text) else text


def normalize_tags(tags: Mapping[str, object]) -> TagTuple:
    """Apply the rule to a tag mapping and order it for the wire.

    Known keys come in catalogue order (``dag_id, task_id, run_type, operator, team_name,
    operation``), any others after them sorted by name. Keys must be lowercase identifiers:
    they are chosen by code, never by users, so a bad one is a programming error.
    """
    for key in tags:
        if not _TAG_KEY.fullmatch(key):
            raise ValueError(f"tag key {key!r} is not a lowercase identifier")
    known = [k for k in catalogue.TAG_ORDER if k in tags]
    extra = sorted(k for k in tags if k not in catalogue.TAG_ORDER)
    return tuple((k, tag_value(tags[k])) for k in (*known, *extra))


def is_valid_prefix(prefix: str) -> bool:
    """Whether ``prefix`` is usable as a metric name prefix (``airflow``, ``my.team``) or empty."""
    return prefix == "" or _PREFIX.fullmatch(prefix) is not None
