"""The promtool unit tests ``store-metrics export`` writes beside each rule file, generated for the
settings of that export (``collector/*.test.yml``).

Hand-written tests hold for the settings they were written for; these are built for the export's
own: steps of its ``rule_interval``, input series the ``selector`` accepts, its ``cluster_label``,
windows, floors and ``for`` durations, and alerts rendered from the exported rule files. Every
expected value is worked out from the calls a scenario makes (:mod:`.timeline`), exact by
construction and the same on Prometheus 2.42 and 3.x, so ``promtool test rules`` passes on both for
any setting within its documented range (tests/pipeline/test_rule_tests.py runs that table).

* :mod:`.document`: a test file as data, and its YAML;
* :mod:`.selector`: label values the ``selector`` accepts;
* :mod:`.annotations`: an alert's annotations as Prometheus renders them;
* :mod:`.timeline`, :mod:`.moments`, :mod:`.calls`: what the rules must record, when alerts fire;
* :mod:`.calls_tests`: ``rules.test.yml``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .context import Context
from .document import Document

__all__ = ["BUILDERS", "render"]


def _calls(ctx: Context) -> Document:
    from .calls_tests import document

    return document(ctx)


#: Test file name -> builder (the rule files it loads are rendered first).
BUILDERS: dict[str, Callable[[Context], Document]] = {"rules.test.yml": _calls}


def render(name: str, prefix: str, values: Mapping[str, str], rule_files: Mapping[str, str]) -> str:
    """The test file ``name`` for ``prefix`` and the settings' ``values``; ``rule_files`` holds the
    exported rule files' text by file name."""
    return BUILDERS[name](Context(prefix, values, rule_files)).text()
