"""pytest plugin that ``scripts/matrix`` loads (``-p support.matrix_plugin``) for each Airflow release.

Expected failures on a release, each naming the exception it expects (``raises=``) and why. They
are ``strict``: a test listed here that starts to pass on that release (made version-aware by its
author) fails the run as ``XPASS(strict)``, and one that fails with another exception fails as
usual, so this list cannot go stale silently.

* Airflow 3.3.0 and 3.3.1 (Task SDK 1.3.0, 1.3.1) have no async asset store accessors
  (``aget/aset/adelete/aclear`` on ``AssetStateStoreAccessor(s)``): 3.3.2 added them. The tests in
  ``NEED_ASYNC_ASSET_STORE`` use them (directly, or through triggers that call ``aget``): the
  call raises ``AttributeError``; the shape test's comparison with the installed classes fails its
  ``assert``.

Airflow 3.4 needs no entry: every test runs as is (tests that only apply to one series say so with
their own ``skip``). Decided from the installed Task SDK's version, without importing Airflow in the
pytest process.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import pytest

#: The Task SDK release that added the async asset store accessors (Airflow 3.3.2).
ASYNC_ASSET_STORE_SINCE = (1, 3, 2)

#: Their test triggers read and write the asset store with aget/aset: the call raises AttributeError.
_TRIGGERS_USING_AGET = (
    "test_a_watchers_calls_are_counted_exactly_with_the_watcher_tags",
    "test_an_exception_from_the_store_reaches_the_trigger_unchanged_and_counts_as_error",
    "test_airflows_error_answer_raises_airflows_error_and_counts_as_error",
    "test_with_no_emitter_configured_triggers_keep_their_own_store",
    "test_a_store_that_cannot_be_replaced_leaves_the_trigger_running_with_one_log_line",
    "test_an_airflow_without_the_hook_points_gets_one_log_line_and_triggers_run_as_usual",
)
#: node id -> the exception the test fails with where the async asset accessors are missing.
NEED_ASYNC_ASSET_STORE: dict[str, type[BaseException]] = {
    # Its fakes have 3.3.2's asset accessor shape (with aget/aset/adelete/aclear): the comparison fails.
    "tests/airflow/test_accessor_shapes.py::test_fakes_have_the_shape_of_airflows_accessors": AssertionError,
    **{f"tests/airflow/test_triggerer.py::{name}": AttributeError for name in _TRIGGERS_USING_AGET},
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
    for item in items:
        raises = NEED_ASYNC_ASSET_STORE.get(item.nodeid)
        if raises is None:
            continue
        reason = (
            f"Task SDK {'.'.join(map(str, sdk))} has no async asset store accessors "
            f"(aget/aset/adelete/aclear came with Airflow 3.3.2); this test uses them: "
            f"{raises.__name__} expected"
        )
        item.add_marker(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
