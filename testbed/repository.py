"""Where the repository is, and the ``PYTHONPATH`` that lets a fresh process find the test bed.

Tests and benchmarks run from the repository root with it on ``sys.path`` (pytest's
``pythonpath``, ``python -m benchmarks``); a process they start (an Airflow component, a probe, a
feeder) gets the same through ``python_path``, never by editing ``sys.path`` itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The test suite's folder: its ``support`` package, and what the tests deploy into Airflow.
TESTS = ROOT / "tests"


def python_path(*first: Path, environ: Mapping[str, str] | None = None) -> str:
    """``first``, the repository root and ``tests/``, then whatever ``PYTHONPATH`` already says."""
    env = os.environ if environ is None else environ
    parts = [*map(str, first), str(ROOT), str(TESTS), env.get("PYTHONPATH", "")]
    return os.pathsep.join(p for p in parts if p)
