"""A section without a renderer of its own: its title and a table of its figures."""

from __future__ import annotations

from typing import Any

from ..results import Results
from ..sections import Section
from .markdown import Rendered, table


def _flat(data: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows += _flat(value, name + ".")
        elif isinstance(value, float):
            rows.append((name, f"{value:,.3f}"))
        else:
            rows.append((name, str(value)))
    return rows


def render(results: Results, section: Section) -> Rendered:
    data = results["sections"][section.name]["data"]
    heading = f"## {section.title or section.name}"
    return Rendered(heading + "\n\n" + table(["figure", "value"], _flat(data), "ll"))
