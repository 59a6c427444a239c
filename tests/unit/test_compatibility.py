"""Which Airflow releases store-metrics calls supported and tested
(store_metrics.integration.compatibility)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from store_metrics.integration import compatibility
from testbed.repository import ROOT

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
    assert all(compatibility.is_supported(r) for r in compatibility.TESTED)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert pyproject.count(f"apache-airflow[statsd]{compatibility.SUPPORTED}") == 2
    assert f"apache-airflow[celery]{compatibility.SUPPORTED}" in pyproject
    assert "<3.4" not in pyproject


def test_an_airflow_that_does_not_load_costs_one_line_not_the_check() -> None:
    """Airflow imports OpenTelemetry; with it unimportable, Airflow cannot load: one line, no crash."""
    code = (
        "import json, sys; sys.modules['opentelemetry'] = None\n"
        "from store_metrics.integration import compatibility\n"
        "print(json.dumps(compatibility.report()))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    release, problem = json.loads(proc.stdout.splitlines()[-1])
    assert release == compatibility.describe_version(compatibility.airflow_version())
    assert problem.startswith(
        "airflow: cannot tell what counts on it, it does not load here: ModuleNotFoundError"
    )
