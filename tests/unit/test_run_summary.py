"""CI's recap (scripts/matrix) is read from the JSON each pytest run writes (support.run_summary),
not from pytest's text: the counts are pytest's own, with or without pytest-xdist, and a failed
static check or test makes the matrix exit non-zero with the recap naming it. And the order CI runs
things in: the newest release's whole-Airflow tests once, beside the peers pass."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

STORY = """
import pytest

def test_passes():
    pass

def test_fails():
    assert 1 == 2

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass

@pytest.mark.xfail(strict=True, raises=ZeroDivisionError)
def test_expected_to_fail():
    1 / 0

def test_left_out():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("setup")

def test_with_a_broken_fixture(broken):
    pass
"""


def matrix() -> Any:
    """scripts/matrix, loaded by path (it has no .py suffix; Any: its names are read as attributes)."""
    path = ROOT / "scripts" / "matrix"
    loader = importlib.machinery.SourceFileLoader("store_metrics_matrix", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # its dataclasses look their module up there
    loader.exec_module(module)
    return module


def run_story(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    (tmp_path / "test_story.py").write_text(STORY)
    summary = tmp_path / "summary.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
        "STORE_METRICS_RUN_SUMMARY": str(summary),
    }
    got = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "support.run_summary", "-p", "no:cacheprovider",
         "-k", "not left_out", "-q", "--rootdir", str(tmp_path), "-c", os.devnull, *extra, "test_story.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert summary.exists(), got.stdout + got.stderr
    return got, json.loads(summary.read_text())


@pytest.mark.parametrize(
    ("workers", "line"),
    [
        ([], "1 failed, 1 passed, 1 skipped, 1 deselected, 1 xfailed, 1 error in"),
        # Under xdist the workers deselect: pytest's line has no deselected, nor has the file.
        (["-n", "2"], "1 failed, 1 passed, 1 skipped, 1 xfailed, 1 error in"),
    ],
    ids=["one process", "two xdist workers"],
)
def test_the_summary_file_has_the_counts_of_pytests_summary_line(
    tmp_path: Path, workers: list[str], line: str
) -> None:
    got, written = run_story(tmp_path, *workers)
    counts = {"passed": 1, "failed": 1, "skipped": 1, "xfailed": 1, "errors": 1}
    if not workers:
        counts["deselected"] = 1
    assert written == {"exitstatus": 1, "counts": counts}
    assert line in got.stdout.splitlines()[-1]
    # The matrix writes the line pytest wrote, from those counts alone.
    assert matrix().pytest_line(counts, 1.5, pad=False) == f"{line} 1.50s"


def test_a_failed_check_fails_the_matrix_and_the_recap_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    m = matrix()
    m.CHECKS = (
        ("a clean check", ["python", "-c", "pass"], "pyproject.toml"),
        ("a check with a finding", ["python", "-c", "raise SystemExit(1)"], "pyproject.toml"),
        ("a check whose tool is gone", ["python", "-c", "pass"], "no/such/file"),
    )
    runs = m.Runs()
    m.static_checks(runs, Path(sys.executable))
    tests = m.Outcome(0, {"passed": 3}, 2.0)
    runs.add("airflow 3.3.1 not peers", 40.0, tests)

    assert m.report(runs, 0.0) is True
    recap = [line for line in capsys.readouterr().out.splitlines() if line.startswith("matrix: ")]
    assert [line.split()[1:3] for line in recap[-4:-1]] == [
        ["ok", "check:"],
        ["FAIL", "check:"],
        ["ok", "airflow"],
    ]
    assert recap[-1] == "matrix: failed: check: a check with a finding"
    assert not any("whose tool is gone" in line for line in recap)
    assert runs.total == {"passed": 3, "errors": 1}


def test_a_run_that_selects_nothing_is_no_line_and_no_failure() -> None:
    m = matrix()
    runs = m.Runs()
    runs.add("airflow 3.3.0 peers", 0.0, m.Outcome(5, {"deselected": 97}, 4.0))
    assert runs.results == []
    assert m.report(runs, 0.0) is False


def test_ci_runs_the_newest_releases_whole_airflow_tests_once_beside_the_peers_pass(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`scripts/matrix --main`: 3.4's whole-Airflow tests, both marks in one run at nice 10, start
    while .venv's peer tests run (the peer run waits for them to start, bounded), and none runs
    after a pass; the quick tests still run in each pass."""
    m = matrix()
    newest = Path("/nowhere/.venv-airflow-3.4.0b2/bin/python")
    started_beside = threading.Event()
    runs: list[tuple[str, tuple[str, ...], str, int, bool]] = []

    def fake_pytest(python: Path, args: list[str], opts: list[str], nice: int = 0, keep: bool = False) -> Any:
        marks = opts[opts.index("-m") + 1] if "-m" in opts else ""
        where = "newest" if python == newest else ".venv"
        runs.append((where, tuple(args), marks, nice, keep))
        if where == "newest" and tuple(args) == tuple(m.WHOLE_AIRFLOW_TESTS):
            started_beside.set()
        if where == ".venv" and marks == "peers":
            # The peers pass ends only once the whole-Airflow run beside it has started.
            assert started_beside.wait(30), "the whole-Airflow tests did not start beside the peers pass"
        return m.Outcome(0, {"passed": 1}, 0.1), ""

    monkeypatch.setattr(m, "pytest", fake_pytest)
    monkeypatch.setattr(m, "installed_airflow", lambda python: ("3.3.2", ""))
    monkeypatch.setattr(m, "install_all", lambda runs, versions: [("3.4.0b2", newest, 1.0)])
    monkeypatch.setattr(m, "wait_for_the_peers", lambda: 0.0)
    monkeypatch.setattr(m, "python_version", lambda python: "3.12")
    monkeypatch.delenv("STORE_METRICS_SIDE_LANE", raising=False)
    monkeypatch.delenv("STORE_METRICS_TEST_WORKERS", raising=False)

    assert m.main(["--main", "3.4.0b2"]) == 0

    whole = [run for run in runs if run[1] == tuple(m.WHOLE_AIRFLOW_TESTS)]
    assert whole == [("newest", tuple(m.WHOLE_AIRFLOW_TESTS), "", m.WHOLE_BESIDE_NICE, True)]
    quick = [run[2] for run in runs if run[1] == tuple(m.QUICK_TESTS)]
    assert quick[0] == "not peers"
    recap = [line for line in capsys.readouterr().out.splitlines() if line.startswith("matrix: ok ")]
    # One recap line for them, with no mark after "whole": both passes' tests in one run.
    assert [line.split()[2:6] for line in recap if "3.4.0b2 whole" in line] == [
        ["airflow", "3.4.0b2", "whole", "install"]
    ]
