"""Airflow's official Helm chart, where a checkout of it is given (it may not be committed or fetched).

``STORE_METRICS_AIRFLOW_CHART`` names the ``chart/`` folder of an apache/airflow checkout; without
it the tests that render the chart skip and say so (the ``chart`` fixture, ``tests/conftest.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

CHART_ENV = "STORE_METRICS_AIRFLOW_CHART"


def chart_folder() -> Path:
    """The chart/ folder of an apache/airflow checkout, or a skip that says why there is none."""
    where = os.environ.get(CHART_ENV)
    if not where:
        pytest.skip(
            f"Airflow's Helm chart is not in this repository (fetched files may not be committed, and "
            f"CI cannot download it): set {CHART_ENV} to the chart/ folder of an apache/airflow checkout"
        )
    folder = Path(where)
    assert (folder / "Chart.yaml").is_file(), f"{CHART_ENV}={where} is not a chart folder"
    return folder


def rendered_documents(text: str) -> list[dict[str, Any]]:
    """The objects ``helm template`` printed."""
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def pods(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod templates of the rendered Deployments and StatefulSets."""
    return [d["spec"]["template"] for d in documents if d.get("kind") in ("Deployment", "StatefulSet")]
