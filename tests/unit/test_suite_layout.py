"""The test suite's own layout: what pytest needs to collect every module of it.

The test folders are not packages: pytest imports each module by its basename (rootdir import
mode), so two modules of one basename in two folders stop the collection of whichever comes second,
and with it the whole run it is in (``import file mismatch``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_module_has_a_basename_of_its_own() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for module in (ROOT / "tests").rglob("test_*.py"):
        if "node_modules" not in module.parts:
            by_name[module.name].append(str(module.relative_to(ROOT)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
