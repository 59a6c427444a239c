"""What the generated files (the Grafana dashboard, the Datadog dashboard and monitors) are rendered for.

``export`` builds one ``RenderContext`` from the metric prefix and the export settings' values
(``settings.values``: every setting and what is derived from them) and hands it to the builders
(``store_metrics.shipped.grafana``, ``store_metrics.shipped.datadog``), which write the
prefix's names and the settings' values directly: no template, no placeholder to fill in later.

JSON files are written by ``dumps`` (indent 2, a final newline, as the files have always been);
a setting written as a bare JSON number (``"threshold": 0.05``, not ``"0.05"``) is a
``RenderContext.number``, written exactly as the setting's text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from store_metrics import catalogue

from . import records, settings

__all__ = ["JsonNumber", "RenderContext", "dumps"]

#: A JSON number (RFC 8259): what a ``JsonNumber`` may hold, so that ``dumps`` writes valid JSON.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
#: A ``JsonNumber`` as ``json.dumps`` writes it: its text between two NULs, in quotes.
_BARE = re.compile(r'"\\u0000([-+.0-9eE]+)\\u0000"')


class JsonNumber(str):
    """A setting's value that ``dumps`` writes as a bare JSON number, exactly as the setting's text
    (``0.05`` stays ``0.05``: no round trip through a float)."""

    __slots__ = ()

    def __new__(cls, text: str) -> JsonNumber:
        if not _JSON_NUMBER.fullmatch(text):
            raise ValueError(f"not a JSON number: {text!r}")
        return super().__new__(cls, f"\0{text}\0")


def dumps(document: Any) -> str:
    """``document`` as the JSON files are written (indent 2, a final newline), each ``JsonNumber``
    bare."""
    return _BARE.sub(r"\1", json.dumps(document, indent=2)) + "\n"


@dataclass(frozen=True)
class RenderContext:
    """One export's metric prefix and settings' values, and the names and values the builders write."""

    prefix: str = catalogue.DEFAULT_PREFIX
    #: Every export setting and derived value by name (``settings.values``).
    values: Mapping[str, str] = field(default_factory=settings.values)

    @classmethod
    def of(
        cls, prefix: str = catalogue.DEFAULT_PREFIX, changes: Mapping[str, str] | None = None
    ) -> RenderContext:
        """The context for ``prefix`` and the settings ``changes`` (the others at their defaults)."""
        return cls(prefix, settings.values(changes))

    def setting(self, name: str) -> str:
        """An export setting's (or a derived value's) text; ``KeyError`` for a name there is none of."""
        try:
            return self.values[name]
        except KeyError:
            raise KeyError(f"no export setting {name!r}") from None

    def number(self, name: str) -> JsonNumber:
        """An export setting written as a bare JSON number by ``dumps``."""
        try:
            return JsonNumber(self.setting(name))
        except ValueError:
            raise ValueError(f"export setting {name}: {self.setting(name)!r} is not a number") from None

    def record(self, base: str) -> str:
        """The recorded series ``base`` (its empty-prefix name, ``records``) for the prefix."""
        return records.name(base, self.prefix)

    def series(self, metric: catalogue.Metric) -> str:
        """``metric``'s Prometheus series name for the prefix."""
        return metric.prometheus_name(self.prefix)

    def full_name(self, metric: catalogue.Metric) -> str:
        """``metric``'s dotted name for the prefix, as emitted (StatsD, DogStatsD, Datadog)."""
        return metric.full_name(self.prefix)
