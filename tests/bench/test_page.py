"""The benchmark page is one writer's render of the saved results, and its verdicts follow one rule.

``docs/performance.md`` is written only by ``python -m benchmarks`` from ``benchmarks/results.json``:
a hand edit, a stale page or a section measured but not saved shows up here. No timing is asserted.
Like every test of the benchmarks (``tests/bench/``) they may use the benchmarks' modules, which
the product's tests never import.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.report import generic
from benchmarks.report.page import render
from benchmarks.report.targets import Verdict, judge, judge_ratio
from benchmarks.results import RESULTS, Results, load
from benchmarks.sections import SECTIONS, Section

REPO = Path(__file__).resolve().parent.parent.parent
PAGE = REPO / "docs" / "performance.md"


def test_the_page_is_the_render_of_the_saved_results() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(load())


def test_every_section_is_saved_from_a_full_run_and_on_the_page_in_registry_order() -> None:
    saved = load()["sections"]
    assert list(saved) == [s.name for s in SECTIONS]
    assert {name: s["run"]["mode"] for name, s in saved.items()} == {s.name: "full" for s in SECTIONS}
    page = PAGE.read_text(encoding="utf-8")
    headings = [line for line in page.splitlines() if line.startswith("## ") and line[3].isdigit()]
    numbered = [h.split(".")[0] for h in headings]
    assert numbered == [f"## {n}" for n in range(1, len(numbered) + 1)] and len(numbered) >= 10


def test_one_rule_met_then_not_resolved_when_the_a_a_spread_covers_the_gap_else_missed() -> None:
    assert judge(True, gap=5.0, noise=1.0) is Verdict.MET
    assert judge(False, gap=0.068, noise=0.084) is Verdict.NOT_RESOLVED
    assert judge(False, gap=0.2, noise=0.084) is Verdict.MISSED
    assert judge(False, gap=0.2, noise=0.084, interval_reaches=True) is Verdict.NOT_RESOLVED
    assert judge(False) is Verdict.MISSED  # no A/A arm: met or missed
    # A throughput ratio of 0.932 where two identical blocks of the same run differ by 1.084x.
    assert judge_ratio(0.932, met=False, spread=1.084) is Verdict.NOT_RESOLVED
    assert judge_ratio(0.900, met=False, spread=1.084) is Verdict.MISSED
    assert judge_ratio(0.932, met=False, spread=math.nan) is Verdict.MISSED


def test_a_section_without_a_renderer_of_its_own_shows_its_title_and_figures() -> None:
    section = Section("ui", "benchmarks.ui:run", title="10. The UI")
    results = Results(
        environment={},
        sections={
            "ui": {
                "run": {
                    "date": "",
                    "mode": "quick",
                    "seconds": 1.0,
                    "load_start": "",
                    "load_end": "",
                    "code": "-",
                },
                "data": {"page_ms": 12.5, "assets": {"js_bytes": 2048}},
            }
        },
    )
    text = generic.render(results, section).text
    assert text.startswith("## 10. The UI\n\n| figure | value |")
    assert "| page_ms | 12.500 |" in text and "| assets.js_bytes | 2048 |" in text


def test_measuring_one_section_keeps_the_others_and_rewrites_the_whole_page(tmp_path: Path) -> None:
    results, page = tmp_path / "results.json", tmp_path / "performance.md"
    shutil.copy(RESULTS, results)
    command = [sys.executable, "-m", "benchmarks", "--quick", "--only", "roundtrip"]
    proc = subprocess.run(
        [*command, "--results", str(results), "--output", str(page)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = json.loads(results.read_text(encoding="utf-8"))
    before = load()["sections"]
    assert saved["sections"]["roundtrip"]["data"]["reason"] == "quick mode"
    assert {k: v for k, v in saved["sections"].items() if k != "roundtrip"} == {
        k: v for k, v in before.items() if k != "roundtrip"
    }
    assert page.read_text(encoding="utf-8") == render(saved) == proc.stdout
    assert "not measured in this run (quick mode)" in proc.stdout


def test_a_scale_run_whose_rules_recorded_less_than_they_read_says_so() -> None:
    """A loaded run once showed 0 recorded series at every size with nothing said: the page now
    names the sizes where the recording group recorded fewer series than it read."""
    from benchmarks.report.scale import peers

    results = load()
    assert "recorded fewer series than it read" not in peers(results).text
    evaluated = results["sections"]["scale_peers"]["data"]["evaluated"]
    evaluated[0]["recorded_series"], evaluated[0]["failures"] = 0, 2
    text = peers(results).text
    dags, series = evaluated[0]["dags"], evaluated[0]["series"]
    said = f"recorded fewer series than it read at {dags:,} DAGs (0 of {series:,}; 2 failed evaluations)"
    assert said in text
