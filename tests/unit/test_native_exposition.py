"""An API server worker's scrape endpoint with ``server_exposition = native``: the OpenTelemetry
exporter's bytes, served without holding the worker's event loop.

Everything goes over real sockets: each emitter serves its endpoint on 127.0.0.1 and the tests fetch
``/metrics`` as Prometheus would.
"""

from __future__ import annotations

import asyncio
import os
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import store_metrics
from store_metrics import catalogue
from store_metrics.backends.otel import exposition
from store_metrics.catalogue import LOOP_STALL, LOOP_STALL_MAX, SERVER_DURATION, SERVER_REQUESTS
from store_metrics.emitter import AggregatingEmitter
from support.worker_endpoint import WORKER, serving

WRITE = catalogue.get("task_state_store.write")
READ_FOUND = catalogue.get("task_state_store.read_found")
DELETE = catalogue.get("task_state_store.delete")
ROUTE = {"store": "task", "operation": "get", "status_class": "2xx", "worker": WORKER}


def fetch(url: str) -> tuple[str, bytes]:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.headers["Content-Type"], response.read()


@pytest.fixture
def both() -> Iterator[tuple[tuple[AggregatingEmitter, str], tuple[AggregatingEmitter, str]]]:
    native, otel = serving("native"), serving("otel")
    assert native[0].backend.exposition == "native"  # type: ignore[attr-defined]
    assert otel[0].backend.exposition == "otel"  # type: ignore[attr-defined]
    yield native, otel
    for emitter, _ in (native, otel):
        emitter.close(2.0)


def worker_day(emitter: AggregatingEmitter, dags: int) -> None:
    """What a worker counts: each task's calls on the task side's counters, its routes' histograms
    (an observation past the last bucket too), and the stall gauge pushed on a flush."""
    for i in range(dags * 10):
        tags = catalogue.task_tags(
            dag_id=f"dag_{i // 10}", task_id=f"task_{i % 10}", run_type="scheduled", operator="PythonOperator"
        )
        emitter.counter(WRITE, tags).add(1 + i % 3)
        emitter.counter(READ_FOUND, tags).add(2)
        emitter.counter(DELETE, tags).add(1)
    emitter.counter(SERVER_REQUESTS, {**ROUTE, "outcome": "read_found"}).add(7)
    for value in (0.25, 3.0, 12.5, 1e9):
        emitter.histogram(SERVER_DURATION, {**ROUTE, "value_size": "small"}).record(value)
    emitter.histogram(LOOP_STALL, {"worker": WORKER}).record(2.5)
    emitter.gauge(LOOP_STALL_MAX, {"worker": WORKER}).observe(12.5)
    emitter.flush(5.0)


def test_the_native_endpoint_serves_the_opentelemetry_exporters_bytes(both: Any) -> None:
    (native, native_url), (otel, otel_url) = both
    for emitter in (native, otel):
        worker_day(emitter, dags=20)
    native_type, native_text = fetch(native_url)
    otel_type, otel_text = fetch(otel_url)
    assert native_type == otel_type == "text/plain; version=0.0.4; charset=utf-8"
    assert native_text == otel_text
    assert b'airflow_task_state_store_write_total{dag_id="dag_0",operator="PythonOperator",' in native_text
    assert b'_bucket{le="+Inf",operation="get",' in native_text

    # Counted again: only the changed values move, and both still agree byte for byte.
    for emitter in (native, otel):
        emitter.counter(
            WRITE,
            catalogue.task_tags(
                dag_id="dag_3", task_id="task_4", run_type="scheduled", operator="PythonOperator"
            ),
        ).add(1000)
        emitter.counter(
            WRITE, catalogue.task_tags(dag_id="new", task_id="t", run_type="manual", operator="X")
        ).add(1)
    again = fetch(native_url)[1]
    assert again == fetch(otel_url)[1]
    assert again != native_text
    assert b'dag_id="dag_3",operator="PythonOperator",otel_scope_name="store_metrics"' in again


def test_nothing_counted_is_an_empty_page_on_both(both: Any) -> None:
    (_, native_url), (_, otel_url) = both
    assert fetch(native_url)[1] == fetch(otel_url)[1] == b""


def test_a_scrape_makes_again_only_what_moved_since_the_last(both: Any) -> None:
    """Between two scrapes one task counted again: the second scrape reuses every block of lines it
    wrote before but the one that holds that series (a block of 1,000 series joined once, kept), and
    still writes what the OpenTelemetry exporter writes."""
    (native, native_url), (otel, otel_url) = both
    for emitter in (native, otel):
        # 1,500 series per counter: 2 blocks each. No more: the OpenTelemetry exporter the bytes are
        # compared with gives up on a collection past 10 s, which a loaded CI machine once reached
        # at 2,500 per counter
        worker_day(emitter, dags=150)
    endpoint = native.backend.native
    first: list[bytes] = []
    endpoint.render(first.append)
    tags = catalogue.task_tags(
        dag_id="dag_120", task_id="task_3", run_type="scheduled", operator="PythonOperator"
    )
    for emitter in (native, otel):
        emitter.counter(READ_FOUND, tags).add(5)
    second: list[bytes] = []
    endpoint.render(second.append)

    blocks = [piece for piece in first if piece.count(b"\n") >= 500]
    assert len(blocks) == 6
    kept = [piece for piece in second if any(piece is block for block in blocks)]
    assert len(kept) == 5
    (remade,) = [piece for piece in second if piece.count(b"\n") >= 500 and piece not in kept]
    assert b'airflow_task_state_store_read_found_total{dag_id="dag_120",operator="PythonOperator",' in remade
    assert b"".join(second) == fetch(native_url)[1] == fetch(otel_url)[1]


class Watched:
    """Instruments one endpoint's rendering: which thread writes, how many series lines each
    stretch between two pauses holds, and how far a loop's ticker got meanwhile."""

    def __init__(self, loop_thread: int) -> None:
        self.loop_thread = loop_thread
        self.ticks = 0
        self.lines_since_pause = 0
        self.longest_stretch = 0
        self.pauses = 0
        self.render_threads: set[int] = set()
        self.ticks_at_pause: list[int] = []

    def write(self, data: bytes) -> None:
        self.render_threads.add(threading.get_ident())
        self.lines_since_pause += data.count(b"\n")

    def pause(self) -> None:
        self.longest_stretch = max(self.longest_stretch, self.lines_since_pause)
        self.lines_since_pause = 0
        self.pauses += 1
        self.ticks_at_pause.append(self.ticks)


def test_a_scrape_of_150000_series_never_holds_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    emitter, url = serving("native", max_series=160_000)
    try:
        worker_day(emitter, dags=5_000)  # 5,000 DAGs x 10 tasks x 3 operations
        assert emitter.series_count >= 150_000
        native = emitter.backend.native  # type: ignore[attr-defined]

        async def scrape_beside_a_ticker() -> tuple[Watched, bytes]:
            loop = asyncio.get_running_loop()
            watched = Watched(threading.get_ident())
            render = native.render

            def instrumented(write: Any, pause: Any) -> None:
                def both_write(data: bytes) -> None:
                    watched.write(data)
                    write(data)

                def both_pause() -> None:
                    watched.pause()
                    pause()

                render(both_write, both_pause)

            monkeypatch.setattr(native, "render", instrumented)

            async def tick() -> None:
                while True:
                    watched.ticks += 1
                    await asyncio.sleep(0)

            ticker = asyncio.create_task(tick())
            body = (await loop.run_in_executor(None, fetch, url))[1]
            ticker.cancel()
            return watched, body

        watched, body = asyncio.run(scrape_beside_a_ticker())
    finally:
        emitter.close(2.0)
    assert body.count(b"\nairflow_task_state_store_") == 150_000
    # The text is made on the endpoint's own thread, never on the loop's...
    assert watched.render_threads and watched.loop_thread not in watched.render_threads
    # ...in stretches of at most a few blocks of series, each followed by a pause...
    # (+ the small families written before the first block: headers, two histograms, a gauge)
    most = exposition.BLOCKS_PER_PAUSE * exposition.CHUNK
    assert watched.longest_stretch <= most + 100
    assert watched.pauses >= 150_000 // most
    # ...during which the loop runs: its ticker moved on between the first chunk and the last.
    assert watched.ticks_at_pause[-1] > watched.ticks_at_pause[0]


def test_a_bad_exposition_is_refused_naming_the_option() -> None:
    from store_metrics.errors import ConfigError

    with pytest.raises(ConfigError, match="server_exposition"):
        serving("fast")


def test_a_forked_worker_serves_its_own_counts_not_its_parents() -> None:
    """A worker forked after the parent's endpoint was scraped serves an endpoint of its own, which
    shows only what the child counted (the series' totals started again from zero, without an add)."""
    emitter, _ = serving("native")
    try:
        worker_day(emitter, dags=2)
        parent: list[bytes] = []
        emitter.backend.native.render(parent.append)  # type: ignore[attr-defined]
        assert b'dag_id="dag_1"' in b"".join(parent)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report the scrape's text through the pipe, then leave at once
            try:
                tags = catalogue.task_tags(
                    dag_id="dag_0", task_id="task_2", run_type="scheduled", operator="PythonOperator"
                )
                emitter.counter(WRITE, tags).add(4)
                emitter.flush(5.0)  # the child's backend opens: an endpoint of its own
                child: list[bytes] = []
                emitter.backend.native.render(child.append)  # type: ignore[attr-defined]
                os.write(write, b"".join(child))
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            text = pipe.read()
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        emitter.close(2.0)
    counted = [line for line in text.splitlines() if line.startswith(b"airflow_task_state_store_")]
    assert counted == [
        b'airflow_task_state_store_write_total{dag_id="dag_0",operator="PythonOperator",'
        b'otel_scope_name="store_metrics",otel_scope_schema_url="",otel_scope_version="'
        + store_metrics.__version__.encode()
        + b'",run_type="scheduled",task_id="task_2"} 4.0'
    ]
