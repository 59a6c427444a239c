"""promtool (Debian's prometheus package), for the tests that check rules and configs and run rule tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

COLLECTOR = Path(__file__).resolve().parent.parent.parent / "collector"


def promtool(*args: str, cwd: Path = COLLECTOR) -> subprocess.CompletedProcess[str]:
    """``promtool <args>`` in ``cwd``; the test fails when promtool is not installed."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed (Debian: apt-get install -y prometheus)")
    return subprocess.run([path, *args], cwd=cwd, check=False, capture_output=True, text=True, timeout=60)
