"""``store-metrics export``, run as a user runs it, into a folder a test owns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def export_files(out: Path, prefix: str | None = None, cwd: Path | None = None) -> Path:
    """``store-metrics export --out OUT [--prefix PREFIX]`` in a fresh interpreter; returns ``out``."""
    done = subprocess.run(
        [sys.executable, "-m", "store_metrics.commands.cli", "export", "--out", str(out)]
        + ([] if prefix is None else ["--prefix", prefix]),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out
