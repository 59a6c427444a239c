"""pytest plugin that ``scripts/matrix`` loads (``-p support.run_summary``) to learn how a run ended.

At the end of the session it writes pytest's own counts (the ones its summary line shows: passed,
failed, skipped, deselected, xfailed, xpassed, warnings, errors) and its exit status as JSON to the
file ``STORE_METRICS_RUN_SUMMARY`` names, so the matrix reads a structured result instead of
pytest's text. Under pytest-xdist only the controller writes it (its counts are the workers' added
up). Without the variable this plugin does nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ENV = "STORE_METRICS_RUN_SUMMARY"
#: pytest's stats keys, as its summary line words them.
_WORDS = {"error": "errors"}


def counts(terminalreporter: pytest.TerminalReporter) -> dict[str, int]:
    """The numbers of pytest's summary line: reports per outcome, as pytest counts them (a test
    whose setup and call both report counts once; its ``count_towards_summary``)."""
    got: dict[str, int] = {}
    for key, reports in terminalreporter.stats.items():
        if not key:  # setup/teardown reports of passing tests
            continue
        number = sum(1 for report in reports if getattr(report, "count_towards_summary", True))
        if number:
            got[_WORDS.get(key, key)] = number
    return got


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    path = os.environ.get(ENV)
    if not path or hasattr(config, "workerinput"):
        return
    summary = {"exitstatus": int(exitstatus), "counts": counts(terminalreporter)}
    Path(path).write_text(json.dumps(summary, sort_keys=True) + "\n")
