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
import yaml

from store_metrics.shipped.settings import seconds
from testbed import peers
from testbed.repository import ROOT

COLLECTOR = ROOT / "collector"


#: How long a promtool run may take: a rule test file keeps a core busy for up to ~20 s on a quiet
#: machine and several times that beside CI's deployments (one run past 60 s failed a CI run);
#: anything else (check config, check rules, query) is quick.
TEST_TIMEOUT = 600.0
OTHER_TIMEOUT = 60.0


def promtool(
    *args: str, cwd: Path = COLLECTOR, role: str | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """``promtool <args>`` in ``cwd``: Debian's, or the pin playing ``role`` (``newest``, ``lts``,
    ``minimum``); the test fails when it is not installed."""
    if timeout is None:
        timeout = TEST_TIMEOUT if args[:1] == ("test",) else OTHER_TIMEOUT
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
    # promtool runs each test group on its own, so a subset of the groups that fails makes the whole
    # file fail: the groups spanning less than a day first (~2 s of rules.test.yml's ~20 s), the
    # whole file only when they all pass.
    quick = short_groups(tmp_path / tests)
    for file in ([quick] if quick else []) + [tests]:
        result = promtool("test", "rules", file, cwd=tmp_path)
        output = result.stdout + result.stderr
        if result.returncode != 0 and "exp:" in output:
            return
    raise AssertionError(f"promtool test rules passed the mutant: {output}")


#: A test group whose evaluations reach this far is a long one (promtool evaluates every rule once
#: per evaluation_interval up to the group's last eval_time).
LONG_GROUP = 12 * 3600


def short_groups(tests: Path) -> str | None:
    """A test file beside ``tests`` with only its groups whose last eval_time is under LONG_GROUP
    (its name), or None when that would be all of them or none."""
    doc = yaml.safe_load(tests.read_text())
    groups = doc["tests"]

    def last(group: dict[str, object]) -> float:
        checks = [*group.get("alert_rule_test", []), *group.get("promql_expr_test", [])]  # type: ignore[misc]
        return max((seconds(str(c["eval_time"])) for c in checks), default=0.0)

    short = [g for g in groups if last(g) < LONG_GROUP]
    if not short or len(short) == len(groups):
        return None
    name = f"short-{tests.name}"
    (tests.parent / name).write_text(yaml.safe_dump({**doc, "tests": short}, sort_keys=False))
    return name
