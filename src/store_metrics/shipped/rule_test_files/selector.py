"""Label values the export setting ``selector`` lets through, for the promtool tests' input series.

The rules add ``selector`` (PromQL label matchers, e.g. ``job=~"airflow-statsd|store-metrics-.*"``)
to every raw series they read, so the tests' input series must carry labels it matches: a ``job``
the selector accepts, and every other label it names. ``Labels`` finds them: the words the
tests would use anyway (``airflow``, ``statsd``, ``api``) where the selector accepts them, else
strings built from the matchers' own values and regular expressions (each checked against every
matcher of its label, as Prometheus anchors them).
"""

from __future__ import annotations

import importlib
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any


def _sre_parse() -> Any:
    """The standard library's regular expression parser (``re._parser``; ``sre_parse`` before 3.11)."""
    try:
        return importlib.import_module("re._parser")
    except ImportError:  # pragma: no cover - Python 3.10
        return importlib.import_module("sre_parse")


__all__ = ["Labels", "Matcher", "parse"]

_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_FILLER = "x"
_MAX_EXAMPLES = 24


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def matches(self, text: str) -> bool:
        if self.op == "=":
            return text == self.value
        if self.op == "!=":
            return text != self.value
        found = re.fullmatch(self.value, text, flags=re.DOTALL) is not None
        return found if self.op == "=~" else not found


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse(selector: str) -> list[Matcher]:
    """The matchers of ``selector`` (the setting's syntax is checked before: every one parses)."""
    return [Matcher(m[0], m[1], _unescape(m[2])) for m in _MATCHER.findall(selector)]


def _pieces(node: tuple[object, object]) -> Iterator[str]:
    """A few strings one node of a parsed regular expression matches."""
    op, arg = node
    name = str(op)
    if name in ("LITERAL", "NOT_LITERAL", "ANY"):
        yield from _single(name, arg)
    elif name == "IN":
        yield from _class(arg)  # type: ignore[arg-type]
    elif name == "BRANCH":
        for branch in arg[1]:  # type: ignore[index]
            yield from _examples(branch)
    elif name == "SUBPATTERN":
        yield from _examples(arg[-1])  # type: ignore[index]
    elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, high, inner = arg  # type: ignore[misc]
        low, high = int(low), int(high)  # type: ignore[has-type]
        options = list(itertools.islice(_examples(inner), 3))  # type: ignore[has-type]
        for count in range(low, min(high, low + 2) + 1):
            for option in options:
                yield option * count
    elif name == "AT":
        yield ""


def _single(name: str, arg: object) -> Iterator[str]:
    """A few strings a one-character node matches."""
    if name == "LITERAL":
        yield chr(int(arg))  # type: ignore[call-overload]
    elif name == "NOT_LITERAL":
        yield _FILLER if chr(int(arg)) != _FILLER else "y"  # type: ignore[call-overload]
    else:
        yield from (_FILLER, "y")


def _class(items: Sequence[tuple[object, object]]) -> Iterator[str]:
    negated = any(str(op) == "NEGATE" for op, _ in items)
    for op, arg in items:
        if negated:
            yield _FILLER
            return
        if str(op) == "LITERAL":
            yield chr(int(arg))  # type: ignore[call-overload]
        elif str(op) == "RANGE":
            yield chr(arg[0])  # type: ignore[index]
        elif str(op) == "CATEGORY":
            yield {"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " "}.get(str(arg), _FILLER)


def _examples(pattern: object) -> Iterator[str]:
    """Strings a parsed pattern (a sequence of nodes) may match: the product of its nodes' examples."""
    nodes = list(pattern)  # type: ignore[call-overload]
    choices = [list(itertools.islice(_pieces(node), 4)) or [""] for node in nodes]
    for combination in itertools.islice(itertools.product(*choices), _MAX_EXAMPLES):
        yield "".join(combination)


def _regex_examples(regex: str) -> list[str]:
    try:
        return list(itertools.islice(_examples(_sre_parse().parse(regex)), _MAX_EXAMPLES))
    except (re.error, TypeError, ValueError, IndexError):
        return []


class Labels:
    """The values of each label that every matcher of ``selector`` accepts."""

    def __init__(self, selector: str) -> None:
        self.matchers = parse(selector)

    def constrained(self) -> list[str]:
        """The labels the selector names, in order."""
        return list(dict.fromkeys(m.label for m in self.matchers))

    def accepts(self, label: str, value: str) -> bool:
        return all(m.matches(value) for m in self.matchers if m.label == label)

    def values(self, label: str, wanted: int, preferred: Sequence[str] = ()) -> list[str]:
        """Up to ``wanted`` distinct values of ``label`` the selector accepts, ``preferred`` first."""
        candidates = list(preferred)
        for matcher in (m for m in self.matchers if m.label == label):
            if matcher.op == "=":
                candidates.append(matcher.value)
            elif matcher.op == "=~":
                candidates += _regex_examples(matcher.value)
        candidates += [f"{word}-{n}" for word in (*preferred, "job") for n in range(1, 4)]
        found = [value for value in dict.fromkeys(candidates) if self.accepts(label, value)]
        return found[:wanted]
