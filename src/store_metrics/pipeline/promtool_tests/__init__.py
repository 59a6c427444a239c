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
* :mod:`.calls_tests`: ``rules.test.yml``; :mod:`.watcher_tests`: ``watcher-rules.test.yml``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .context import Context
from .document import Document
from .selector import Labels

__all__ = ["BUILDERS", "TEMPLATE_JOBS", "render", "template_values"]


def _calls(ctx: Context) -> Document:
    from .calls_tests import document

    return document(ctx)


def _watchers(ctx: Context) -> Document:
    from .watcher_tests import document

    return document(ctx)


#: Test file name -> builder (the rule files it loads are rendered first).
BUILDERS: dict[str, Callable[[Context], Document]] = {
    "rules.test.yml": _calls,
    "watcher-rules.test.yml": _watchers,
}


def render(name: str, prefix: str, values: Mapping[str, str], rule_files: Mapping[str, str]) -> str:
    """The test file ``name`` for ``prefix`` and the settings' ``values``; ``rule_files`` holds the
    exported rule files' text by file name."""
    return BUILDERS[name](Context(prefix, values, rule_files)).text()


#: The jobs the hand-written test files (watcher-, server- and footprint-rules.test.yml) name, by
#: token. Each becomes a job the export's ``selector`` accepts: itself under the default selector.
TEMPLATE_JOBS = {
    "job_airflow": "airflow",
    "job_api": "api",
    "job_triggerer": "triggerer",
    "job_inventory": "store-metrics-inventory",
    "job_kubernetes_pods": "kubernetes-pods",
}


def template_values(prefix: str, given: Mapping[str, str]) -> dict[str, str]:
    """The hand-written test files' job tokens for the export's ``selector``: distinct jobs it
    accepts, each test's own name where the selector accepts that."""
    del prefix
    accepted = Labels(given["selector"]).values("job", len(TEMPLATE_JOBS), tuple(TEMPLATE_JOBS.values()))
    spare = [job for job in accepted if job not in TEMPLATE_JOBS.values()]
    return {token: job if job in accepted else spare.pop(0) for token, job in TEMPLATE_JOBS.items()}
