"""Block-style YAML text, byte for byte what PyYAML writes, without PyYAML.

The core package has no third-party dependency, so ``store-metrics export`` cannot rely on
PyYAML being installed. This writer covers what the generated files hold: mappings with string
keys, lists, strings, numbers, booleans and ``None``. Its output equals
``yaml.dump(document, Dumper=<SafeDumper writing multi-line strings as | blocks>, sort_keys=False,
width=10_000, allow_unicode=True)`` (tests/test_export.py compares the two); a value that writer
would need a form for that this one lacks (a double-quoted string, a list in a list) raises
:class:`ValueError` instead of writing something else.

Style rules, as PyYAML's emitter applies them: a string stays plain unless it could be read back
as something else (``true``, ``1.0``, ``null``, ...) or holds YAML indicators (``: ``, `` #``, a
leading ``-``, quote or bracket, ...); then it is single-quoted. A string with a line break is a
literal block (``|``, ``|-`` or ``|+``). Lists inside mappings are not indented (``key:\\n- item``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["dump"]

_INDENT = 2
#: PyYAML's ``width``: a longer line would be folded, which this writer does not do.
_WIDTH = 10_000
#: Marks the end of a ``|+`` block in the output lines (PyYAML's "open ended" document).
_KEPT = "\0kept"
_BREAKS = "\n\x85\u2028\u2029"
_WHITESPACE = "\0 \t\r" + _BREAKS

# PyYAML's implicit resolvers (yaml/resolver.py): a plain scalar matching one of these would be
# read back as a bool, float, int, merge key, null, timestamp or value, not as a string.
_IMPLICIT = re.compile(
    r"""^(?:
        yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF
      | [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
      | \.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
      | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
      | [-+]?\.(?:inf|Inf|INF)
      | \.(?:nan|NaN|NAN)
      | [-+]?0b[0-1_]+
      | [-+]?0[0-7_]+
      | [-+]?(?:0|[1-9][0-9_]*)
      | [-+]?0x[0-9a-fA-F_]+
      | [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
      | <<
      | ~|null|Null|NULL
      | [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
      | [0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?
        (?:[Tt]|[\ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?
        (?:[\ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?
      | =
    )$""",
    re.X,
)


def _printable(ch: str) -> bool:
    """Written as is with ``allow_unicode``; anything else needs a double-quoted escape."""
    if ch == "\n" or "\x20" <= ch <= "\x7e":
        return True
    return ch != "\ufeff" and (
        ch == "\x85"
        or "\xa0" <= ch <= "\ud7ff"
        or "\ue000" <= ch <= "\ufffd"
        or "\U00010000" <= ch < "\U0010ffff"
    )


def _indicators(text: str) -> bool:
    """Whether ``text`` holds something a block plain scalar cannot (PyYAML's block_indicators)."""
    if text.startswith(("---", "...")):
        return True
    for index, ch in enumerate(text):
        followed_by_space = index + 1 >= len(text) or text[index + 1] in _WHITESPACE
        if index == 0:
            if ch in "#,[]{}&*!|>'\"%@`":
                return True
            if ch in "?:-" and followed_by_space:
                return True
        else:
            if ch == ":" and followed_by_space:
                return True
            if ch == "#" and text[index - 1] in _WHITESPACE:
                return True
    return False


def _check_printable(text: str) -> None:
    for ch in text:
        if not _printable(ch):
            raise ValueError(f"needs a double-quoted YAML string: {text!r}")


def _plain_ok(text: str) -> bool:
    return not (
        text[0] == " "
        or text[-1] == " "
        or text[0] in _BREAKS
        or text[-1] in _BREAKS
        or any(ch in _BREAKS for ch in text)
        or _indicators(text)
        or _IMPLICIT.match(text)
    )


def _string(text: str) -> str:
    """A one-line string: plain when it reads back as the same string, else single-quoted."""
    if not text:
        return "''"
    _check_printable(text)
    if len(text) > _WIDTH // 2:
        raise ValueError(f"too long for one YAML line: {text[:80]!r}...")
    if _plain_ok(text):
        return text
    return "'" + text.replace("'", "''") + "'"


def _literal(text: str, indent: int) -> list[str]:
    """A string with line breaks as a literal block: the indicator, then the indented lines."""
    _check_printable(text)
    lines = text.split("\n")
    if any(line.endswith(" ") and i < len(lines) - 1 for i, line in enumerate(lines)) or text.endswith(" "):
        raise ValueError(f"needs a double-quoted YAML string: {text!r}")
    hints = str(_INDENT) if text[0] in " \n" else ""
    if not text.endswith("\n"):
        hints += "-"
    elif len(text) == 1 or text[-2] == "\n":
        hints += "+"
    body = lines[:-1] if text.endswith("\n") else lines
    return ["|" + hints] + [" " * indent + line if line else "" for line in body]


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value).lower()
    if "." not in text and "e" in text:
        text = text.replace("e", ".0e", 1)
    return text


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, str):
        return _string(value)
    raise ValueError(f"cannot write {type(value).__name__} as YAML: {value!r}")


def _value(lead: str, value: object, indent: int, out: list[str]) -> None:
    """``lead`` (``key:`` or ``-``) followed by ``value``, which belongs at ``indent``."""
    if isinstance(value, Mapping):
        if not value:
            out.append(f"{lead} {{}}")
            return
        out.append(lead)
        _mapping(value, indent + _INDENT, out)
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append(f"{lead} []")
            return
        out.append(lead)
        _sequence(value, indent, out)
    elif isinstance(value, str) and "\n" in value:
        first, *rest = _literal(value, indent + _INDENT)
        out.append(f"{lead} {first}")
        out.extend(rest)
        if first.endswith("+"):
            out.append(_KEPT)
    else:
        out.append(f"{lead} {_scalar(value)}")


def _key(key: object) -> str:
    if not isinstance(key, str) or not key or "\n" in key:
        raise ValueError(f"unsupported YAML mapping key: {key!r}")
    return _string(key)


def _mapping(mapping: Mapping[Any, object], indent: int, out: list[str], first_lead: str = "") -> None:
    for i, (key, value) in enumerate(mapping.items()):
        lead = (first_lead if i == 0 and first_lead else " " * indent) + _key(key) + ":"
        _value(lead, value, indent, out)


def _sequence(items: Sequence[object], indent: int, out: list[str]) -> None:
    """A list as a mapping's value: ``- item`` lines at the mapping's own indentation."""
    dash = " " * indent + "- "
    for item in items:
        if isinstance(item, Mapping) and item:
            _mapping(item, indent + _INDENT, out, first_lead=dash)
        elif isinstance(item, (list, tuple)):
            raise ValueError("a list directly inside a list is not supported")
        else:
            _value(dash.rstrip(" "), item, indent, out)


def dump(document: Mapping[str, object], header: str = "") -> str:
    """``header`` (comment lines, each ending in a newline) followed by ``document`` as block YAML."""
    out: list[str] = []
    _mapping(document, 0, out)
    # A document ending in a block that keeps its trailing line breaks gets an explicit end.
    end = "...\n" if out[-1] is _KEPT else ""
    return header + "\n".join(line for line in out if line is not _KEPT) + "\n" + end
