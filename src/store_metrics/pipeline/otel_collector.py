"""``otel-collector.yaml``: the OpenTelemetry Collector (contrib) configuration.

The file is hand-written (``templates/otel-collector.yaml``: every processor's reason is in its
comments); only the metric filter comes from the catalogue. The filter keeps every catalogue
metric under any prefix, so the file is the same whatever prefix the export is for.
"""

from __future__ import annotations

from . import promql, templating

__all__ = ["FILENAME", "filter_condition", "render"]

FILENAME = "otel-collector.yaml"


def filter_condition() -> str:
    """The OTTL condition of ``filter/store_metrics``: drop every metric the catalogue lacks."""
    pattern = promql.collector_name_regex().replace("\\", "\\\\").replace('"', '\\"')
    return f'not IsMatch(name, "{pattern}")'


def _single_quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def render(prefix: str) -> str:
    return templating.render(FILENAME, prefix, {"collector_filter": _single_quoted(filter_condition())})
