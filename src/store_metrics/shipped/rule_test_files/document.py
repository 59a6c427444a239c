"""A promtool unit test file as data, and its YAML text (written here: the package has no dependency).

A ``Document`` holds the rule files, the evaluation interval and ``Group`` s of input
series with their expression and alert cases; ``Document.text`` writes it in the shape
``promtool test rules`` reads (the same for Prometheus 2.42 and 3.x: no ``fuzzy_compare``, which
2.x refuses, so every expected float is exact by construction), with the comments that say where
each expected value comes from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

__all__ = ["STALE", "AlertCase", "Document", "ExprCase", "Firing", "Group", "Series", "encode", "number"]

#: A scrape that failed (promtool's ``stale``: a staleness marker).
STALE = "stale"
Value = float | int | str | None
#: A time or duration in seconds: exact (a Fraction of the settings' durations) or a float.
Seconds = float | Fraction


def number(value: float) -> str:
    """A number as promtool and Go print it: ``3``, not ``3.0``; exact digits otherwise."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _run(values: Sequence[Value], start: int) -> tuple[int, str]:
    """The longest arithmetic run of numbers from ``start``: (its length, its promtool notation)."""
    first = values[start]
    if first is None:
        end = start
        while end < len(values) and values[end] is None:
            end += 1
        count = end - start
        return count, "_" if count == 1 else f"_x{count}"
    if isinstance(first, str):
        return 1, first
    if start + 1 >= len(values) or not isinstance(values[start + 1], (int, float)):
        return 1, number(first)
    step = float(values[start + 1]) - float(first)  # type: ignore[arg-type]
    end = start + 1
    while (
        end + 1 < len(values)
        and isinstance(values[end + 1], (int, float))
        and float(values[end + 1]) - float(values[end]) == step  # type: ignore[arg-type]
    ):
        end += 1
    repeats = end - start
    if step != 0 and repeats < 2:  # two values a step apart read better alone: "1 0", not "1-1x1"
        return 1, number(first)
    if step == 0:
        return repeats + 1, f"{number(first)}x{repeats}"
    sign = "+" if step > 0 else "-"
    return repeats + 1, f"{number(first)}{sign}{number(abs(step))}x{repeats}"


def encode(values: Sequence[Value]) -> str:
    """Per-step values (a number, ``None`` for no sample, ``STALE``) in promtool's notation:
    ``[0, 2, 4, None, None, 7]`` -> ``0+2x2 _x2 7``."""
    parts, index = [], 0
    while index < len(values):
        length, text = _run(values, index)
        parts.append(text)
        index += length
    return " ".join(parts)


def quoted(text: str) -> str:
    """A YAML single-quoted scalar."""
    return "'" + text.replace("'", "''") + "'"


def selector(name: str, labels: Mapping[str, str]) -> str:
    """``name{a="x",b="y"}``, labels in the order given, empty values left out."""
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items() if v != "")
    return f"{name}{{{inner}}}"


def duration(seconds: Seconds) -> str:
    """A Prometheus duration: ``1h30m``, ``90s`` as ``1m30s``, milliseconds only where needed."""
    millis = round(seconds * 1000)
    if millis == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, millis = divmod(millis, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


@dataclass
class Series:
    """One input series: its name and labels, and one value per input interval."""

    name: str
    labels: dict[str, str]
    values: list[Value]
    comment: str = ""


@dataclass
class ExprCase:
    """``expr`` at ``at`` seconds must return exactly ``samples`` (label text -> value)."""

    expr: str
    at: Seconds
    samples: dict[str, float]
    comment: str = ""


@dataclass
class Firing:
    """One alert expected to fire: its labels (``alertname`` aside) and annotations."""

    labels: dict[str, str]
    annotations: dict[str, str]


@dataclass
class AlertCase:
    """``alert`` at ``at`` seconds must be firing exactly ``firing`` (none: not firing)."""

    alert: str
    at: Seconds
    firing: list[Firing]
    comment: str = ""


@dataclass
class Group:
    """One test group: input series every ``interval`` seconds, and what they must give."""

    name: str
    interval: Seconds
    comment: list[str]
    series: list[Series] = field(default_factory=list)
    exprs: list[ExprCase] = field(default_factory=list)
    alerts: list[AlertCase] = field(default_factory=list)
    external_labels: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"  # {line}" if line else "  #" for line in self.comment]
        out += [f"  - name: {quoted(self.name)}", f"    interval: {duration(self.interval)}"]
        if self.external_labels:
            out.append("    external_labels:")
            out += [f"      {k}: {quoted(v)}" for k, v in self.external_labels.items()]
        out.append("    input_series:")
        for series in self.series:
            if series.comment:
                out.append(f"      # {series.comment}")
            out.append(f"      - series: {quoted(selector(series.name, series.labels))}")
            out.append(f"        values: {quoted(encode(series.values))}")
        if self.exprs:
            out.append("    promql_expr_test:")
            for case in self.exprs:
                out += _expr_lines(case)
        if self.alerts:
            out.append("    alert_rule_test:")
            for alert in self.alerts:
                out += _alert_lines(alert)
        return out


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}" for line in text.splitlines()] if text else []


def _expr_lines(case: ExprCase) -> list[str]:
    out = _comment(case.comment, "      ")
    out += [f"      - expr: {quoted(case.expr)}", f"        eval_time: {duration(case.at)}"]
    if not case.samples:
        return [*out, "        exp_samples: []"]
    out.append("        exp_samples:")
    for labels, value in case.samples.items():
        out += [f"          - labels: {quoted(labels)}", f"            value: {number(value)}"]
    return out


def _alert_lines(case: AlertCase) -> list[str]:
    out = _comment(case.comment, "      ")
    out += [f"      - eval_time: {duration(case.at)}", f"        alertname: {case.alert}"]
    if not case.firing:
        return [*out, "        exp_alerts: []"]
    out.append("        exp_alerts:")
    for firing in case.firing:
        out.append("          - exp_labels:")
        out += [f"              {k}: {quoted(v)}" for k, v in sorted(firing.labels.items())]
        out.append("            exp_annotations:")
        out += [f"              {k}: {quoted(v)}" for k, v in firing.annotations.items()]
    return out


@dataclass
class Document:
    """One ``*.test.yml``: the rule files it loads, every group's evaluation order, its groups."""

    title: str
    rule_files: list[str]
    interval: Seconds
    eval_order: list[str]
    groups: list[Group]
    header: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"# {self.title}", *(f"# {line}" if line else "#" for line in self.header), ""]
        lines += ["rule_files:", *(f"  - {name}" for name in self.rule_files), ""]
        lines += [f"evaluation_interval: {duration(self.interval)}", "group_eval_order:"]
        lines += [f"  - {name}" for name in self.eval_order]
        lines += ["", "tests:"]
        for group in self.groups:
            lines += [*group.lines(), ""]
        return "\n".join(lines).rstrip("\n") + "\n"
