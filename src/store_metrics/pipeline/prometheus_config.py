"""``prometheus.yml``: scrape jobs for each topology, loading the task side's and the API server's rules.

Hand-written (``templates/prometheus.yml``); it names no metric, so every prefix gets the same jobs.
The rule files it loads are the ones :mod:`.rules` writes next to it.
"""

from __future__ import annotations

from . import templating

__all__ = ["FILENAME", "render"]

FILENAME = "prometheus.yml"


def render(prefix: str) -> str:
    return templating.render(FILENAME, prefix)
