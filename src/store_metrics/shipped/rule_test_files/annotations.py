"""What an alert of a rendered rule file says when it fires: its labels and annotations, rendered as
Prometheus renders them, for the promtool tests' expected alerts.

``alerts`` reads the alerts' static labels and annotation templates from the rule file's text
(the shape ``store_metrics.shipped.templating`` writes: one single-quoted line each); ``render``
fills a template in for an alert's labels, value and external labels. It knows exactly the template
language the shipped annotations use (``$labels.x``, ``$externalLabels.x``, ``$value`` with
``humanize``, ``humanizePercentage``, ``humanizeDuration``, ``or``, ``if``/``else``/``end``), with
Prometheus' own number formatting, and refuses anything else, so a new construct in a rule is seen
here first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .document import number

__all__ = ["Alert", "alerts", "humanize", "humanize_duration", "render"]

_ALERT = re.compile(r"^  - alert: (\w+)$")
_FIELD = re.compile(r"^      (\w+): (.*)$")
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")


@dataclass(frozen=True)
class Alert:
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]


def _scalar(text: str) -> str:
    text = text.strip()
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1].replace("''", "'")
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def alerts(rule_file: str) -> dict[str, Alert]:
    """Every alert of a rendered rule file, by name."""
    found: dict[str, Alert] = {}
    current: Alert | None = None
    section: dict[str, str] | None = None
    for line in rule_file.splitlines():
        if match := _ALERT.match(line):
            current = Alert(match[1], {}, {})
            found[current.name] = current
            section = None
        elif current is not None and line.startswith("    ") and not line.startswith("     "):
            key = line.strip().rstrip(":")
            section = {"labels": current.labels, "annotations": current.annotations}.get(key)
        elif current is not None and section is not None and (match := _FIELD.match(line)):
            section[match[1]] = _scalar(match[2])
        elif not line.startswith("      "):
            section = None
    return found


def _g4(value: float) -> str:
    """Go's ``%.4g``."""
    text = f"{value:.4g}"
    return text.replace("inf", "Inf").replace("nan", "NaN")


def humanize(value: float) -> str:
    """Prometheus' ``humanize``: 4 significant digits and an SI prefix."""
    if value == 0:
        return _g4(value)
    prefix = ""
    if abs(value) >= 1:
        for p in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(value) < 1000:
                break
            prefix, value = p, value / 1000
    else:
        for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
            if abs(value) >= 1:
                break
            prefix, value = p, value * 1000
    return f"{_g4(value)}{prefix}"


def humanize_duration(value: float) -> str:
    """Prometheus' ``humanizeDuration`` for a duration of a second or more (what the alerts show)."""
    if value == 0:
        return "0s"
    if abs(value) < 1:
        raise ValueError(f"humanizeDuration of {value}: only durations of a second or more are tested")
    sign, whole = ("-" if value < 0 else ""), int(abs(value))
    days, hours, minutes, seconds = whole // 86400, whole // 3600 % 24, whole // 60 % 60, whole % 60
    if days:
        return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
    if hours:
        return f"{sign}{hours}h {minutes}m {seconds}s"
    if minutes:
        return f"{sign}{minutes}m {seconds}s"
    return f"{sign}{_g4(abs(value))}s"


_PIPES = {
    "humanize": humanize,
    "humanizePercentage": lambda v: f"{_g4(v * 100)}%",
    "humanizeDuration": humanize_duration,
}


def _term(term: str, labels: Mapping[str, str], value: float, external: Mapping[str, str]) -> str:
    term = term.strip()
    if term.startswith("$labels."):
        return labels.get(term[len("$labels.") :], "")
    if term.startswith("$externalLabels."):
        return external.get(term[len("$externalLabels.") :], "")
    if term == "$value":
        return number(value)
    raise ValueError(f"annotation template term not known here: {term!r}")


def _action(action: str, labels: Mapping[str, str], value: float, external: Mapping[str, str]) -> str:
    if action.startswith("or "):
        options = [_term(t, labels, value, external) for t in action[3:].split()]
        return next((o for o in options if o), "")
    if "|" in action:
        term, pipe = (part.strip() for part in action.split("|", 1))
        if term != "$value" or pipe not in _PIPES:
            raise ValueError(f"annotation template action not known here: {action!r}")
        return str(_PIPES[pipe](value))
    return _term(action, labels, value, external)


def render(
    template: str, labels: Mapping[str, str], value: float, external: Mapping[str, str] | None = None
) -> str:
    """``template`` as Prometheus renders it for an alert with ``labels`` and ``value``."""
    external = external or {}
    out: list[str] = []
    keep: list[bool] = []  # one per open if: whether its current branch is written
    position = 0
    for match in _ACTION.finditer(template):
        if all(keep):
            out.append(template[position : match.start()])
        position = match.end()
        action = match[1]
        if action.startswith("if "):
            keep.append(bool(_term(action[3:], labels, value, external)))
        elif action == "else":
            keep[-1] = not keep[-1]
        elif action == "end":
            keep.pop()
        elif all(keep):
            out.append(_action(action, labels, value, external))
    out.append(template[position:] if all(keep) else "")
    return "".join(out)
