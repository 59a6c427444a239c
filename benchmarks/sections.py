"""The sections of the benchmark page, in page order: add a section here, one line.

Each line names the section (``--only NAME``, its key in ``benchmarks/results.json``), the function
that measures it (``module:function``, called with ``quick: bool``, returning JSON-serialisable
data) and the function that renders it (``module:function`` taking the whole results, returning a
``benchmarks.report.markdown.Rendered``). A section without a renderer of its own gets
``benchmarks.report.generic.render`` (a table of its figures under ``title``); ``render=None``
means another section shows its figures (the round trip and callgrind, in section 1).
``plain_quick=False`` keeps a section out of a plain ``--quick`` (it takes a minute or more even
then); ``--quick --only NAME`` runs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GENERIC = "benchmarks.report.generic:render"


@dataclass(frozen=True)
class Section:
    name: str
    measure: str
    render: str | None = GENERIC
    plain_quick: bool = True
    title: str = ""


# fmt: off
SECTIONS: tuple[Section, ...] = (
    Section("roundtrip", "benchmarks.roundtrip:run", None),
    Section("percall", "benchmarks.percall:run", "benchmarks.report.percall:render"),
    Section("callgrind", "benchmarks.callgrind:run", None),
    Section("stalls", "benchmarks.stalls:run", "benchmarks.report.stalls:render"),
    Section("memory", "benchmarks.memory:run", "benchmarks.report.task_costs:memory"),
    Section("flush", "benchmarks.flush:run", "benchmarks.report.task_costs:flush"),
    Section("histogram_export", "benchmarks.histogram_export:run", "benchmarks.report.task_costs:histogram"),
    Section("exitdelay", "benchmarks.exitdelay:run", "benchmarks.report.task_costs:exit_delay"),
    Section("server", "benchmarks.server:run", "benchmarks.report.server:render"),
    Section("inventory", "benchmarks.inventory:run", "benchmarks.report.inventory:render", plain_quick=False),
    Section("triggerer", "benchmarks.triggerer:run", "benchmarks.report.triggerer:render", plain_quick=False),
    Section("load", "benchmarks.load:run", "benchmarks.report.load:render", plain_quick=False),
    Section("count_at", "benchmarks.count_at:run", "benchmarks.report.count_at:render", plain_quick=False),
    Section("import_cost", "benchmarks.import_cost:run", "benchmarks.report.import_cost:render"),
    Section("ui", "benchmarks.ui:run", "benchmarks.report.ui:render", plain_quick=False),
    Section("scale_peers", "benchmarks.scale_peers:run", "benchmarks.report.scale:peers", plain_quick=False),
    Section("scale_api", "benchmarks.scale_api:run", "benchmarks.report.scale:api", plain_quick=False),
    Section("statsd_flush", "benchmarks.statsd_flush:run", "benchmarks.report.statsd_flush:render", plain_quick=False),  # noqa: E501
    Section("ui_threads", "benchmarks.ui_threads:run", "benchmarks.report.ui_threads:render"),
    Section("traces", "benchmarks.traces:run", title="15. Traces: per-call cost with spans off and on"),
    Section("exposition", "benchmarks.exposition:run", "benchmarks.report.exposition:render", plain_quick=False),  # noqa: E501
    Section("series_memory", "benchmarks.series_memory:run", "benchmarks.report.exposition:memory", plain_quick=False),  # noqa: E501
    Section("rules_cost", "benchmarks.rules_cost:run", "benchmarks.report.rules_cost:render", plain_quick=False),  # noqa: E501
)
# fmt: on

BY_NAME: dict[str, Section] = {s.name: s for s in SECTIONS}


def resolve(spec: str) -> Callable[..., Any]:
    """The function a ``module:function`` spec names (imported only when asked for)."""
    module, _, name = spec.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function
