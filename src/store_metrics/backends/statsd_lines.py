"""The exact text of StatsD and DogStatsD lines, and how they are packed into datagrams.

Pure formatting, no I/O, so every byte the UDP backends (``udp``) send can be unit-tested here.
Tag values come put to the tag value rule of ``store_metrics.naming`` (the emitter's series
hold them so), which leaves no separator in them; a line escapes any separator left in a value it
is given all the same (``wire_safe``), so it stays one well-formed line.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from typing import NamedTuple

from .. import catalogue
from ..deltas import Buckets, CounterDelta, Delta, GaugeValue, sampled_observations
from ..naming import wire_safe


def _safe_pairs(tags: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, wire_safe(v)) for k, v in tags]


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
