"""Smoke test of the benchmarks: the quick mode runs and prints its tables. No timing is asserted.

Speed and memory are judged in ``docs/performance.md`` (``python -m benchmarks``), never here:
this only proves the command still works end to end.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testbed.repository import ROOT

pytestmark = pytest.mark.peers

BACKENDS = ("otel", "dogstatsd", "statsd", "airflow", "none")


@pytest.mark.slow  # about 20 s
@pytest.mark.timeout(180)
def test_quick_benchmarks_run_and_print_their_tables(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--output", str(page)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert page.read_text(encoding="utf-8") == out.rstrip("\n") + "\n"
    for heading in (
        "## Verdicts",
        "## 1. Per-call overhead",
        "## 2. Event-loop stalls",
        "### Memory and cardinality",
        "### Cost of one flush",
        "### Process exit",
        "## 9. Importing the plugin in a task process",
    ):
        assert heading in out
    for backend in BACKENDS:
        assert f"| {backend} | get (found) |" in out  # per-call rows
        assert f"| {backend} | aget | 0.4 KB |" in out  # stall rows
        assert f"| {backend} | aset | 0.4 KB |" in out
    for variant in ("bare", "wrapped"):
        assert f"| {variant} | 0 |" in out  # memory rows
    for backend in BACKENDS:
        assert f"\n| {backend} | " in out.split("### Cost of one flush", 1)[1]  # flush rows
    assert "| statsd, closed UDP port |" in out  # exit-delay rows
    assert "| 1. ≤ 1 µs added per call (otel) |" in out  # verdict rows
    assert "| `store_metrics.integration.plugin` |" in out  # the import cost's module tree
