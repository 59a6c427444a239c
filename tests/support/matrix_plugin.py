"""pytest plugin that ``scripts/matrix`` loads (``-p support.matrix_plugin``) for each Airflow 3.3 release.

Airflow 3.3.0 and 3.3.1 (Task SDK 1.3.0, 1.3.1) have no async asset store accessors
(``aget/aset/adelete/aclear`` on ``AssetStateStoreAccessor(s)``): 3.3.2 added them. The tests
listed in :data:`NEED_ASYNC_ASSET_STORE` use them (directly, or through triggers that call
``aget``), so on those releases they are marked ``xfail(strict=True)``: they show as
``xfailed`` with the reason, and one that starts to pass there (made version-aware by its
author) fails the run as ``XPASS(strict)``, so this list cannot go stale silently.

Decided from the installed Task SDK's version, without importing Airflow in the pytest process.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import pytest

#: The Task SDK release that added the async asset store accessors (Airflow 3.3.2).
ASYNC_ASSET_STORE_SINCE = (1, 3, 2)

NEED_ASYNC_ASSET_STORE = {
    # Its fakes have 3.3.2's asset accessor shape (with aget/aset/adelete/aclear).
    "tests/test_accessors.py::test_fakes_have_the_shape_of_airflows_accessors",
    # Their test triggers read and write the asset store with aget/aset.
    "tests/test_triggerer.py::test_a_watchers_calls_are_counted_exactly_with_the_watcher_tags",
    "tests/test_triggerer.py::test_an_exception_from_the_store_reaches_the_trigger_unchanged_and_counts_as_error",
    "tests/test_triggerer.py::test_airflows_error_answer_raises_airflows_error_and_counts_as_error",
    "tests/test_triggerer.py::test_with_no_emitter_configured_triggers_keep_their_own_store",
    "tests/test_triggerer.py::test_a_store_that_cannot_be_replaced_leaves_the_trigger_running_with_one_log_line",
    "tests/test_triggerer.py::test_an_airflow_without_the_hook_points_gets_one_log_line_and_triggers_run_as_usual",
}


def task_sdk_version() -> tuple[int, ...]:
    try:
        text = version("apache-airflow-task-sdk")
    except PackageNotFoundError:
        return ()
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    sdk = task_sdk_version()
    if not sdk or sdk >= ASYNC_ASSET_STORE_SINCE:
        return
    reason = (
        f"Task SDK {'.'.join(map(str, sdk))} has no async asset store accessors "
        "(aget/aset/adelete/aclear came with Airflow 3.3.2); this test uses them"
    )
    for item in items:
        if item.nodeid in NEED_ASYNC_ASSET_STORE:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
