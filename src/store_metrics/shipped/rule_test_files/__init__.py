"""The promtool unit tests ``store-metrics export`` writes beside each rule file, generated for the
settings of that export (``collector/*.test.yml``).

Hand-written tests hold for the settings they were written for; these are built for the export's
own: steps of its ``rule_interval``, input series the ``selector`` accepts, its ``cluster_label``,
windows, floors and ``for`` durations, and alerts rendered from the exported rule files. Every
expected value is worked out from the calls a scenario makes (``timeline``), exact by
construction and the same on Prometheus 2.42 and 3.x, so ``promtool test rules`` passes on both for
any setting within its documented range (tests/shipped/test_rule_tests.py runs that table).

* ``document``: a test file as data, and its YAML;
* ``selector``: label values the ``selector`` accepts;
* ``annotations``: an alert's annotations as Prometheus renders them;
* ``timeline``, ``moments``, ``calls``: what the rules must record, when alerts fire;
* ``calls_tests``: ``rules.test.yml``; ``watcher_tests``: ``watcher-rules.test.yml``;
  ``footprint_tests``: ``footprint-rules.test.yml``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction

from ..settings import seconds
from .annotations import render as render_annotation
from .context import Context
from .document import Document
from .selector import Labels

__all__ = ["BUILDERS", "TEMPLATE_JOBS", "render", "server_values", "template_values"]


def _calls(ctx: Context) -> Document:
    from .calls_tests import document

    return document(ctx)


def _watchers(ctx: Context) -> Document:
    from .watcher_tests import document

    return document(ctx)


def _footprint(ctx: Context) -> Document:
    from .footprint_tests import document

    return document(ctx)


#: Test file name -> builder (the rule files it loads are rendered first).
BUILDERS: dict[str, Callable[[Context], Document]] = {
    "rules.test.yml": _calls,
    "watcher-rules.test.yml": _watchers,
    "footprint-rules.test.yml": _footprint,
}


def render(name: str, prefix: str, values: Mapping[str, str], rule_files: Mapping[str, str]) -> str:
    """The test file ``name`` for ``prefix`` and the settings' ``values``; ``rule_files`` holds the
    exported rule files' text by file name."""
    return BUILDERS[name](Context(prefix, values, rule_files)).text()


#: The jobs the hand-written test file (server-rules.test.yml) names, by token. Each becomes a job
#: the export's ``selector`` accepts: itself under the default selector.
TEMPLATE_JOBS = {"job_api": "api", "job_collector": "otel-collector"}


def template_values(prefix: str, given: Mapping[str, str]) -> dict[str, str]:
    """The hand-written test file's job tokens for the export's ``selector``: distinct jobs it
    accepts where it accepts enough, each test's own name where the selector accepts that."""
    del prefix
    accepted = Labels(given["selector"]).values("job", len(TEMPLATE_JOBS), tuple(TEMPLATE_JOBS.values()))
    spare = [job for job in accepted if job not in TEMPLATE_JOBS.values()] or accepted
    return {
        token: job if job in accepted else spare[i % len(spare)]
        for i, (token, job) in enumerate(TEMPLATE_JOBS.items())
    }


def _minutes(duration: str) -> int:
    return math.ceil(seconds(duration) / 60)


def server_values(prefix: str, given: Mapping[str, str]) -> dict[str, str]:
    """server-rules.test.yml's computed values: the selector's jobs, the long-stall bucket bound as
    the two kinds of exporters write it, and the alert scenario's inputs and times for the
    thresholds and ``for`` durations (whole numbers of ms and stalls per second: exact rates)."""
    bound = f"{float(given['long_stall_ms']):g}"
    ratio = Fraction(given["loop_stalled_ratio"])
    hot, cool = math.floor(ratio * 1000) + 1, math.ceil(ratio * 1000) - 1  # stalled ms per second
    longer = math.floor(Fraction(given["long_stalls_per_minute"]) / 60) + 1  # long stalls per second
    stalled_for, long_for = _minutes(given["loop_stalled_for"]), _minutes(given["long_stalls_for"])
    # Above the threshold from minute 5 at the latest (a full window), not before minute 1.
    return {
        **template_values(prefix, given),
        "long_stall_bound": bound,
        "long_stall_bound_python": bound if "." in bound else f"{bound}.0",
        "hot_stalled_ms": str(60 * hot),
        "cool_stalled_ms": str(60 * cool),
        "hot_stalled_ratio": f"{hot / 1000:g}",
        "cool_stalled_ratio": f"{cool / 1000:g}",
        "hot_stalled_percent": render_annotation("{{ $value | humanizePercentage }}", {}, hot / 1000),
        "hot_stalls_per_minute": str(60 * (1 + longer)),
        "hot_long_per_minute": str(60 * longer),
        "hot_long_per_second": render_annotation("{{ $value | humanize }}", {}, float(longer)),
        "stalled_pending": f"{stalled_for}m",
        "stalled_firing": f"{5 + stalled_for}m",
        "long_pending": f"{long_for}m",
        "long_firing": f"{5 + long_for}m",
        "alert_samples": str(5 + max(stalled_for, long_for) + 2),
    }
