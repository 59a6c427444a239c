"""The instrumented accessors: exact counts, exact pass-through.

The inner stores here are small in-memory fakes with the shape of the Task SDK accessors
(``support.fake_accessors``); real Airflow is exercised by the Airflow tests (``tests/airflow/``),
and ``tests/airflow/test_accessor_shapes.py`` checks the fakes against the installed Airflow
classes. No metrics backend is faked: counts go to ``store_metrics.testing``'s recorder
or to a real emitter.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
from datetime import timedelta
from typing import Any

import pytest

import store_metrics
from store_metrics.counting import accessors
from store_metrics.testing import MetricsRecorder, capture_metrics
from support.fake_accessors import (
    NEVER_EXPIRE,
    TAGS,
    Asset,
    Boom,
    FakeAssetStore,
    FakeAssetStores,
    FakeAsyncTaskStore,
    FakeTaskStore,
)
from support.tags import WIRE_TAGS
from testbed.udp import UdpReceiver


@pytest.fixture
def metrics() -> Any:
    with capture_metrics() as recorder:
        yield recorder


def task_store(recorder: MetricsRecorder, inner: Any = None) -> Any:
    return store_metrics.instrument_task_store(inner or FakeTaskStore(), recorder, TAGS)


# -- the user's story --------------------------------------------------------------------------


def test_a_task_that_reads_a_missing_key_then_writes_it(metrics: MetricsRecorder) -> None:
    store = task_store(metrics)
    assert store.get("job_id") is None
    store.set("job_id", "abc")
    assert metrics.counts(dag_id="d", task_id="t") == {
        "task_state_store.read_absent": 1,
        "task_state_store.write": 1,
    }


def test_a_resumed_task_finds_its_key_deletes_it_and_clears(metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore()
    inner.data["job_id"] = "abc"
    store = task_store(metrics, inner)
    assert store.get("job_id") == "abc"
    store.delete("job_id")
    store.clear()
    assert metrics.counts() == {
        "task_state_store.read_found": 1,
        "task_state_store.delete": 1,
        "task_state_store.clear": 1,
    }
    # Every series carries the task's tags, and only them.
    assert {tags for (_, tags) in metrics.series()} == {
        (("dag_id", "d"), ("task_id", "t"), ("run_type", "manual"), ("operator", "X"))
    }


def test_each_call_is_counted_once(metrics: MetricsRecorder) -> None:
    store = task_store(metrics)
    for i in range(5):
        store.set(f"k{i}", i)
    for i in range(7):
        store.get(f"k{i}")
    assert metrics.counts() == {
        "task_state_store.write": 5,
        "task_state_store.read_found": 5,
        "task_state_store.read_absent": 2,
    }


# -- found vs absent, exactly ------------------------------------------------------------------


@pytest.mark.parametrize("stored", [0, "", False, [], {}, "fallback"])
def test_a_stored_value_equal_to_the_callers_default_is_read_found(
    metrics: MetricsRecorder, stored: Any
) -> None:
    inner = FakeTaskStore()
    inner.data["k"] = stored
    store = task_store(metrics, inner)
    default = copy.copy(stored)  # equal, and for mutables a different object
    result = store.get("k", default)
    assert result is stored
    assert metrics.counts() == {"task_state_store.read_found": 1}


def test_absent_returns_the_callers_own_default_object(metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore()
    store = task_store(metrics, inner)
    default = {"fresh": True}
    assert store.get("missing", default) is default
    assert store.get("missing", default=0) == 0
    assert metrics.counts() == {"task_state_store.read_absent": 2}
    # The caller's default never reached the inner accessor: it was handed a private sentinel.
    inner_defaults = [args[1] for name, args, _ in inner.calls if name == "get"]
    assert len(inner_defaults) == 2
    assert all(d is not default and d != 0 and d is not None for d in inner_defaults)


# -- pass-through of values and arguments ------------------------------------------------------


def test_return_values_and_arguments_pass_through_untouched(metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore()
    value = {"nested": [1, 2, 3]}
    store = task_store(metrics, inner)
    assert store.set("k", value) is None
    assert inner.data["k"] is value
    assert store.get("k") is value


@pytest.mark.parametrize("retention", [None, timedelta(hours=6), NEVER_EXPIRE])
def test_retention_keyword_passes_through(metrics: MetricsRecorder, retention: Any) -> None:
    inner = FakeTaskStore()
    store = task_store(metrics, inner)
    store.set("k", 1, retention=retention)
    assert inner.calls == [("set", ("k", 1), {"retention": retention})]
    assert inner.calls[0][2]["retention"] is retention
    assert metrics.counts() == {"task_state_store.write": 1}


def test_a_set_without_retention_passes_no_extra_keyword(metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore()
    task_store(metrics, inner).set("k", 1)
    # The inner set() got no keyword at all, so the accessor's own default applies (a wrapper
    # passing retention=None would record {"retention": None} here).
    assert inner.calls == [("set", ("k", 1), {})]
    assert metrics.counts() == {"task_state_store.write": 1}


# -- exceptions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "call"),
    [
        ("get", lambda s: s.get("k")),
        ("set", lambda s: s.set("k", 1)),
        ("delete", lambda s: s.delete("k")),
        ("clear", lambda s: s.clear()),
    ],
)
def test_an_exception_reaches_the_caller_unchanged_and_counts_as_error(
    metrics: MetricsRecorder, operation: str, call: Any
) -> None:
    inner = FakeTaskStore()
    error = Boom("supervisor said no")
    inner.fail = error
    store = task_store(metrics, inner)
    with pytest.raises(Boom) as caught:
        call(store)
    assert caught.value is error
    assert caught.value.args == ("supervisor said no",)
    # The traceback still goes down to where it was raised.
    assert caught.traceback[-1].name == "_call"
    assert metrics.counts() == {"task_state_store.error": 1}
    assert metrics.value("task_state_store.error", operation=operation) == 1


def test_the_inners_own_validation_error_is_an_error_not_a_write(metrics: MetricsRecorder) -> None:
    store = task_store(metrics)
    with pytest.raises(ValueError, match="Cannot set value as None"):
        store.set("k", None)
    assert metrics.counts() == {"task_state_store.error": 1}
    assert metrics.value("task_state_store.error", operation="set") == 1


def test_base_exceptions_pass_and_count_nothing(metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore()
    inner.fail = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        task_store(metrics, inner).get("k")
    assert metrics.counts() == {}


# -- async -------------------------------------------------------------------------------------


def test_sync_only_inner_gets_no_async_methods(metrics: MetricsRecorder) -> None:
    store = task_store(metrics)
    for name in ("aget", "aset", "adelete", "aclear"):
        assert not hasattr(store, name)
        with pytest.raises(AttributeError):
            getattr(store, name)


def test_async_methods_are_counted_like_sync_ones(metrics: MetricsRecorder) -> None:
    inner = FakeAssetStore("orders")
    store = store_metrics.instrument_asset_store(inner, metrics, TAGS)

    async def story() -> list[tuple[Any, dict[str, int]]]:
        # Each call with the counts right after it: found and absent told apart call by call
        # (totals alone would not see a found counted as absent and an absent as found).
        steps = [(await store.aget("wm"), metrics.counts())]
        steps.append((await store.aset("wm", 0), metrics.counts()))
        steps.append((await store.aget("wm", 0), metrics.counts()))  # found, equal to the default
        steps.append((await store.aget("gone", "dflt"), metrics.counts()))
        await store.adelete("wm")
        await store.aclear()
        return steps

    absent, found = "asset_state_store.read_absent", "asset_state_store.read_found"
    write = "asset_state_store.write"
    assert asyncio.run(story()) == [
        (None, {absent: 1}),
        (None, {absent: 1, write: 1}),
        (0, {absent: 1, write: 1, found: 1}),
        ("dflt", {absent: 2, write: 1, found: 1}),
    ]
    assert metrics.counts() == {
        absent: 2,
        write: 1,
        found: 1,
        "asset_state_store.delete": 1,
        "asset_state_store.clear": 1,
    }


def test_an_async_task_stores_calls_are_counted_like_sync_ones(metrics: MetricsRecorder) -> None:
    """Task SDK 1.4's task accessor has aget/aset/adelete/aclear: the wrapper has them and counts them."""
    inner = FakeAsyncTaskStore()
    store = store_metrics.instrument_task_store(inner, metrics, TAGS)
    six_hours = timedelta(hours=6)

    async def story() -> list[Any]:
        results = [await store.aget("job_id")]
        await store.aset("job_id", "j-1", retention=six_hours)
        results.append(await store.aget("job_id", "j-1"))  # found, though equal to the default
        await store.adelete("job_id")
        results.append(await store.aget("job_id", "gone"))
        await store.aclear()
        return results

    assert asyncio.run(story()) == [None, "j-1", "gone"]
    assert metrics.counts() == {
        "task_state_store.read_absent": 2,
        "task_state_store.write": 1,
        "task_state_store.read_found": 1,
        "task_state_store.delete": 1,
        "task_state_store.clear": 1,
    }
    # retention= reached the accessor unchanged.
    assert ("set", ("job_id", "j-1"), {"retention": six_hours}) in inner.calls


@pytest.mark.parametrize("operation", ["get", "set", "delete", "clear"])
def test_async_exception_is_the_same_object_and_counts_as_error(
    metrics: MetricsRecorder, operation: str
) -> None:
    inner = FakeAssetStore("orders")
    error = Boom(operation)
    inner.fail = error
    store = store_metrics.instrument_asset_store(inner, metrics, TAGS)
    args: dict[str, tuple[Any, ...]] = {"get": ("k",), "set": ("k", 1), "delete": ("k",), "clear": ()}
    with pytest.raises(Boom) as caught:
        asyncio.run(getattr(store, "a" + operation)(*args[operation]))
    assert caught.value is error
    assert metrics.counts() == {"asset_state_store.error": 1}
    assert metrics.value("asset_state_store.error", operation=operation) == 1


def test_only_the_async_methods_the_inner_has(metrics: MetricsRecorder) -> None:
    class OnlyAget(FakeTaskStore):
        async def aget(self, key: str, default: Any = None) -> Any:
            return self.get(key, default)

    store = store_metrics.instrument_task_store(OnlyAget(), metrics, TAGS)
    assert hasattr(store, "aget")
    assert not hasattr(store, "aset")
    assert not hasattr(store, "aclear")
    assert asyncio.run(store.aget("k", 5)) == 5
    assert metrics.counts() == {"task_state_store.read_absent": 1}


# -- the asset mapping -------------------------------------------------------------------------


def test_subscripted_asset_store_counts_each_call_once(metrics: MetricsRecorder) -> None:
    inner = FakeAssetStores("orders", "users")
    store = store_metrics.instrument_asset_store(inner, metrics, TAGS)
    orders = Asset("orders")
    assert store[orders].get("wm") is None
    store[orders].set("wm", 5)
    assert store[orders].get("wm") == 5
    assert store[Asset("users")].get("wm", "none") == "none"
    assert inner[orders].data == {"wm": 5}
    assert metrics.counts() == {
        "asset_state_store.read_absent": 2,
        "asset_state_store.write": 1,
        "asset_state_store.read_found": 1,
    }
    # The same wrapper each time, around the very accessor the mapping returns.
    assert store[orders] is store[orders]
    assert accessors.unwrap(store[orders]) is inner[orders]
    assert isinstance(store[orders], FakeAssetStore)


def test_single_asset_sugar_counts_each_call_once(metrics: MetricsRecorder) -> None:
    inner = FakeAssetStores("orders")
    store = store_metrics.instrument_asset_store(inner, metrics, TAGS)
    assert store.get("wm") is None
    store.set("wm", 1)
    assert store.get("wm") == 1
    store.delete("wm")
    store.clear()
    assert asyncio.run(store.aget("wm", 3)) == 3
    assert metrics.counts() == {
        "asset_state_store.read_absent": 2,
        "asset_state_store.write": 1,
        "asset_state_store.read_found": 1,
        "asset_state_store.delete": 1,
        "asset_state_store.clear": 1,
    }


def test_asset_not_in_the_task_raises_the_mappings_own_error_uncounted(metrics: MetricsRecorder) -> None:
    store = store_metrics.instrument_asset_store(FakeAssetStores("orders"), metrics, TAGS)
    with pytest.raises(KeyError, match="is not in this task's inlets or outlets"):
        store[Asset("nope")]
    assert metrics.counts() == {}


def test_ambiguous_sugar_raises_the_mappings_error_and_counts_it(metrics: MetricsRecorder) -> None:
    store = store_metrics.instrument_asset_store(FakeAssetStores("a", "b"), metrics, TAGS)
    with pytest.raises(ValueError, match="Task has 2 concrete inlets and outlets"):
        store.get("wm")
    assert metrics.counts() == {"asset_state_store.error": 1}


# -- transparency ------------------------------------------------------------------------------


def test_repr_eq_hash_isinstance_and_attributes_pass_through(metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore("ti-42")
    store = task_store(metrics, inner)
    assert repr(store) == "<TaskStateStoreAccessor ti_id=ti-42>"
    assert str(store) == str(inner)
    assert store == inner
    assert inner == store
    assert store == FakeTaskStore("ti-42")
    assert store != FakeTaskStore("other")
    assert hash(store) == hash(inner)
    assert {store: 1}[inner] == 1
    assert isinstance(store, FakeTaskStore)
    assert store._ti_id == "ti-42"
    assert "get" in dir(store)
    store.extra = "set through"
    assert inner.extra == "set through"  # type: ignore[attr-defined]
    assert accessors.unwrap(store) is inner
    assert accessors.is_instrumented(store)
    assert not accessors.is_instrumented(inner)
    assert metrics.counts() == {}


def test_private_methods_pass_through_uncounted(metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore()
    store = task_store(metrics, inner)
    store._clear_backend_only()
    assert inner.backend_cleared == 1
    assert metrics.counts() == {}


def test_wrapping_twice_does_not_count_twice(metrics: MetricsRecorder) -> None:
    store = task_store(metrics)
    again = store_metrics.instrument_task_store(store, metrics, TAGS)
    assert again is store
    again.set("k", 1)
    assert metrics.counts() == {"task_state_store.write": 1}


def test_copies_wrap_a_copy_and_count_into_the_same_series(metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore()
    store = task_store(metrics, inner)
    for clone in (copy.copy(store), copy.deepcopy(store)):
        assert accessors.is_instrumented(clone)
        assert accessors.unwrap(clone) is not inner
        assert clone == inner
        clone.set("k", 1)
    assert metrics.counts() == {"task_state_store.write": 2}


def test_pickling_a_wrapper_pickles_the_accessor(metrics: MetricsRecorder) -> None:
    store = task_store(metrics, FakeTaskStore("ti-7"))
    clone = pickle.loads(pickle.dumps(store))
    assert type(clone) is FakeTaskStore
    assert clone == FakeTaskStore("ti-7")


# -- through a real emitter and a real backend -------------------------------------------------


def test_counts_reach_a_real_statsd_socket(udp_receiver: UdpReceiver) -> None:
    emitter = store_metrics.configure("statsd", host="127.0.0.1", port=udp_receiver.port, flush_interval=60)
    store = store_metrics.instrument_task_store(FakeTaskStore(), emitter, TAGS)
    store.get("job_id")
    store.set("job_id", "abc")
    assert emitter.flush(5.0)
    lines = udp_receiver.wait_for_lines(2)
    assert sorted(lines) == [
        f"airflow.task_state_store.read_absent,{WIRE_TAGS}:1|c",
        f"airflow.task_state_store.write,{WIRE_TAGS}:1|c",
    ]


#: The nine counters of one wrapper: (outcome, operation of an error).
EVERY_COUNTER = (
    ("read_found", ""),
    ("read_absent", ""),
    ("write", ""),
    ("delete", ""),
    ("clear", ""),
    ("error", "get"),
    ("error", "set"),
    ("error", "delete"),
    ("error", "clear"),
)


def drive_every_counter(store: Any, inner: Any, first: int) -> dict[tuple[str, str], int]:
    """Make each of ``store``'s nine counted calls a different number of times (``first`` on)."""
    times = dict(zip(EVERY_COUNTER, range(first, first + len(EVERY_COUNTER)), strict=True))
    for _ in range(times[("write", "")]):
        store.set("k", 1)
    for _ in range(times[("read_found", "")]):
        assert store.get("k") == 1
    for _ in range(times[("read_absent", "")]):
        assert store.get("missing", "default") == "default"
    for _ in range(times[("delete", "")]):
        store.delete("k")
    for _ in range(times[("clear", "")]):
        store.clear()
    inner.fail = Boom("supervisor said no")
    calls = {
        "get": lambda: store.get("k"),
        "set": lambda: store.set("k", 1),
        "delete": lambda: store.delete("k"),
        "clear": store.clear,
    }
    for operation, call in calls.items():
        for _ in range(times[("error", operation)]):
            with pytest.raises(Boom):
                call()
    inner.fail = None
    return times


def test_every_counter_of_both_wrappers_reaches_a_real_statsd_socket_exactly(
    udp_receiver: UdpReceiver,
) -> None:
    """All eighteen series of a task's two stores go out in one flush, each with its exact total."""
    emitter = store_metrics.configure("statsd", host="127.0.0.1", port=udp_receiver.port, flush_interval=60)
    task_inner = FakeTaskStore()
    task = store_metrics.instrument_task_store(task_inner, emitter, TAGS)
    assets = FakeAssetStores("orders")
    asset = store_metrics.instrument_asset_store(assets, emitter, TAGS)[Asset("orders")]
    expected = []
    for scope, store, inner, first in (
        ("task", task, task_inner, 1),
        ("asset", asset, assets[Asset("orders")], 10),
    ):
        for (outcome, operation), n in drive_every_counter(store, inner, first).items():
            tags = f"{WIRE_TAGS},operation={operation}" if operation else WIRE_TAGS
            expected.append(f"airflow.{scope}_state_store.{outcome},{tags}:{n}|c")
    assert emitter.flush(5.0)
    # Everything the flush sent has arrived once the marker sent after it has.
    assert sorted(udp_receiver.lines_before_marker()) == sorted(expected)
    assert len(expected) == 18


def test_wrappers_made_before_configure_count_nothing() -> None:
    inner = FakeTaskStore()
    before = store_metrics.instrument_task_store(inner, store_metrics.get_emitter(), TAGS)
    emitter = store_metrics.configure("none")  # keeps its counts in memory
    # Calls after configure(), through the wrapper made before it: they reach the store...
    before.set("k", 1)
    assert before.get("k") == 1
    before.delete("k")
    assert inner.data == {}
    assert [name for name, _, _ in inner.calls] == ["set", "get", "delete"]
    # ...and the new emitter counted none of them.
    assert emitter.snapshot() == {}
    # The same calls through a wrapper made after configure() are counted.
    after = store_metrics.instrument_task_store(inner, emitter, TAGS)
    after.set("k", 1)
    assert after.get("k") == 1
    after.delete("k")
    assert emitter.snapshot() == {
        ("task_state_store.write", tuple(TAGS.items())): 1,
        ("task_state_store.read_found", tuple(TAGS.items())): 1,
        ("task_state_store.delete", tuple(TAGS.items())): 1,
    }


# -- a retried attempt: did it resume? ---------------------------------------------------------

RESUMED, NOT_RESUMED = "task_state_store.retry_resumed", "task_state_store.retry_not_resumed"


def retried_store(recorder: MetricsRecorder, inner: Any = None) -> Any:
    return store_metrics.instrument_task_store(inner or FakeTaskStore(), recorder, TAGS, retried=True)


def test_a_retry_that_finds_what_its_first_attempt_saved_counts_resumed_once(
    metrics: MetricsRecorder,
) -> None:
    inner = FakeTaskStore()
    inner.data["job_id"] = "j-1"
    store = retried_store(metrics, inner)
    assert store.get("job_id") == "j-1"
    assert store.get("other") is None  # later reads decide nothing more
    store.set("job_id", "j-2")
    assert store.get("job_id") == "j-2"
    assert metrics.counts() == {
        "task_state_store.read_found": 2,
        "task_state_store.read_absent": 1,
        "task_state_store.write": 1,
        RESUMED: 1,
    }
    assert metrics.value(RESUMED, dag_id="d", task_id="t", run_type="manual", operator="X") == 1


def test_a_retry_whose_first_read_finds_nothing_counts_not_resumed_once(metrics: MetricsRecorder) -> None:
    store = retried_store(metrics)
    assert store.get("job_id", "dflt") == "dflt"
    store.set("job_id", "j-1")
    assert store.get("job_id") == "j-1"  # found now, but the first read decided
    assert metrics.counts() == {
        "task_state_store.read_absent": 1,
        "task_state_store.write": 1,
        "task_state_store.read_found": 1,
        NOT_RESUMED: 1,
    }


def test_a_first_read_that_raises_decides_nothing_the_next_answered_read_does(
    metrics: MetricsRecorder,
) -> None:
    inner = FakeTaskStore()
    inner.data["job_id"] = "j-1"
    store = retried_store(metrics, inner)
    inner.fail = Boom("supervisor down")
    with pytest.raises(Boom):
        store.get("job_id")
    assert metrics.counts() == {"task_state_store.error": 1}
    inner.fail = None
    assert store.get("job_id") == "j-1"
    assert metrics.counts() == {"task_state_store.error": 1, "task_state_store.read_found": 1, RESUMED: 1}


def test_a_retry_that_never_reads_and_a_first_try_count_neither(metrics: MetricsRecorder) -> None:
    retried = retried_store(metrics)
    retried.set("k", 1)
    retried.delete("k")
    retried.clear()
    first_try = task_store(metrics)
    first_try.get("k")
    assert RESUMED not in metrics.counts() and NOT_RESUMED not in metrics.counts()
    # A first try keeps the plain wrapper and its one-add get.
    assert type(first_try).get is accessors.InstrumentedStore.get
    assert type(retried).get is not accessors.InstrumentedStore.get


def test_a_retried_async_store_decides_at_its_first_answered_aget(metrics: MetricsRecorder) -> None:
    inner = FakeAsyncTaskStore()
    store = retried_store(metrics, inner)

    async def story() -> None:
        assert await store.aget("cursor") is None
        await store.aset("cursor", 3)
        assert await store.aget("cursor") == 3
        assert store.get("cursor") == 3

    asyncio.run(story())
    assert metrics.value(NOT_RESUMED) == 1 and metrics.value(RESUMED) == 0


def test_a_retried_sync_only_store_gets_no_async_methods(metrics: MetricsRecorder) -> None:
    store = retried_store(metrics)
    assert not hasattr(store, "aget") and not hasattr(store, "aset")
    assert isinstance(store, FakeTaskStore)


def test_reads_at_once_from_many_threads_decide_exactly_once(metrics: MetricsRecorder) -> None:
    import threading

    inner = FakeTaskStore()
    inner.data["k"] = 1
    store = retried_store(metrics, inner)
    start = threading.Barrier(8)

    def read() -> None:
        start.wait()
        for _ in range(200):
            store.get("k")

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert metrics.counts() == {"task_state_store.read_found": 1600, RESUMED: 1}


def test_concurrent_agets_decide_exactly_once(metrics: MetricsRecorder) -> None:
    inner = FakeAsyncTaskStore()
    inner.data["k"] = 1
    store = retried_store(metrics, inner)

    async def story() -> None:
        await asyncio.gather(*(store.aget("k") for _ in range(50)))

    asyncio.run(story())
    assert metrics.counts() == {"task_state_store.read_found": 50, RESUMED: 1}


def test_copies_of_a_retried_store_share_its_one_decision(metrics: MetricsRecorder) -> None:
    inner = FakeTaskStore()
    store = retried_store(metrics, inner)
    clones = [copy.copy(store), copy.deepcopy(store)]
    assert clones[0].get("k") is None
    for wrapper in (store, *clones):
        wrapper.set("k", 1)
        wrapper.get("k")
    assert metrics.value(NOT_RESUMED) == 1 and metrics.value(RESUMED) == 0
