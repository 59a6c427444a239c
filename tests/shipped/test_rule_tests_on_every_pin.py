"""Every exported promtool test file passes on the real promtool of every Prometheus pin: Prometheus 3
(the newest release and the LTS, testbed/peers.py) and the 2.x minimum (Debian's 2.42), for the
repository's copy, and an export at another prefix on the newest. Float expectations are exact by construction
(whole numbers or values every summation order gives), so no file needs ``fuzzy_compare``, which
2.42 does not know."""

from __future__ import annotations

import pytest

from support.exported import OTHER_PREFIX, Exported
from support.promtool import promtool_each
from testbed.repository import ROOT

pytestmark = pytest.mark.peers

ROLES = ("newest", "lts", "minimum")
TEST_FILES = ("rules.test.yml", "watcher-rules.test.yml", "server-rules.test.yml", "footprint-rules.test.yml")


#: The repository's copy on every pin; the other prefix on the newest only: a prefix changes names in
#: the rules and their tests, not what a pin's PromQL does with them (~35 CPU-seconds a run).
RUNS = [("airflow", role) for role in ROLES] + [(OTHER_PREFIX, "newest")]


@pytest.mark.parametrize(("prefix", "role"), RUNS)
def test_every_exported_rule_test_passes_on_every_prometheus_pin(
    role: str, prefix: str, exported: Exported
) -> None:
    folder = ROOT / "collector" if prefix == "airflow" else exported(prefix) / "collector"
    for name in TEST_FILES:
        assert (folder / name).is_file(), name
    results = promtool_each([(role, ("test", "rules", name)) for name in TEST_FILES], cwd=folder, timeout=300)
    for name, result in zip(TEST_FILES, results, strict=True):
        assert result.returncode == 0, (
            f"{role} {prefix} {name}:\n{result.stdout[-4000:]}{result.stderr[-2000:]}"
        )
