"""promtool (Debian's prometheus package, or a pinned build of ``testbed.peers``), for the tests
that check rules and configs and run rule tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testbed import peers
from testbed.repository import ROOT

COLLECTOR = ROOT / "collector"


def promtool(
    *args: str, cwd: Path = COLLECTOR, role: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``promtool <args>`` in ``cwd``: Debian's, or the pin playing ``role`` (``newest``, ``lts``,
    ``minimum``); the test fails when it is not installed."""
    if role is not None:
        try:
            path: str | None = str(peers.binary("promtool", role))
        except peers.PeerMissing as missing:
            pytest.fail(str(missing))
    else:
        path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed (Debian: apt-get install -y prometheus)")
    return subprocess.run(
        [path, *args], cwd=cwd, check=False, capture_output=True, text=True, timeout=timeout
    )


def promtool_each(
    runs: Sequence[tuple[str | None, tuple[str, ...]]], cwd: Path, timeout: float = 600
) -> list[subprocess.CompletedProcess[str]]:
    """``promtool`` once per ``(role, args)``, as many at once as the machine has cores: a
    rule test file keeps one core busy for 2-60 s, and a settings row runs up to twelve of them."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = [pool.submit(promtool, *args, cwd=cwd, role=role, timeout=timeout) for role, args in runs]
        return [future.result() for future in futures]


def assert_unit_tests_catch(
    mutation: tuple[str, str], rules: str, tmp_path: Path, *others: str, every: bool = True
) -> None:
    """The rule file ``rules`` (from collector/) with ``mutation``'s old text replaced by its new one
    is still valid, and its promtool unit tests (``<name>.test.yml``, with the rule files ``others``
    they load too) fail on an expected value, not on loading."""
    old, new = mutation
    text = (COLLECTOR / rules).read_text()
    assert old in text, f"the mutation no longer applies to {rules}: {old!r}"
    (tmp_path / rules).write_text(text.replace(old, new) if every else text.replace(old, new, 1))
    tests = rules.replace(".yml", ".test.yml")
    for name in (tests, *others):
        shutil.copy(COLLECTOR / name, tmp_path / name)
    checked = promtool("check", "rules", rules, cwd=tmp_path)
    assert checked.returncode == 0, f"the mutant must be valid: {checked.stdout}{checked.stderr}"
    result = promtool("test", "rules", tests, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "exp:" in output, f"promtool test rules passed the mutant: {output}"
