"""The pipeline's files are checked for the default prefix (the repository's copy) and for another."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.exported import OTHER_PREFIX, Exported


@pytest.fixture(scope="session")
def custom(exported: Exported) -> Path:
    """What ``store-metrics export --prefix myco.airflow`` writes (the session's one export of it)."""
    return exported(OTHER_PREFIX)
