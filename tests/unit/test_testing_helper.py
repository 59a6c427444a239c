"""``store_metrics.testing.capture_metrics()``: what a user asserts in their own DAG tests."""

from __future__ import annotations

import threading

import pytest

import store_metrics
from store_metrics import catalogue
from store_metrics.contracts import NullEmitter
from store_metrics.testing import MetricsRecorder, capture_metrics
from support.stores import DictStore
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until


def run_task(dag_id: str, task_id: str, store: DictStore) -> None:
    """What the plugin does at a task's start, then the task's own code: submit a job once."""
    tags = catalogue.task_tags(dag_id=dag_id, task_id=task_id, run_type="manual", operator="PythonOperator")
    state = store_metrics.instrument_task_store(store, store_metrics.get_emitter(), tags)
    if state.get("job_id") is None:
        state.set("job_id", "job-1")


def test_the_documented_example() -> None:
    store = DictStore()
    with capture_metrics() as metrics:
        run_task("my_dag", "submit", store)
    assert metrics.value("task_state_store.read_absent", task_id="submit") == 1
    assert metrics.counts(dag_id="my_dag") == {"task_state_store.read_absent": 1, "task_state_store.write": 1}


def test_a_retry_finds_the_job_and_writes_nothing() -> None:
    store = DictStore()
    with capture_metrics() as metrics:
        run_task("my_dag", "submit", store)
        run_task("my_dag", "submit", store)
    assert metrics.counts(task_id="submit") == {
        "task_state_store.read_absent": 1,
        "task_state_store.write": 1,
        "task_state_store.read_found": 1,
    }
    assert metrics.value("task_state_store.write", task_id="other") == 0
    assert metrics.value("task_state_store.delete") == 0


def test_series_are_keyed_by_name_and_tags() -> None:
    with capture_metrics() as metrics:
        run_task("my_dag", "submit", DictStore())
        run_task("other_dag", "submit", DictStore())
    tags = (
        ("dag_id", "my_dag"),
        ("task_id", "submit"),
        ("run_type", "manual"),
        ("operator", "PythonOperator"),
    )
    series = metrics.series()
    assert series[("task_state_store.write", tags)] == 1
    assert len(series) == 4
    assert metrics.counts() == {"task_state_store.read_absent": 2, "task_state_store.write": 2}


def test_tag_values_match_after_the_same_rule_the_backends_apply() -> None:
    with capture_metrics() as metrics:
        run_task("my dag: nightly", "submit", DictStore())
        run_task("donn\u00e9es_2024", "submit", DictStore())
    assert metrics.value("task_state_store.write", dag_id="my dag: nightly") == 1
    assert metrics.value("task_state_store.write", dag_id="my_dag__nightly") == 0
    assert metrics.value("task_state_store.write", dag_id="my dag") == 0
    assert metrics.value("task_state_store.write", dag_id="donn\u00e9es_2024") == 1
    assert metrics.value("task_state_store.write", dag_id="donn_es_2024") == 0


def test_reset_and_flush() -> None:
    with capture_metrics() as metrics:
        run_task("d", "t", DictStore())
        assert metrics.flush(1.0) is True
        assert metrics.flushes == 1
        metrics.reset()
        assert metrics.counts() == {}
        run_task("d", "t", DictStore())
    assert metrics.counts() == {"task_state_store.read_absent": 1, "task_state_store.write": 1}


def test_the_previous_emitter_is_back_after_the_block_even_on_error() -> None:
    assert isinstance(store_metrics.get_emitter(), NullEmitter)
    seen: list[object] = []

    def failing_test_body() -> None:
        with capture_metrics() as metrics:
            seen.append(store_metrics.get_emitter() is metrics)
            raise RuntimeError("task failed")

    with pytest.raises(RuntimeError, match="task failed"):
        failing_test_body()
    assert seen == [True]
    assert isinstance(store_metrics.get_emitter(), NullEmitter)


def test_nested_blocks_each_see_their_own_calls() -> None:
    with capture_metrics() as outer:
        run_task("d", "outer", DictStore())
        with capture_metrics() as inner:
            run_task("d", "inner", DictStore())
        assert store_metrics.get_emitter() is outer
    assert outer.counts(task_id="inner") == {}
    assert inner.counts(task_id="inner") == {"task_state_store.read_absent": 1, "task_state_store.write": 1}
    assert outer.counts(task_id="outer") == {"task_state_store.read_absent": 1, "task_state_store.write": 1}


def test_nothing_is_sent_while_capturing(udp_receiver: UdpReceiver) -> None:
    emitter = store_metrics.configure("statsd", host="127.0.0.1", port=udp_receiver.port, flush_interval=60)
    with capture_metrics() as metrics:
        run_task("captured", "t", DictStore())
    assert store_metrics.get_emitter() is emitter
    assert metrics.value("task_state_store.write", dag_id="captured") == 1
    run_task("sent", "t", DictStore())
    assert emitter.flush(5.0)
    wait_until(lambda: len(udp_receiver.lines()) >= 2)
    assert all("dag_id=sent" in line for line in udp_receiver.lines())
    assert len(udp_receiver.lines()) == 2


def test_the_recorder_counts_exactly_under_threads() -> None:
    recorder = MetricsRecorder()
    store = store_metrics.instrument_task_store(DictStore(), recorder, {"dag_id": "d"})

    def work() -> None:
        for i in range(5_000):
            store.set("k", i)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert recorder.counts() == {"task_state_store.write": 20_000}
