"""The accessor fakes of the unit tests and the Protocols that say what an accessor is
(``store_metrics.counting.stores``) have the shape of the installed Airflow's accessors, and the
wrappers of the real classes pass ``isinstance``, ``==``, ``hash`` and ``repr`` through.

Run on every Airflow release of the matrix (``scripts/matrix``): the Task SDK's accessors are what
changes between releases (1.4 added async methods to the task accessor).
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from store_metrics.counting import stores
from support.fake_accessors import FakeAssetStore, FakeAssetStores, FakeAsyncTaskStore, FakeTaskStore

pytestmark = pytest.mark.airflow

_REAL_SHAPES = textwrap.dedent(
    """
    import inspect, json, uuid
    from airflow.sdk._shared.state import TaskScope
    from airflow.sdk.execution_time.context import (
        AssetStateStoreAccessor, AssetStateStoreAccessors, TaskStateStoreAccessor)
    import store_metrics
    from store_metrics.counting import accessors
    from store_metrics.testing import MetricsRecorder

    def shape(cls):
        params = lambda f: [[p.name, p.kind.name] for p in inspect.signature(f).parameters.values()]
        return {name: params(getattr(cls, name))
                for name in ("get", "set", "delete", "clear", "aget", "aset", "adelete", "aclear",
                             "_clear_backend_only", "__getitem__")
                if hasattr(cls, name)}

    rec = MetricsRecorder()
    tags = {"dag_id": "d", "task_id": "t", "run_type": "manual", "operator": "X"}
    ti = uuid.uuid4()
    real_task = TaskStateStoreAccessor(ti, TaskScope(dag_id="d", run_id="r", task_id="t"))
    task = store_metrics.instrument_task_store(real_task, rec, tags)
    real_asset = AssetStateStoreAccessor(name="orders")
    asset = store_metrics.instrument_asset_store(real_asset, rec, tags)
    real_map = AssetStateStoreAccessors(inlets=[], outlets=[])
    mapping = store_metrics.instrument_asset_store(real_map, rec, tags)
    print(json.dumps({
        "shapes": {c.__name__: shape(c)
                   for c in (TaskStateStoreAccessor, AssetStateStoreAccessor, AssetStateStoreAccessors)},
        "task": [isinstance(task, TaskStateStoreAccessor), task == real_task, real_task == task,
                 hash(task) == hash(real_task), repr(task) == repr(real_task),
                 hasattr(task, "aget"), callable(task._clear_backend_only)],
        "asset": [isinstance(asset, AssetStateStoreAccessor), asset == real_asset,
                  [hasattr(asset, m) for m in ("aget", "aset", "adelete", "aclear")]],
        "mapping": [isinstance(mapping, AssetStateStoreAccessors), repr(mapping) == repr(real_map),
                    type(mapping).__name__],
    }))
    """
)


_ASYNC = ("aget", "aset", "adelete", "aclear")


def _fake_shape(cls: type) -> dict[str, list[list[str]]]:
    names = ("get", "set", "delete", "clear", "aget", "aset", "adelete", "aclear", "_clear_backend_only")
    return {
        n: [[p.name, p.kind.name] for p in inspect.signature(getattr(cls, n)).parameters.values()]
        for n in (*names, "__getitem__")
        if hasattr(cls, n)
    }


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The installed Airflow's accessors: their methods' shapes, and how their wrappers behave."""
    pytest.importorskip("airflow.sdk")
    # A fresh process (importing Airflow reconfigures logging, which other tests read), with an
    # Airflow home of its own.
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path_factory.mktemp("airflow_home"))}
    command = [sys.executable, "-c", _REAL_SHAPES]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_protocols_say_what_airflows_accessors_are(real: dict[str, Any]) -> None:
    """Each Protocol's methods are the SDK class's, parameter for parameter (the SDK's may add
    keyword-only ones with a default: the task store's ``retention``); mypy checks the types against
    the Airflow it runs with, this every release of the matrix."""
    task_async = "aget" in real["shapes"]["TaskStateStoreAccessor"]
    task_protocol = stores.AsyncStateStore if task_async else stores.StateStore
    # Task SDK 1.3.0 and 1.3.1 (Airflow 3.3.0, 3.3.1) have no async asset accessors: there the
    # Protocols' sync methods are compared, and the wrappers add no async method either.
    asset_async = "aget" in real["shapes"]["AssetStateStoreAccessor"]
    left_out = () if asset_async else _ASYNC
    for protocol, sdk_class, skip in (
        (task_protocol, "TaskStateStoreAccessor", ()),
        (stores.AsyncStateStore, "AssetStateStoreAccessor", left_out),
        (stores.AssetStores, "AssetStateStoreAccessors", left_out),
    ):
        sdk = real["shapes"][sdk_class]
        shape = {name: found for name, found in _fake_shape(protocol).items() if name not in skip}
        for name, parameters in shape.items():
            assert name in sdk, (sdk_class, name)
            extra = sdk[name][len(parameters) :]
            assert sdk[name][: len(parameters)] == parameters, (sdk_class, name)
            assert all(kind == "KEYWORD_ONLY" for _, kind in extra), (sdk_class, name, extra)
    assert real["shapes"]["TaskStateStoreAccessor"]["set"][-1] == ["retention", "KEYWORD_ONLY"]


def test_fakes_have_the_shape_of_airflows_accessors(real: dict[str, Any]) -> None:
    # Same methods, same parameter names and kinds (annotations differ: no Airflow types here).
    # The task accessor is sync only up to Task SDK 1.3; 1.4 (Airflow 3.4) adds the async four.
    task_async = "aget" in real["shapes"]["TaskStateStoreAccessor"]
    fake_task = FakeAsyncTaskStore if task_async else FakeTaskStore
    assert _fake_shape(fake_task) == real["shapes"]["TaskStateStoreAccessor"]
    assert _fake_shape(FakeAssetStore) == real["shapes"]["AssetStateStoreAccessor"]
    assert _fake_shape(FakeAssetStores) == real["shapes"]["AssetStateStoreAccessors"]
    # Wrapping the real classes: isinstance, ==, hash, repr pass through; the task accessor's
    # wrapper has aget exactly when the accessor has; the asset accessor has all four.
    assert real["task"] == [True, True, True, True, True, task_async, True]
    assert real["asset"] == [True, True, [True, True, True, True]]
    assert real["mapping"] == [True, True, "InstrumentedAsyncAssetMapping"]
