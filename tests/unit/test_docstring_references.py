"""The code's docstrings and comments name modules and objects as plain text (``store_metrics.x.y``):
no Sphinx role is left (the MkDocs site renders none), and every full name still names something
that exists, so a rename cannot leave a docstring pointing at a module that is gone."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from store_metrics import catalogue
from store_metrics.counting import tracing
from testbed.repository import ROOT

SOURCES = sorted((ROOT / "src" / "store_metrics").rglob("*.py"))
ROLE = re.compile(r":(?:mod|func|class|data|attr|meth|exc|obj|const):`")
FULL_NAME = re.compile(r"``(store_metrics(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?``")
#: Names that are data, not code: the span attributes the traced wrappers set, and the check counter.
DATA_NAMES = {tracing.OUTCOME, tracing.KEY, tracing.RETRY, catalogue.CHECK.name}


def resolves(name: str) -> bool:
    """Whether ``name`` is a module of the package, or an attribute (however deep) of one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                # A dataclass field or a slot is named on the class only through annotations.
                return attribute in getattr(target, "__annotations__", {})
            target = getattr(target, attribute)
        return True
    return False


def test_no_sphinx_role_is_left_in_the_package() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in SOURCES
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ROLE.search(line)
    ]
    assert found == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT / "src")))
def test_every_full_name_in_the_package_text_exists(path: Path) -> None:
    names = sorted(set(FULL_NAME.findall(path.read_text(encoding="utf-8"))))
    assert [name for name in names if name not in DATA_NAMES and not resolves(name)] == []


def test_a_name_that_is_gone_is_found() -> None:
    assert resolves("store_metrics.shipped.export.render_all")
    assert resolves("store_metrics.catalogue.Metric.buckets")
    assert not resolves("store_metrics.pipeline.export")
    assert not resolves("store_metrics.counting.runtime.no_such_function")
