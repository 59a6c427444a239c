"""The native scrape endpoint (``server_exposition = native``): the OpenTelemetry Prometheus
exporter's text, byte for byte, at a cost that follows what changed, never holding an event loop.

Why not the SDK's exporter at scale: on every scrape it collects every series into new objects,
translates them into ``prometheus_client`` families and formats every line again, all while
holding the interpreter (150,000 series: 6.9 s a scrape, an asyncio loop in the same process held
up to 1.3 s, 4.9 KiB per series). Here:

* the counter series' lines are kept, in blocks of ``CHUNK`` series in the order the emitter
  made them, each block's lines joined and kept until one of them changes;
* a counter series puts itself on a list at its first add after a scrape (one attribute test on
  the hot path: ``CounterSeries.watch``), so
  a scrape reads the totals of those series only, makes again only their lines (the label part
  kept, a slice of the old line), joins again only the blocks that hold one and writes the others
  as they were: a scrape costs what moved, not every series (reading 150,000 scattered totals
  alone cost more than a plain join of the text). The first scrape, or one on a source that does
  not report what moved, reads every block's totals and compares them in C (``map``,
  ``list.__ne__``);
* the text is written block by block (``Transfer-Encoding: chunked``), with a short sleep after
  every ``BLOCKS_PER_PAUSE`` blocks or ``BUDGET`` of work, whichever comes first, on the
  endpoint's own thread: no long C call (a 30 MB join, a 30 MB encode) and no long stretch of
  Python holds the interpreter, so a thread waiting for it (the API server's event loop) gets it
  within a few milliseconds, not after the whole scrape;
* a scrape allocates nothing per unchanged series or block: the cyclic garbage
  collector, whose full passes over a worker's millions of objects are part of what held the loop
  for hundreds of milliseconds, has next to nothing new to look at.

What it writes is what ``opentelemetry-exporter-prometheus`` writes through ``prometheus_client``'s
text format 0.0.4 for the same series: ``target_info`` from the same resource, the families in the
order the SDK first saw them (histograms and gauges at their first observation, counters, in the
catalogue's order, at the first scrape that finds them counted), the same names (``_total``, unit
suffixes), ``HELP``/``TYPE`` lines, sorted labels with the ``otel_scope_*`` labels, ``le`` buckets
and values. Two differences, both named in docs/count-at-api-server.md: series within one family come
in the order they were made (the SDK's: the order a scrape first found them non-zero; they differ
only when a scrape falls between a series' creation and its first count); and the endpoint answers
in the text format only (no OpenMetrics negotiation, no gzip), which Prometheus takes as it is.
"""

from __future__ import annotations

import http.server
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import compress
from operator import attrgetter, ne
from typing import Any, Final, Protocol, runtime_checkable

from opentelemetry.exporter.prometheus._mapping import map_unit, sanitize_attribute, sanitize_full_name
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import UNDERSCORES, escape_label_name
from prometheus_client.utils import floatToGoString as _float_to_go

from ... import __version__, catalogue, logs
from ...catalogue import Kind, Metric, full_name
from ...deltas import HistogramDelta, TagTuple
from .instruments import METER_NAME

#: prometheus_client's formatting of a sample value (Go's float text: ``1.0``, ``1e+09``, ``+Inf``).
floatToGoString: Callable[[float], str] = _float_to_go

#: Series per block: a block's totals are compared, its changed lines made, and it is joined and
#: sent as one piece.
CHUNK: Final = 1_000
#: Blocks written between two pauses at most. A block joined again is about 0.1 ms of work, one
#: kept is a write that releases the interpreter: ``BUDGET`` is what usually calls the pause
#: (each pause costs a sleep and a wake, more than the work between two of them on an idle machine).
BLOCKS_PER_PAUSE: Final = 32
#: Seconds of rendering at most between two pauses, whatever the blocks hold.
BUDGET: Final = 0.002
#: Seconds the rendering thread sleeps between chunks, so a thread waiting for the interpreter gets
#: it (a release without a sleep is usually taken back by the same thread at once).
PAUSE: Final = 0.0002
_total = attrgetter("total")
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


class SeriesSource(Protocol):
    """What the endpoint reads counters from: the emitter's own series (made in this order)."""

    def series_of(self, metric: Metric) -> Sequence[Any]: ...


@runtime_checkable
class WatchedSource(SeriesSource, Protocol):
    """A source whose counter series report that they moved (the product's emitter): a scrape then
    reads the totals of those only, each series found by its ``place`` among its metric's."""

    def watch_counters(self, moved: list[Any]) -> None: ...

    def counted_series(self, metric: Metric) -> int: ...


def _label_value(value: Any) -> str:
    # As the OpenTelemetry exporter turns an attribute into a label value.
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _pairs(labels: Iterable[tuple[str, str]]) -> list[str]:
    """``name="value"`` items sorted by name, escaped as prometheus_client writes them."""
    return [
        f'{escape_label_name(k, UNDERSCORES)}="{_escape_value(v)}"'
        for k, v in sorted(labels, key=lambda kv: kv[0])
    ]


def _escape_value(value: str) -> str:
    # prometheus_client's escaping of a label value (UTF-8 allowed), inlined: the first scrape
    # makes one label part per series.
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _text(families: Sequence[Any]) -> list[str]:
    class _Collector:
        def collect(self) -> Sequence[Any]:
            return families

    return generate_latest(_Collector()).decode("utf-8").splitlines(keepends=True)


class _Histogram:
    """One histogram series: its label parts and cumulative buckets."""

    __slots__ = ("counts", "labels", "le_after", "le_before", "sum")

    def __init__(self, labels: list[tuple[str, str]], bounds: int) -> None:
        plain = _pairs(labels)
        with_le = sorted([*labels, ("le", "\0")], key=lambda kv: kv[0])
        at = [k for k, _ in with_le].index("le")
        self.labels = ",".join(plain)
        before = _pairs(with_le[:at])
        after = _pairs(with_le[at + 1 :])
        self.le_before = "".join(p + "," for p in before)
        self.le_after = "".join("," + p for p in after)
        self.counts = [0] * (bounds + 1)
        self.sum: float = 0


class Family:
    """One metric's family: its ``HELP``/``TYPE`` lines, its sample name, and its series' state."""

    def __init__(self, metric: Metric, prefix: str) -> None:
        self.metric = metric
        name = sanitize_full_name(full_name(prefix, metric.name))
        unit = map_unit(metric.unit or "")
        description = metric.description or ""
        factory: Any = {
            Kind.COUNTER: CounterMetricFamily,
            Kind.GAUGE: GaugeMetricFamily,
            Kind.HISTOGRAM: HistogramMetricFamily,
        }[metric.kind]
        family = factory(name=name, documentation=description, labels=[], unit=unit)
        if metric.kind is Kind.HISTOGRAM:
            family.add_metric([], buckets=[("+Inf", 0)], sum_value=0)
        else:
            family.add_metric([], 0)
        lines = _text([family])
        #: The ``# HELP`` and ``# TYPE`` lines, as prometheus_client writes them.
        self.head = "".join(lines[:2])
        #: The sample name (counters: with ``_total``; histograms: the base of ``_bucket`` and the others).
        self.sample = family.name if metric.kind is Kind.HISTOGRAM else lines[2].split(" ", 1)[0]
        self.bounds = [f"{b}" for b in metric.buckets] + ["+Inf"] if metric.kind is Kind.HISTOGRAM else []
        #: Histogram and gauge series, in the order they were first observed.
        self.series: dict[TagTuple, Any] = {}
        #: Counters: one block per ``CHUNK`` series of the emitter's list (append-only, so a
        #: series keeps its block and place).
        self.blocks: list[_Block] = []


class _Block:
    """The exposition lines of up to ``CHUNK`` counter series (``b""`` while a series is 0) and
    the totals they show."""

    __slots__ = ("body", "lines", "values")

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.values: list[int] = []
        #: The lines joined, kept until one of them changes (``None`` then).
        self.body: bytes | None = None


class _Pacer:
    """Calls ``pause`` after ``BLOCKS_PER_PAUSE`` blocks or ``BUDGET`` seconds of work,
    whichever comes first (the clock read every 64 lines made, and after every block)."""

    __slots__ = ("_blocks", "_deadline", "_lines", "_pause")

    def __init__(self, pause: Callable[[], None]) -> None:
        self._pause = pause
        self._blocks = 0
        self._lines = 0
        self._deadline = time.perf_counter() + BUDGET

    def _now(self) -> None:
        self._pause()
        self._blocks = 0
        self._deadline = time.perf_counter() + BUDGET

    def line(self) -> None:
        self._lines += 1
        if not self._lines & 63 and time.perf_counter() > self._deadline:
            self._now()

    def block(self) -> None:
        self._blocks += 1
        if self._blocks >= BLOCKS_PER_PAUSE or time.perf_counter() > self._deadline:
            self._now()


class NativeExposition:
    """The text of one emitter's series, rendered incrementally, and the endpoint that serves it."""

    def __init__(self, prefix: str, resource: Mapping[str, Any], *, chunk: int = CHUNK) -> None:
        self.prefix = prefix
        self.chunk = chunk
        self._scope = [
            ("otel_scope_name", METER_NAME),
            ("otel_scope_version", __version__),
            ("otel_scope_schema_url", ""),
        ]
        attributes = {sanitize_attribute(k): _label_value(v) for k, v in resource.items()}
        info = InfoMetricFamily("target", "Target metadata", labels=attributes)  # type: ignore[arg-type]
        info.add_metric(labels=list(attributes.keys()), value=attributes)
        self._target_info = "".join(_text([info]))
        self._source: SeriesSource | None = None
        #: The counter series that moved since the last scrape, as they report it (``None`` until
        #: the source is watched); ``_full``: read every series' total at the next scrape.
        self._moved: list[Any] | None = None
        self._full = True
        #: Per tag key order: the label part's items in sorted order, the scope's already written
        #: (str) and each tag's as (written name, its index in the tag tuple).
        self._plans: dict[tuple[str, ...], list[str | tuple[str, int]]] = {}
        #: Families in the order the SDK would have made them (see the module's docstring).
        self._families: dict[str, Family] = {}
        self._lock = threading.Lock()
        # One scrape renders at a time: the counter lines' cache lives on the series.
        self._render_lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self.port = 0

    # -- what is counted ----------------------------------------------------------------------

    def attach(self, source: SeriesSource) -> None:
        if source is not self._source:
            self._moved = None
        self._source = source

    def _family(self, metric: Metric) -> Family:
        family = self._families.get(metric.name)
        if family is None:
            with self._lock:
                family = self._families.get(metric.name)
                if family is None:
                    family = self._families[metric.name] = Family(metric, self.prefix)
        return family

    def _label_text(self, tags: TagTuple) -> str:
        """The label part of a series' line (without braces), as prometheus_client writes it."""
        keys = tuple(k for k, _ in tags)
        plan = self._plans.get(keys)
        if plan is None:
            named = sorted(
                [(k, v) for k, v in self._scope]
                + [(sanitize_attribute(k), i) for i, (k, _) in enumerate(tags)],
                key=lambda kv: kv[0],
            )
            plan = self._plans[keys] = [
                _pairs([(k, v)])[0] if isinstance(v, str) else (escape_label_name(k, UNDERSCORES), v)
                for k, v in named
            ]
        return ",".join(
            [
                item if isinstance(item, str) else f'{item[0]}="{_escape_value(tags[item[1]][1])}"'
                for item in plan
            ]
        )

    def _labels(self, tags: TagTuple) -> list[tuple[str, str]]:
        return [*self._scope, *((sanitize_attribute(k), v) for k, v in tags)]

    def record_histogram(self, metric: Metric, tags: TagTuple, value: float) -> None:
        """One observation (the caller's thread, in memory: a bisect and two adds under a lock)."""
        family = self._family(metric)
        series = family.series.get(tags)
        with self._lock:
            if series is None:
                series = family.series.setdefault(tags, _Histogram(self._labels(tags), len(metric.buckets)))
            i = _bucket(metric.buckets, value)
            series.counts[i] += 1
            series.sum += value

    def add_histogram(self, delta: HistogramDelta) -> None:
        """Observations made before the backend was open in this process: each bucket as counted."""
        family = self._family(delta.metric)
        with self._lock:
            series = family.series.get(delta.tags)
            if series is None:
                labels = self._labels(delta.tags)
                series = family.series[delta.tags] = _Histogram(labels, len(delta.metric.buckets))
            for i, (n, total) in enumerate(zip(delta.buckets.counts, delta.buckets.sums, strict=True)):
                series.counts[i] += n
                series.sum += total

    def set_gauge(self, metric: Metric, tags: TagTuple, value: float) -> None:
        family = self._family(metric)
        with self._lock:
            entry = family.series.get(tags)
            if entry is None:
                family.series[tags] = [",".join(_pairs(self._labels(tags))), value]
            else:
                entry[1] = value

    # -- the text -----------------------------------------------------------------------------

    def render(self, write: Callable[[bytes], None], pause: Callable[[], None] = lambda: None) -> None:
        """Write the whole exposition through ``write``, block by block, calling ``pause`` after at
        most ``BLOCKS_PER_PAUSE`` blocks of ``chunk`` series, or ``BUDGET`` of work."""
        with self._render_lock:
            self._render(write, pause)

    def _render(self, write: Callable[[bytes], None], pause: Callable[[], None]) -> None:
        source = self._source
        pacer = _Pacer(pause)
        if source is not None:
            self._take_moved(source, pacer)
        with self._lock:
            families = list(self._families.values())
        if not families:
            return
        out: list[str] = [self._target_info]
        for family in families:
            out.append(family.head)
            if family.metric.kind is Kind.COUNTER:
                write("".join(out).encode("utf-8"))
                out.clear()
                self._write_blocks(family, write, pacer)
            elif family.metric.kind is Kind.HISTOGRAM:
                self._histogram_lines(family, out)
            else:
                self._gauge_lines(family, out)
        write("".join(out).encode("utf-8"))

    def _take_moved(self, source: SeriesSource, pacer: _Pacer) -> None:
        """Bring the counter blocks up to date: only the series that moved since the last scrape
        when the source reports them (``WatchedSource``), else every series."""
        watching = self._moved is not None or self._watch(source)
        taken = self._drain()
        if not watching or self._full:
            self._full = False
            for metric in catalogue.all_counters():
                if metric.name not in self._families and any(s.total for s in source.series_of(metric)):
                    self._family(metric)
            for family in self._counter_families():
                self._compare_all(family, source.series_of(family.metric), pacer)
            return
        by_metric: dict[str, list[Any]] = {}
        for series in taken:
            by_metric.setdefault(series.metric.name, []).append(series)
        for metric in catalogue.all_counters():
            # Made in the catalogue's order, at the first scrape that finds the metric counted.
            moved = by_metric.get(metric.name)
            if moved and metric.name not in self._families and any(s.total for s in moved):
                self._family(metric)
        assert isinstance(source, WatchedSource)
        for name, moved in by_metric.items():
            counted = self._families.get(name)
            if counted is not None:
                self._apply(counted, moved, source.counted_series(counted.metric), pacer)

    def _drain(self) -> list[Any]:
        """The series that reported a move since the last scrape, each put back on watch."""
        moved = self._moved
        if moved is None:
            return []
        # Appends go to the end while this runs: take the first n, as many as were there.
        n = len(moved)
        taken = moved[:n]
        del moved[:n]
        for series in taken:
            # Back on watch before its total is read: an add from now on reports it again.
            series.watch = moved
        return taken

    def _watch(self, source: SeriesSource) -> bool:
        if not isinstance(source, WatchedSource):
            return False
        self._moved = []
        self._full = True
        source.watch_counters(self._moved)
        return True

    def _counter_families(self) -> list[Family]:
        with self._lock:
            return [f for f in self._families.values() if f.metric.kind is Kind.COUNTER]

    def _grow(self, family: Family, count: int) -> None:
        """Blocks for ``count`` series (the new ones' lines empty until they count)."""
        chunk = self.chunk
        blocks = family.blocks
        while len(blocks) * chunk < count:
            blocks.append(_Block())
        for k in range(len(blocks)):
            block = blocks[k]
            want = min(chunk, count - k * chunk)
            grown = want - len(block.values)
            if grown > 0:
                block.values.extend([0] * grown)
                block.lines.extend([b""] * grown)

    def _line(self, family: Family, block: _Block, i: int, series: Any, total: int) -> None:
        if not total:
            block.lines[i] = b""
        else:
            line = block.lines[i]
            # The value has no space: the label part ends at the line's last one.
            head = line[: line.rindex(b" ") + 1] if line else self._head(family, series.tags)
            block.lines[i] = head + floatToGoString(total).encode() + b"\n"
        block.values[i] = total
        block.body = None

    def _apply(self, family: Family, moved: list[Any], count: int, pacer: _Pacer) -> None:
        """The lines of the series that moved, made again (their totals read once, here)."""
        chunk = self.chunk
        self._grow(family, count)
        blocks = family.blocks
        for series in moved:
            k, i = divmod(series.place, chunk)
            block = blocks[k]
            total = series.total
            if total != block.values[i]:
                self._line(family, block, i, series, total)
                pacer.line()

    def _compare_all(self, family: Family, series: Sequence[Any], pacer: _Pacer) -> None:
        """Every block's totals read and compared in C, the lines of the ones that changed made
        again (the first scrape, after a fork, or a source that does not report what moved)."""
        chunk = self.chunk
        self._grow(family, len(series))
        for k, block in enumerate(family.blocks):
            part = series[k * chunk : (k + 1) * chunk]
            now = list(map(_total, part))
            if now != block.values:
                for i in compress(range(len(now)), map(ne, now, block.values)):
                    self._line(family, block, i, part[i], now[i])
                    # A first scrape makes every label part (~10 us each): hand over mid-block.
                    pacer.line()
            pacer.block()

    def _write_blocks(self, family: Family, write: Callable[[bytes], None], pacer: _Pacer) -> None:
        """Every block of ``family``: joined again if a line changed, else as joined before; written,
        with a pause after at most ``BLOCKS_PER_PAUSE`` blocks or ``BUDGET`` of work."""
        for block in family.blocks:
            body = block.body
            if body is None:
                body = block.body = b"".join(block.lines)
            write(body)
            pacer.block()

    def _histogram_lines(self, family: Family, out: list[str]) -> None:
        with self._lock:
            items = [(h, list(h.counts), h.sum) for h in family.series.values()]
        for h, counts, total in items:
            cumulative = 0
            for bound, n in zip(family.bounds, counts, strict=True):
                cumulative += n
                out.append(
                    f'{family.sample}_bucket{{{h.le_before}le="{bound}"{h.le_after}}} '
                    f"{floatToGoString(cumulative)}\n"
                )
            out.append(f"{family.sample}_count{{{h.labels}}} {floatToGoString(cumulative)}\n")
            out.append(f"{family.sample}_sum{{{h.labels}}} {floatToGoString(total)}\n")

    def _gauge_lines(self, family: Family, out: list[str]) -> None:
        with self._lock:
            gauges = [(labels, value) for labels, value in family.series.values()]
        for labels, value in gauges:
            out.append(f"{family.sample}{{{labels}}} {floatToGoString(value)}\n")

    def _head(self, family: Family, tags: TagTuple) -> bytes:
        return f"{family.sample}{{{self._label_text(tags)}}} ".encode()

    # -- the endpoint -------------------------------------------------------------------------

    def serve(self, host: str, first_port: int, tries: int) -> int:
        """Serve on the first free port from ``first_port`` (``tries`` of them); return it."""
        exposition = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                sock = self.connection

                def write(data: bytes) -> None:
                    # One chunk of the chunked body, gathered by the kernel: no copy of the block.
                    if data:
                        parts = [b"%x\r\n" % len(data), data, b"\r\n"]
                        sent = sock.sendmsg(parts)
                        total = len(parts[0]) + len(data) + 2
                        if sent < total:
                            sock.sendall(b"".join(parts)[sent:])

                exposition.render(write, lambda: time.sleep(PAUSE))
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, format: str, *args: Any) -> None:
                return None

        last = min(65536, first_port + max(1, tries))
        for port in range(first_port, last):
            try:
                server = _Server((host, port), Handler)
            except OSError:
                if port + 1 >= last:
                    raise
                continue
            thread = threading.Thread(target=server.serve_forever, name="store-metrics-scrape", daemon=True)
            thread.start()
            self._server = server
            self.port = server.server_address[1]
            return self.port
        raise OSError(f"no free port from {first_port}")

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def after_fork_in_child(self) -> None:
        # The parent's server thread does not exist here; the child serves on open() again.
        self._server = None
        self._render_lock = threading.Lock()
        self._lock = threading.Lock()
        self._families = {}
        # The series' totals start again from zero without an add: read them all once.
        self._full = True


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A scraper that went away mid-answer (its timeout) is not an error of ours; anything else
        # is said once, without a traceback per scrape.
        import sys

        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError):
            logs.once(
                "exposition:serve", logging.ERROR, "store-metrics: the scrape endpoint failed: %r", error
            )


def _bucket(bounds: Sequence[float], value: float) -> int:
    # The SDK's rule: a value equal to a bound falls in that bound's bucket.
    from bisect import bisect_left

    return bisect_left(bounds, value)
