"""Markdown pieces of the page: tables, numbers, and what a section renderer returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .targets import VerdictRow


@dataclass
class Rendered:
    """One section of the page: its Markdown, its verdict rows, its notes for "Why"."""

    text: str = ""
    verdicts: list[VerdictRow] = field(default_factory=list)
    why: list[str] = field(default_factory=list)


def table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None) -> str:
    """A Markdown table; ``align`` is one char per column: l(eft) or r(ight) (default: l, then r)."""
    align = align or "l" + "r" * (len(header) - 1)
    lines = ["| " + " | ".join(str(h) for h in header) + " |"]
    lines.append("|" + "|".join("---" if a == "l" else "---:" for a in align) + "|")
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def ns(value: float) -> str:
    return f"{value:,.0f}"


def mib(n: float, digits: int = 0) -> str:
    return f"{n / 1024 / 1024:,.{digits}f}"


def join(*parts: str) -> str:
    """Paragraphs and tables, one blank line apart (empty parts left out)."""
    return "\n\n".join(p for p in parts if p)
