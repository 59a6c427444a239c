"""``otel-collector.yaml``'s one computed value: the metric filter, from the catalogue.

The file is a template (``templates/otel-collector.yaml``: every processor's reason is in its
comments); its ``@collector_filter@`` keeps every catalogue metric under any prefix, so the file
is the same whatever prefix the export is for. The scaled-out tier's front
(``templates/otel-collector-front.yaml``) filters with the same condition; its resolver comes from
the export settings (``collector_resolver_block``).
"""

from __future__ import annotations

import re

from store_metrics import catalogue

__all__ = ["collector_name_regex", "filter_condition", "values"]


def collector_name_regex() -> str:
    """The OTTL regular expression (RE2) the collector keeps: every catalogue metric (task side, API
    server side and the inventory's gauges), any prefix."""
    stems = "|".join(re.escape(m.name) for m in catalogue.ALL_METRICS)
    return f"^([A-Za-z][A-Za-z0-9_]*\\.)*({stems})$"


def filter_condition() -> str:
    """The OTTL condition of ``filter/store_metrics``: drop every metric the catalogue lacks."""
    pattern = collector_name_regex().replace("\\", "\\\\").replace('"', '\\"')
    return f'not IsMatch(name, "{pattern}")'


def _single_quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def values() -> dict[str, str]:
    """The template's values."""
    return {"collector_filter": _single_quoted(filter_condition())}
