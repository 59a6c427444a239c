"""The folders ``store-metrics export`` writes, apart from what writes them: the command's help names
them without loading the builders."""

from __future__ import annotations

from pathlib import PurePosixPath

__all__ = ["COLLECTOR", "DASHBOARDS", "DATADOG", "FOLDERS", "HELM", "KUBERNETES"]

COLLECTOR = PurePosixPath("collector")
DASHBOARDS = PurePosixPath("dashboards")
HELM = PurePosixPath("helm")
DATADOG = PurePosixPath("datadog")
KUBERNETES = PurePosixPath("kubernetes")
#: The folders ``export`` writes; the repository keeps each at the same path.
FOLDERS = (COLLECTOR, DASHBOARDS, HELM, DATADOG, KUBERNETES)
