"""Turn a generated file into a template: every catalogue name becomes its ``@token@``.

The generators build their files for ``SENTINEL``, a prefix no other text contains, so each
metric name in the output is found exactly (no guessing which ``airflow`` is a prefix) and
replaced by the token ``store_metrics.shipped.templating`` fills in for any prefix:
``@<metric>@`` for the Prometheus series name, ``@full:<metric>@`` for the dotted name, and
``@record:<base name>@`` for a recorded series (``record``: its name carries the prefix).

An export setting (``store_metrics.shipped.settings``) is written ``@name@`` inside a string
(``setting``), and as a bare JSON value with ``Value`` and ``dumps``: the template is
then JSON once filled in.
"""

from __future__ import annotations

import json
import re
from typing import Any

from store_metrics import catalogue
from store_metrics.shipped import records, settings, templating

__all__ = ["SENTINEL", "Value", "dumps", "fill", "record", "setting", "tokenize"]

#: The prefix the generators build for: a word no template contains for another reason.
SENTINEL = "zzsentinel"
#: A recorded series for the sentinel prefix: ``level:zzsentinel_store_metrics_...:operations``.
_RECORDED = re.compile(rf"\b([a-z_]+):{SENTINEL}_(store_metrics_[a-z0-9_]+):([a-z0-9_]+)\b")


def record(base: str) -> str:
    """The recorded series ``base`` (its empty-prefix name) as the generators write it: for the
    sentinel prefix, which ``tokenize`` turns into its ``@record:...@`` token."""
    return records.name(base, SENTINEL)


def _names() -> dict[str, str]:
    names: dict[str, str] = {}
    for metric in catalogue.ALL_METRICS:
        names[metric.prometheus_name(SENTINEL)] = f"@{metric.name}@"
        names[metric.full_name(SENTINEL)] = f"@full:{metric.name}@"
    return names


def tokenize(text: str) -> str:
    """``text`` with every catalogue name for ``SENTINEL`` replaced by its token.

    Longest names first, so a name that begins another (a histogram's base name and its
    ``_bucket`` series aside, which keep their suffix after the token) is never cut short.
    """
    text = _RECORDED.sub(lambda m: f"@{records.TOKEN}{m.group(1)}:{m.group(2)}:{m.group(3)}@", text)
    names = _names()
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))
    result = pattern.sub(lambda m: names[m.group(0)], text)
    if SENTINEL in result:
        line = next(line for line in result.splitlines() if SENTINEL in line)
        raise ValueError(f"{SENTINEL!r} left in a template (not a catalogue name): {line.strip()[:200]}")
    return result


_SETTINGS = {s.name for s in settings.SETTINGS}
_DERIVED = set(settings.values()) - _SETTINGS


def fill(text: str, prefix: str = catalogue.DEFAULT_PREFIX, changes: dict[str, str] | None = None) -> str:
    """A generated text (a query) as exported for ``prefix`` and the settings ``changes``."""
    return templating.fill(tokenize(text), prefix, settings.values(changes))


def setting(name: str) -> str:
    """``@name@``: an export setting (or a value derived from them) inside a string."""
    if name not in _SETTINGS | _DERIVED:
        raise KeyError(f"no export setting {name!r}")
    return f"@{name}@"


class Value(str):
    """An export setting written as a bare JSON value (a number): ``"threshold": @error_ratio@``."""

    __slots__ = ()

    def __new__(cls, name: str) -> Value:
        setting(name)
        return super().__new__(cls, f"\0{name}\0")


_BARE = re.compile(r'"\\u0000([a-z0-9_]+)\\u0000"')


def dumps(document: Any) -> str:
    """``document`` as the JSON files are written (indent 2, a final newline), each ``Value``
    as its bare token."""
    return _BARE.sub(r"@\1@", json.dumps(document, indent=2)) + "\n"
