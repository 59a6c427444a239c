"""Did a retried attempt resume? The rule on both sides in process; the host-wide claim in real processes.

* The task side: which task process decides (``task_listener.starts_a_retried_attempt``), and the
  listener wrapping a retried attempt's store (the wrapper's own counting: ``test_accessors.py``).
* The API server side: ``StoreCalls`` with a real emitter (backend
  ``none``) and a lookup standing in for the metadata query (as ``test_count_at.py``), several of
  them playing the workers of one host over one real claims folder; the claim raced by real processes.

Under ``airflow standalone``, both ``count_at`` modes: ``tests/airflow/count_at_standalone/``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from store_metrics.api_server import StoreCalls
from store_metrics.api_server.attribution import TaskAttempt
from store_metrics.api_server.retries import FirstReads, HostClaims
from store_metrics.counting import runtime
from store_metrics.emitter import AggregatingEmitter
from store_metrics.integration import plugin, task_listener

PYOP = "_PythonDecoratedOperator"
TAGS = {"dag_id": "etl", "task_id": "load", "run_type": "scheduled", "operator": PYOP}
RESUMED, NOT_RESUMED = "task_state_store.retry_resumed", "task_state_store.retry_not_resumed"
GET = ("task", "get")


# -- the task side: which process decides -------------------------------------------------------------


def runtime_ti(try_number: Any, next_method: str | None = None) -> Any:
    return SimpleNamespace(
        try_number=try_number, _ti_context_from_server=SimpleNamespace(next_method=next_method)
    )


@pytest.mark.parametrize(
    ("ti", "context", "decides"),
    [
        (runtime_ti(1), {"task_reschedule_count": 0}, False),  # a first try
        (runtime_ti(2), {"task_reschedule_count": 0}, True),  # a retry's first process
        (runtime_ti(5), {}, True),
        (runtime_ti(2, "execute_complete"), {"task_reschedule_count": 0}, False),  # resumed after a deferral
        (runtime_ti(2), {"task_reschedule_count": 1}, False),  # a sensor's later poke (reschedule mode)
        (runtime_ti(None), {}, False),  # no try known: never a guess
        (SimpleNamespace(), {}, False),
    ],
)
def test_only_the_process_that_starts_a_retried_attempt_decides(ti: Any, context: Any, decides: bool) -> None:
    assert task_listener.starts_a_retried_attempt(ti, context) is decides


@pytest.fixture
def counting_at_the_tasks(fresh_plugin_state: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh plugin (``fresh_plugin_state``) configured to count at the tasks, sending nowhere."""
    monkeypatch.setenv("AIRFLOW__STORE_METRICS__COUNT_AT", "tasks")
    monkeypatch.setenv("AIRFLOW__STORE_METRICS__BACKEND", "none")


class _Task:
    pass


@pytest.mark.usefixtures("counting_at_the_tasks")
@pytest.mark.parametrize(("try_number", "counted"), [(1, {}), (2, {RESUMED: 1})])
def test_the_listener_wraps_a_retried_attempts_store_to_decide(
    try_number: int, counted: dict[str, int]
) -> None:
    data = {"job": "j-1"}
    store = SimpleNamespace(get=lambda key, default=None: data.get(key, default))
    context: dict[str, Any] = {"task_state_store": store, "dag_run": SimpleNamespace(run_type="manual")}
    ti = SimpleNamespace(
        stats_tags={"dag_id": "d", "task_id": "t"},
        task=_Task(),
        try_number=try_number,
        get_template_context=lambda: context,
    )
    plugin.listener.on_task_instance_running(None, ti)
    assert context["task_state_store"].get("job") == "j-1"
    assert context["task_state_store"].get("job") == "j-1"
    totals = {name: n for (name, _), n in runtime.get_emitter().snapshot().items()}
    assert totals == {"task_state_store.read_found": 2, **counted}


# -- the API server side ----------------------------------------------------------------------------


class Lookup:
    """Stands in for the metadata query: each known attempt's tags and try; a gate to wait for; failures."""

    def __init__(self, known: dict[uuid.UUID, TaskAttempt], gate: threading.Event | None = None) -> None:
        self.known = known
        self.gate = gate
        self.fail = False
        self.calls: list[uuid.UUID] = []

    def __call__(self, ti_id: uuid.UUID) -> TaskAttempt | None:
        self.calls.append(ti_id)
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail:
            raise RuntimeError("database is down")
        return self.known.get(ti_id)


def counts(em: AggregatingEmitter, **tags: str) -> dict[str, int]:
    """Totals by name over the series carrying ``tags``."""
    out: dict[str, int] = {}
    for (name, series), n in em.snapshot().items():
        if set(tags.items()) <= set(series):
            out[name] = out.get(name, 0) + n
    return out


def ti_scope(ti: uuid.UUID) -> dict[str, Any]:
    return {
        "type": "http",
        "path": f"/execution/store/ti/{ti}/k",
        "root_path": "",
        "ti_token": SimpleNamespace(id=ti),
    }


def request(calls: StoreCalls, ti: uuid.UUID, route: tuple[str, str], status: int, outcome: str) -> None:
    calls.count(ti_scope(ti), route, status, outcome)


def read(calls: StoreCalls, ti: uuid.UUID, found: bool) -> None:
    request(calls, ti, GET, 200 if found else 404, "read_found" if found else "read_absent")


def write(calls: StoreCalls, ti: uuid.UUID) -> None:
    request(calls, ti, ("task", "set"), 204, "write")


RETRY = uuid.uuid4()
FIRST_TRY = uuid.uuid4()


@pytest.fixture
def claims(tmp_path: Path) -> HostClaims:
    return HostClaims(tmp_path / "claims")


def worker(emitter: AggregatingEmitter, claims: HostClaims, lookup: Lookup) -> StoreCalls:
    return StoreCalls(emitter, lookup, claims=claims)


def attempts(**tries: int) -> dict[uuid.UUID, TaskAttempt]:
    ids = {"retry": RETRY, "first_try": FIRST_TRY}
    return {ids[name]: TaskAttempt(TAGS, n) for name, n in tries.items()}


@pytest.mark.parametrize(("first_found", "expected"), [(True, RESUMED), (False, NOT_RESUMED)])
def test_a_retried_attempts_first_answered_read_decides_once(
    emitter: AggregatingEmitter, claims: HostClaims, first_found: bool, expected: str
) -> None:
    calls = worker(emitter, claims, Lookup(attempts(retry=2)))

    async def run() -> None:
        read(calls, RETRY, first_found)  # a miss: waits for the lookup
        write(calls, RETRY)
        read(calls, RETRY, not first_found)
        assert await calls.drain(5)
        read(calls, RETRY, True)  # cached now
        assert await calls.drain(5)

    asyncio.run(run())
    calls_expected = {
        "task_state_store.write": 1,
        "task_state_store.read_found": 1 + (not first_found) + first_found,
    }
    calls_expected["task_state_store.read_absent"] = 1
    assert counts(emitter, **{"dag_id": "etl"}) == {**calls_expected, expected: 1}
    assert calls.stats.retries_decided == 1 and calls.stats.retries_claimed_elsewhere == 0


def test_first_tries_unknown_tries_and_retries_that_never_read_count_nothing(
    emitter: AggregatingEmitter, claims: HostClaims
) -> None:
    unknown = uuid.uuid4()
    lookup = Lookup(attempts(first_try=1, retry=3))
    lookup.known[unknown] = TAGS  # type: ignore[assignment]  # a lookup that tells only tags
    calls = worker(emitter, claims, lookup)

    async def run() -> None:
        read(calls, FIRST_TRY, False)
        read(calls, unknown, True)
        write(calls, RETRY)
        request(calls, RETRY, ("task", "clear"), 204, "clear")
        request(calls, RETRY, ("asset", "get"), 200, "read_found")  # the asset store is out of scope
        assert await calls.drain(5)

    asyncio.run(run())
    got = counts(emitter)
    assert RESUMED not in got and NOT_RESUMED not in got
    assert got["task_state_store.read_absent"] == 1 and got["task_state_store.read_found"] == 1
    assert not claims.directory.exists() or not any(claims.directory.iterdir())  # nothing claimed


def test_a_read_answered_with_an_error_decides_nothing(
    emitter: AggregatingEmitter, claims: HostClaims
) -> None:
    calls = worker(emitter, claims, Lookup(attempts(retry=2)))

    async def run() -> None:
        request(calls, RETRY, GET, 500, "error")
        assert await calls.drain(5)
        request(calls, RETRY, GET, 503, "error")  # cached: still nothing decided
        read(calls, RETRY, True)
        assert await calls.drain(5)

    asyncio.run(run())
    assert counts(emitter)[RESUMED] == 1 and NOT_RESUMED not in counts(emitter)


def test_a_lookup_that_failed_at_the_first_read_decides_with_that_read_later(
    emitter: AggregatingEmitter, claims: HostClaims
) -> None:
    lookup = Lookup(attempts(retry=2))
    lookup.fail = True
    calls = StoreCalls(emitter, lookup, claims=claims, retry_after=0.2)

    async def run() -> None:
        read(calls, RETRY, False)  # the database is down: counted as unknown, the try not known
        assert await calls.drain(5)
        lookup.fail = False
        await asyncio.sleep(0.3)
        write(calls, RETRY)  # found now: the first read (absent) decides
        read(calls, RETRY, True)
        assert await calls.drain(5)

    asyncio.run(run())
    assert counts(emitter, dag_id="etl") == {
        "task_state_store.write": 1,
        "task_state_store.read_found": 1,
        NOT_RESUMED: 1,
    }
    assert counts(emitter, dag_id="<unknown>") == {"task_state_store.read_absent": 1}


def test_each_map_index_is_an_attempt_of_its_own(emitter: AggregatingEmitter, claims: HostClaims) -> None:
    mapped = [uuid.uuid4() for _ in range(3)]
    calls = worker(emitter, claims, Lookup({ti: TaskAttempt(TAGS, 2) for ti in mapped}))

    async def run() -> None:
        for n, ti in enumerate(mapped):
            read(calls, ti, n != 0)
            read(calls, ti, True)
        assert await calls.drain(5)

    asyncio.run(run())
    assert counts(emitter)[RESUMED] == 2 and counts(emitter)[NOT_RESUMED] == 1


def test_the_workers_of_a_host_decide_an_attempt_once(
    emitter: AggregatingEmitter, claims: HostClaims
) -> None:
    """The attempt's first read reaches worker A, a later one (a new connection) worker B, then C."""
    lookup = Lookup(attempts(retry=2))
    a, b, c = (worker(emitter, claims, lookup) for _ in range(3))

    async def run() -> None:
        read(a, RETRY, False)
        assert await a.drain(5)
        write(a, RETRY)
        read(b, RETRY, True)
        assert await b.drain(5)
        read(c, RETRY, True)
        read(a, RETRY, True)
        assert await c.drain(5) and await a.drain(5)

    asyncio.run(run())
    got = counts(emitter)
    assert got[NOT_RESUMED] == 1 and RESUMED not in got
    assert got["task_state_store.read_found"] == 3  # every call still counted, by whoever served it
    assert (
        a.stats.retries_decided,
        b.stats.retries_claimed_elsewhere,
        c.stats.retries_claimed_elsewhere,
    ) == (1, 1, 1)


def test_a_worker_that_forgot_an_attempt_does_not_count_it_again(
    emitter: AggregatingEmitter, claims: HostClaims
) -> None:
    others = [uuid.uuid4() for _ in range(3)]
    known = {RETRY: TaskAttempt(TAGS, 2), **{ti: TaskAttempt(TAGS, 1) for ti in others}}
    calls = StoreCalls(emitter, Lookup(known), claims=claims, cache_size=2)

    async def run() -> None:
        read(calls, RETRY, True)
        assert await calls.drain(5)
        for ti in others:  # pushes RETRY out of the cache and out of the first reads
            read(calls, ti, True)
            assert await calls.drain(5)
        assert calls.cached(RETRY) is None and len(calls.first_reads) == 2
        read(calls, RETRY, False)
        assert await calls.drain(5)

    asyncio.run(run())
    assert counts(emitter)[RESUMED] == 1 and NOT_RESUMED not in counts(emitter)
    assert calls.stats.retries_claimed_elsewhere == 1


def test_reads_waiting_for_one_lookup_keep_their_order(
    emitter: AggregatingEmitter, claims: HostClaims
) -> None:
    gate = threading.Event()
    calls = worker(emitter, claims, Lookup(attempts(retry=2), gate=gate))

    async def run() -> None:
        read(calls, RETRY, False)
        write(calls, RETRY)
        read(calls, RETRY, True)
        await asyncio.sleep(0)
        gate.set()
        assert await calls.drain(5)

    asyncio.run(run())
    assert counts(emitter)[NOT_RESUMED] == 1 and RESUMED not in counts(emitter)


def test_the_claim_is_made_on_a_lookup_thread(
    emitter: AggregatingEmitter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    claims = HostClaims(tmp_path / "claims")
    real = claims.claim

    def claim(ident: uuid.UUID, found: bool) -> bool:
        threads.append(threading.current_thread().name)
        return real(ident, found)

    monkeypatch.setattr(claims, "claim", claim)
    calls = worker(emitter, claims, Lookup(attempts(retry=2)))

    async def run() -> None:
        read(calls, RETRY, True)
        assert await calls.drain(5)

    asyncio.run(run())
    assert len(threads) == 1 and threads[0].startswith("store-metrics-attribution")
    assert (tmp_path / "claims" / str(RETRY)).read_text() == f"{os.getpid()} resumed\n"  # who, and what


def test_without_a_writable_claims_folder_each_worker_decides_alone(
    emitter: AggregatingEmitter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    claims = HostClaims(blocker / "claims")
    calls = worker(emitter, claims, Lookup(attempts(retry=2)))

    async def run() -> None:
        read(calls, RETRY, True)
        read(calls, RETRY, True)
        assert await calls.drain(5)

    asyncio.run(run())
    assert counts(emitter)[RESUMED] == 1  # the worker's own memory still counts it once
    assert "no host-wide claims of retried attempts" in caplog.text


def test_claims_older_than_their_ttl_are_swept(tmp_path: Path) -> None:
    claims = HostClaims(tmp_path, ttl=60, sweep_every=0)
    old, fresh = uuid.uuid4(), uuid.uuid4()
    assert claims.claim(old)
    past = time.time() - 120
    os.utime(tmp_path / str(old), (past, past))
    assert claims.claim(fresh)  # sweeps
    assert not (tmp_path / str(old)).exists() and (tmp_path / str(fresh)).exists()
    assert not claims.claim(fresh)


def test_first_reads_keep_the_first_outcome_once_and_are_bounded() -> None:
    reads = FirstReads(2)
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    reads.note(a, False)
    reads.note(a, True)
    assert reads.take(a) is False and reads.take(a) is None
    reads.note(a, True)  # decided: a later read changes nothing
    assert reads.take(a) is None
    reads.note(b, True)
    reads.note(c, True)  # drops a, the least recently used
    assert len(reads) == 2 and reads.take(b) is True and reads.take(c) is True


_RACER = """
import sys, uuid
from pathlib import Path
from store_metrics.api_server.retries import HostClaims
claims = HostClaims(Path(sys.argv[1]))
ids = [uuid.UUID(line) for line in sys.argv[2].split(",")]
sys.stdin.readline()  # start together
won = [str(i) for i in ids if claims.claim(i)]
print(",".join(won))
"""


def test_real_processes_racing_for_the_same_attempts_each_win_distinct_ones(tmp_path: Path) -> None:
    ids = [str(uuid.uuid4()) for _ in range(200)]
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(tmp_path / "claims"), ",".join(ids)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    won = [racer.communicate(timeout=60)[0].strip().split(",") for racer in racers]
    everyone = [ident for mine in won for ident in mine if ident]
    assert sorted(everyone) == sorted(ids)  # each attempt claimed exactly once, across the processes
