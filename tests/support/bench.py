"""One section of the benchmark page, run from a test: ``python -m benchmarks --quick --only ...``."""

from __future__ import annotations

import subprocess
import sys

from testbed.repository import ROOT


def run_quick_section(section: str, timeout: float) -> str:
    """The page ``python -m benchmarks --quick --only <section> --no-write`` prints; the command
    must exit 0 within ``timeout`` seconds."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", section, "--no-write"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def verdicts(page: str) -> str:
    """The page's Verdicts table (up to the Environment section)."""
    return page.split("## Verdicts", 1)[1].split("## Environment", 1)[0]
