"""Turn a generated file into a template: every catalogue name becomes its ``@token@``.

The generators build their files for :data:`SENTINEL`, a prefix no other text contains, so each
metric name in the output is found exactly (no guessing which ``airflow`` is a prefix) and
replaced by the token :mod:`store_metrics.pipeline.templating` fills in for any prefix:
``@<metric>@`` for the Prometheus series name, ``@full:<metric>@`` for the dotted name.
"""

from __future__ import annotations

import re

from store_metrics import catalogue

__all__ = ["SENTINEL", "tokenize"]

#: The prefix the generators build for: a word no template contains for another reason.
SENTINEL = "zzsentinel"


def _names() -> dict[str, str]:
    names: dict[str, str] = {}
    for metric in catalogue.ALL_METRICS:
        names[metric.prometheus_name(SENTINEL)] = f"@{metric.name}@"
        names[metric.full_name(SENTINEL)] = f"@full:{metric.name}@"
    return names


def tokenize(text: str) -> str:
    """``text`` with every catalogue name for :data:`SENTINEL` replaced by its token.

    Longest names first, so a name that begins another (a histogram's base name and its
    ``_bucket`` series aside, which keep their suffix after the token) is never cut short.
    """
    names = _names()
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))
    result = pattern.sub(lambda m: names[m.group(0)], text)
    if SENTINEL in result:
        line = next(line for line in result.splitlines() if SENTINEL in line)
        raise ValueError(f"{SENTINEL!r} left in a template (not a catalogue name): {line.strip()[:200]}")
    return result
