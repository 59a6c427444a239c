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

import enum
import math
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from . import catalogue
from .deltas import Buckets, CounterDelta, Delta, GaugeValue, TagTuple

MAX_TAG_VALUE_LENGTH = 200
EMPTY_TAG_VALUE = catalogue.UNKNOWN

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_SAFE = re.compile(r"[A-Za-z0-9_.\-]+")
_TAG_KEY = re.compile(r"[a-z][a-z0-9_]*")
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*")

__all__ = ["TagTuple"]  # re-exported: the sanitised tag set this module produces


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


def _safe_pairs(tags: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, sanitize_tag_value(v)) for k, v in tags]


def influx_stat(prefix: str, name: str, tags: Iterable[tuple[str, str]]) -> str:
    """The StatsD stat name with InfluxDB-style tags: ``airflow.x.write,dag_id=d,task_id=t``."""
    return catalogue.full_name(prefix, name) + "".join(f",{k}={v}" for k, v in _safe_pairs(tags))


def influx_counter_line(prefix: str, name: str, tags: Iterable[tuple[str, str]], value: int) -> str:
    """One StatsD counter line with InfluxDB tags, as the ``statsd`` adapter sends it."""
    return f"{influx_stat(prefix, name, tags)}:{int(value)}|c"


def dogstatsd_tag_list(tags: Iterable[tuple[str, str]]) -> list[str]:
    """DogStatsD tags, ``["dag_id:d", "task_id:t", ...]``."""
    return [f"{k}:{v}" for k, v in _safe_pairs(tags)]


def dogstatsd_tag_suffix(tags: Iterable[tuple[str, str]]) -> str:
    """The ``|#k:v,k:v`` end of a DogStatsD line, or ``""`` for no tags."""
    tag_list = dogstatsd_tag_list(tags)
    return "|#" + ",".join(tag_list) if tag_list else ""


def dogstatsd_counter_line(prefix: str, name: str, tags: Iterable[tuple[str, str]], value: int) -> str:
    """One DogStatsD counter line: ``airflow.x.write:1|c|#dag_id:d,task_id:t``."""
    return f"{catalogue.full_name(prefix, name)}:{int(value)}|c{dogstatsd_tag_suffix(tags)}"


# -- histograms and gauges (the API server side) ----------------------------------------------------
#
# A histogram is pre-aggregated in memory (fixed buckets) and sent once per flush as one *sampled*
# observation per non-empty bucket: the bucket's mean, with sample rate 1/n for its n observations.
# StatsD receivers count an observation sent at rate r as 1/r observations (statsd_exporter
# ``int(1/r)`` events, the Collector's statsd receiver ``uint64(1/r)``, the Datadog agent weight 1/r),
# so they see exactly n observations in the same bucket, adding up to the same sum, in one line.


def format_value(value: float) -> str:
    """A number as sent: integers without a fraction, others in the shortest exact form."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def sample_rate(n: int) -> str:
    """The sample rate that makes a receiver count one line as ``n`` observations.

    ``1/n`` as text, nudged down where ``1/float(text)`` would fall just short of ``n`` (receivers
    truncate it to an integer).
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    rate = 1.0 / n
    while 1.0 / rate < n:
        rate = math.nextafter(rate, 0.0)
    return repr(rate)


def bucket_mean(buckets: Buckets, i: int) -> float:
    """The mean of bucket ``i``'s observations, kept inside the bucket despite rounding."""
    mean = buckets.sums[i] / buckets.counts[i]
    bounds = buckets.bounds
    if i < len(bounds):
        mean = min(mean, bounds[i])
    if i > 0:
        mean = max(mean, math.nextafter(bounds[i - 1], math.inf))
    return mean


def sampled_observations(buckets: Buckets) -> list[tuple[float, int]]:
    """(value, observations) per non-empty bucket: what the StatsD lines of one histogram carry."""
    return [(bucket_mean(buckets, i), n) for i, n in enumerate(buckets.counts) if n]


def _observation(value: float, kind: str, n: int) -> str:
    rate = f"|@{sample_rate(n)}" if n > 1 else ""
    return f"{format_value(value)}|{kind}{rate}"


def dogstatsd_histogram_lines(
    prefix: str, name: str, tags: Iterable[tuple[str, str]], buckets: Buckets
) -> list[str]:
    """DogStatsD distribution lines for one histogram series: ``name:12.5|d|@0.5|#k:v``."""
    suffix = dogstatsd_tag_suffix(tags)
    stat = catalogue.full_name(prefix, name)
    return [f"{stat}:{_observation(v, 'd', n)}{suffix}" for v, n in sampled_observations(buckets)]


def influx_histogram_lines(
    prefix: str, name: str, tags: Iterable[tuple[str, str]], buckets: Buckets
) -> list[str]:
    """StatsD histogram lines with InfluxDB tags: ``name,k=v:12.5|h|@0.5``.

    ``h``, not ``ms``: statsd_exporter divides ``ms`` values by 1000 and byte sizes are no timers.
    """
    stat = influx_stat(prefix, name, tags)
    return [f"{stat}:{_observation(v, 'h', n)}" for v, n in sampled_observations(buckets)]


def dogstatsd_gauge_line(prefix: str, name: str, tags: Iterable[tuple[str, str]], value: float) -> str:
    """One DogStatsD gauge line: ``airflow.x:212.5|g|#worker:w``."""
    suffix = dogstatsd_tag_suffix(tags)
    return f"{catalogue.full_name(prefix, name)}:{format_value(value)}|g{suffix}"


def influx_gauge_line(prefix: str, name: str, tags: Iterable[tuple[str, str]], value: float) -> str:
    """One StatsD gauge line with InfluxDB tags: ``airflow.x,worker=w:212.5|g``."""
    return f"{influx_stat(prefix, name, tags)}:{format_value(value)}|g"


# -- deltas to lines: what the StatsD backends send -------------------------------------------------


class Style(str, enum.Enum):
    """Where a StatsD line carries its tags."""

    #: ``name,k=v:1|c`` (the ``statsd`` backend; statsd_exporter's InfluxDB tags).
    INFLUX = "influx"
    #: ``name:1|c|#k:v`` (the ``dogstatsd`` backend).
    DOGSTATSD = "dogstatsd"


class Line(NamedTuple):
    """One line of text, and the part of a delta it carries (what is kept if it is not sent)."""

    text: str
    carries: Delta


def delta_lines(delta: Delta, prefix: str, style: Style) -> list[Line]:
    """The lines that carry ``delta``: one per counter or gauge, one per non-empty histogram bucket.

    Each line's ``carries`` is exactly what the line delivers, so a sender that fails part-way
    can keep the undelivered part and nothing else (a histogram's lines carry one bucket each).
    """
    name, tags = delta.metric.name, delta.tags
    influx = style is Style.INFLUX
    if isinstance(delta, CounterDelta):
        line = (influx_counter_line if influx else dogstatsd_counter_line)(prefix, name, tags, delta.value)
        return [Line(line, delta)]
    if isinstance(delta, GaugeValue):
        line = (influx_gauge_line if influx else dogstatsd_gauge_line)(prefix, name, tags, delta.value)
        return [Line(line, delta)]
    buckets = delta.buckets
    lines = (influx_histogram_lines if influx else dogstatsd_histogram_lines)(prefix, name, tags, buckets)
    filled = [i for i, n in enumerate(buckets.counts) if n]
    return [
        Line(text, delta._replace(buckets=buckets.only(i))) for text, i in zip(lines, filled, strict=True)
    ]


class Datagram(NamedTuple):
    """Lines packed into one UDP payload, with what they carry."""

    payload: bytes
    carries: tuple[Delta, ...]


def pack_lines(lines: Iterable[Line], max_size: int, end: bytes = b"") -> list[Datagram]:
    """Lines joined by newlines into as few datagrams of at most ``max_size`` bytes as they fit.

    Each datagram ends with ``end`` (DogStatsD clients end theirs with a newline; StatsD's with
    nothing). A line longer than ``max_size`` goes alone in a datagram of its own (receivers take
    it whole on loopback; a network may drop it, as it would any oversized datagram).
    """
    datagrams: list[Datagram] = []
    payload = b""
    carries: list[Delta] = []
    room = max_size - len(end)
    for line in lines:
        data = line.text.encode("utf-8")
        if payload and len(payload) + 1 + len(data) > room:
            datagrams.append(Datagram(payload + end, tuple(carries)))
            payload, carries = b"", []
        payload = payload + b"\n" + data if payload else data
        carries.append(line.carries)
    if payload:
        datagrams.append(Datagram(payload + end, tuple(carries)))
    return datagrams
