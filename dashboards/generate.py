"""Rewrite (or check) this folder: the ``dashboards/`` part of ``store-metrics export``.

The dashboard is built at development time by ``generators/grafana`` (``scripts/dashboards``
rewrites its template in the package); this script only writes the export (and the provisioning
files) here, so the repository holds exactly what ``store-metrics export --out .`` writes for the
default prefix.

    python dashboards/generate.py            # rewrite dashboards/
    python dashboards/generate.py --check    # exit 1 if a file here is out of date
    python dashboards/generate.py --prefix myco --out /tmp/x   # for a non-default metric prefix

The tests load this file for :func:`specs` and :func:`server_specs`: each dashboard query's
declarative spec, from which they compute what the query must return.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's generators/

from generators.grafana.dashboard import dashboard, render, server_specs, specs
from store_metrics.pipeline.export import DASHBOARDS, folder_main

__all__ = ["dashboard", "main", "render", "server_specs", "specs"]


def main(argv: list[str] | None = None) -> int:
    return folder_main(DASHBOARDS, Path(__file__).resolve().parent, argv)


if __name__ == "__main__":
    raise SystemExit(main())
