"""Which Airflow releases store-metrics calls supported and tested (store_metrics.compatibility)."""

from __future__ import annotations

import pytest

from store_metrics import compatibility

TESTED = ", ".join(compatibility.TESTED)


@pytest.mark.parametrize(
    ("release", "supported"),
    [
        ("3.3.0", True),
        ("3.3.2", True),
        ("3.3.10", True),
        ("3.4.0b2", True),
        ("3.4.0", True),
        ("3.4.7rc1", True),
        ("3.3.0rc1", False),  # before 3.3.0
        ("3.2.2", False),
        ("3.5.0b1", False),
        ("3.5.0", False),
        ("4.0.0", False),
        ("main", False),
    ],
)
def test_the_supported_range_is_the_extras_range(release: str, supported: bool) -> None:
    assert compatibility.is_supported(release) is supported


def test_each_release_is_described_as_tested_supported_or_not() -> None:
    assert compatibility.describe_version("3.4.0b2") == (
        f"airflow: apache-airflow 3.4.0b2, a tested release (tested: {TESTED})"
    )
    assert compatibility.describe_version("3.4.1") == (
        f"airflow: apache-airflow 3.4.1, supported (>=3.3.0,<3.5) but not a tested release (tested: {TESTED})"
    )
    assert compatibility.describe_version("3.5.0") == (
        "warning: airflow: apache-airflow 3.5.0 is not supported: store-metrics supports "
        f"apache-airflow>=3.3.0,<3.5 (tested: {TESTED})"
    )
    assert compatibility.describe_version(None).startswith("airflow: not installed in this environment")


def test_every_tested_release_is_supported_and_the_extras_say_the_same_range() -> None:
    from pathlib import Path

    assert all(compatibility.is_supported(r) for r in compatibility.TESTED)
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert pyproject.count(f"apache-airflow[statsd]{compatibility.SUPPORTED}") == 2
    assert f"apache-airflow[celery]{compatibility.SUPPORTED}" in pyproject
    assert "<3.4" not in pyproject
