"""Smoke test of the benchmark page's API server section (section 4): it runs and prints its tables.

No timing is asserted here; the verdicts are on the page (``python -m benchmarks``).
"""

from __future__ import annotations

import pytest

from support.bench import run_quick_section, verdicts


@pytest.mark.timeout(120)
def test_quick_server_section_runs_and_prints_its_tables() -> None:
    out = run_quick_section("server", timeout=110)
    for heading in (
        "## 4. API server side: route metrics middleware and stall monitor",
        "### Per request, in process",
        "### The stall monitor",
        "### Over HTTP, the proposal's method",
    ):
        assert heading in out
    assert "| other request (pass-through) |" in out and "| state store request (task get) |" in out
    assert "| 10 ms (default) |" in out
    for row in ("| GET | 0.4 KB |", "| PUT | 58.9 KB |", "| DELETE | - |"):
        assert row in out
    assert verdicts(out).count("| 4. ") == 5
    # Every state store request of the run was counted by the middleware (3 warm + 1 cold, 5 cases).
    assert "The instrumented server counted 20 state store requests." in out
