"""Rewrite (or check) this folder: the ``collector/`` part of ``store-metrics export``.

The files are templates in the installed package (``store_metrics/pipeline/templates``); this
script only writes them here, so the repository holds exactly what ``store-metrics export --out .``
writes for the default prefix (tests/test_export.py compares them byte for byte).

    python collector/generate.py            # rewrite collector/
    python collector/generate.py --check    # exit 1 if a file here is out of date
    python collector/generate.py --prefix myco --out /tmp/x   # for a non-default metric prefix

Both folders at once: ``store-metrics export --out .`` from the repository root.
"""

from __future__ import annotations

from pathlib import Path

from store_metrics.pipeline.export import COLLECTOR, folder_main

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    return folder_main(COLLECTOR, Path(__file__).resolve().parent, argv)


if __name__ == "__main__":
    raise SystemExit(main())
