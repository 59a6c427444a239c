"""``store-metrics export``, run as a user runs it: a fresh process writing into a folder a test owns."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

#: The other metric prefix every shipped file is checked for, besides the default.
OTHER_PREFIX = "myco.airflow"
#: The ``exported`` fixture (``tests/conftest.py``): ``exported(prefix=None, **settings)`` is the
#: folder ``store-metrics export`` wrote for them.
Exported = Callable[..., Path]


def run_export(out: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``store-metrics export --out OUT ARGS`` in a fresh interpreter; not checked."""
    return subprocess.run(
        [sys.executable, "-m", "store_metrics.commands.cli", "export", "--out", str(out), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def export_files(out: Path, prefix: str | None = None, cwd: Path | None = None, **settings: str) -> Path:
    """``store-metrics export --out OUT [--prefix PREFIX] [--set NAME=VALUE ...]``, which must
    succeed; returns ``out``."""
    args = [] if prefix is None else ["--prefix", prefix]
    for name, value in settings.items():
        args += ["--set", f"{name}={value}"]
    done = run_export(out, *args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return out
