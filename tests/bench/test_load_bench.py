"""Smoke test of the load benchmark (section 7): ``--quick --only load`` runs end to end.

Real ``airflow api-server`` processes, a real load generator, real receivers, every fault; only
the durations are short. No timing is asserted (the page judges those, from the full run); what
is asserted is what must hold however busy the machine is: every table is there, and the counts
add up (the server counted exactly what the load generator got back, and nothing twice).

About 90 s on an idle 2-core machine (three API servers with two workers each start, and a
fresh worker's first requests are slow); longer when other jobs share the cores.
"""

from __future__ import annotations

import re

import pytest

from support.bench import run_quick_section, verdicts

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

FAULTS = (
    "DogStatsD receiver down (closed UDP port), then back",
    "OTLP endpoint refuses, then back",
    "OTLP endpoint accepts and never answers, then back",
)


@pytest.mark.timeout(360)
def test_quick_load_section_runs_and_its_counts_add_up() -> None:
    out = run_quick_section("load", timeout=350)
    for heading in (
        "## 7. The API server under sustained load, and faults",
        "### Plugin on vs off",
        "### Exactness under load",
        "### Faults under load",
        "### A worker killed, interleaved",
    ):
        assert heading in out
    # One block per arm and concurrency, alternating: on, off at 8 clients; off, on at 32.
    for row in ("| 1 | on | 8 |", "| 2 | off | 8 |", "| 3 | off | 32 |", "| 4 | on | 32 |"):
        assert row in out
    assert re.search(r"^\| 8 \| [0-9.]+ / [0-9.]+ \|", out, re.MULTILINE)
    assert re.search(r"^\| 32 \| [0-9.]+ / [0-9.]+ \|", out, re.MULTILINE)
    # The server's request counts equal the load generator's, per store/operation/outcome.
    assert "| equal per key | yes | yes |" in out
    rows = {name: _row(out, name) for name in FAULTS}
    for name in ("OTLP endpoint refuses, then back", "OTLP endpoint accepts and never answers, then back"):
        assert "(lost 0, twice 0)" in rows[name], rows[name]  # cumulative: everything, once
    assert "twice 0)" in rows[FAULTS[0]], rows[FAULTS[0]]  # UDP loses, never doubles
    # One round of worker kills: on the plugin-on server, the plugin-off one, and that one again (A/A).
    kills = out.split("### A worker killed, interleaved", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"^\| 1 \| on \| .*twice 0\) \|$", kills, re.MULTILINE), kills  # lost, never doubled
    assert re.search(r"^\| 2 \| off \| ", kills, re.MULTILINE), kills
    assert re.search(r"^\| 3 \| off \(A/A\) \| ", kills, re.MULTILINE), kills
    assert verdicts(out).count("| 7. ") == 18
    assert "| 7. load: server totals = client totals per (store, operation, outcome), every block |" in out


def _row(page: str, name: str) -> str:
    faults = page.split("### Faults under load", 1)[1]
    (row,) = [line for line in faults.splitlines() if line.startswith(f"| {name} |")]
    return row
