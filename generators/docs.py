"""The one writer of the docs' generated blocks: every block between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->`` in docs/*.md and README.md, from the one source each fact has.

    .venv/bin/python -m generators.docs           # rewrite the blocks
    .venv/bin/python -m generators.docs --check   # exit 1 if a block is out of date

The blocks: the reference tables (``reference_tables``: options, ``configure()`` arguments,
metrics, the CLI, supported versions) and docs/alerts.md's (``alert_tables``: export settings,
alerts, dashboard panels). ``tests/docs/test_docs.py`` checks every block is current and each sits
on its page once.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from . import alert_tables, reference_tables

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"(<!-- (?P<name>[a-z-]+):start -->\n)(?P<body>.*?)(<!-- (?P=name):end -->)", re.S)

#: Block name -> what it holds.
BLOCKS: dict[str, Callable[[], str]] = {
    "versions": reference_tables.versions_table,
    "options": reference_tables.options_table,
    "arguments": reference_tables.arguments_table,
    "catalogue": reference_tables.catalogue_table,
    "server-metrics": reference_tables.server_table,
    "cli": reference_tables.cli_reference,
    "settings": lambda: alert_tables.settings_table() + "\n",
    "alerts": lambda: alert_tables.alerts_table() + "\n",
    "panels": lambda: alert_tables.panels_table() + "\n",
}


def versions_table(page: Path = ROOT / "README.md") -> str:
    """The supported versions as ``page`` shows them (README.md and docs/getting-started.md): its
    link to docs/airflow-versions.md relative to the page."""
    link = os.path.relpath(DOCS / reference_tables.VERSIONS_PAGE, page.parent)
    return reference_tables.versions_table(Path(link).as_posix())


def page_blocks(page: Path, blocks: dict[str, str]) -> dict[str, str]:
    """``blocks`` as ``page`` holds them: the versions table's link is relative to the page."""
    return {**blocks, "versions": versions_table(page)} if "versions" in blocks else blocks


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def refresh(text: str, blocks: dict[str, str]) -> str:
    """``text`` with every known block's body replaced by its generated content."""

    def body(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in blocks:
            return match[0]
        return match[1] + blocks[name] + match[4]

    return _BLOCK.sub(body, text)


def block_names(text: str) -> list[str]:
    return [m["name"] for m in _BLOCK.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a block is stale")
    args = parser.parse_args(argv)
    blocks = {name: make() for name, make in BLOCKS.items()}
    stale = []
    for page in pages():
        text = page.read_text()
        new = refresh(text, page_blocks(page, blocks))
        if new == text:
            continue
        stale.append(page.relative_to(ROOT))
        if not args.check:
            page.write_text(new)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
