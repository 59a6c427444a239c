"""``store-metrics export --target victoriametrics``: the rule files and their tests as vmalert runs them.

The Prometheus export is rendered first; this module adapts the files where VictoriaMetrics (vmalert
evaluating MetricsQL against a single-node or cluster VictoriaMetrics) differs in result, each
difference measured with vmalert-tool of the pinned release (docs/scaling-out.md):

* MetricsQL has no native-histogram functions (``histogram_count``, ``histogram_fraction``,
  ``histogram_sum``) and VictoriaMetrics keeps no Prometheus native histograms: vmalert refuses
  server-rules.yml as Prometheus gets it. The records of native histograms (those the functions
  read) and the ``or`` branches that read them are left out; the classic series (``_bucket``,
  ``_sum``, ``_count``), which is what remote write and vmagent deliver, are recorded as before.
* vmalert-tool reads promtool's test format but names the query tests ``metricsql_expr_test``,
  wants each alert test's ``groupname`` (vmalert labels every alert with ``alertgroup``), and puts
  the group's external labels on the alerts themselves (Prometheus adds them only when it sends).
* VictoriaMetrics stores a sample with 12 to 13 significant decimal digits, so a recorded rate of
  1/3 is read back as 0.333333333333: the query tests compare at 1e-9 (MetricsQL's
  ``round(q, 1e-9) keep_metric_names`` and the same rounding of the expected value).

The recording rules of the calls (rules.yml) need no change: they read counters by ``offset``, not
``rate``/``increase`` (which MetricsQL computes from the last sample before the window and does not
extrapolate), and each group reads only series other groups record. Everything else is the
Prometheus export unchanged.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from types import ModuleType
from typing import Any

__all__ = ["NATIVE_FUNCTIONS", "TARGETS", "adapt", "go_round", "native_records", "without_native"]

#: The export's targets: the rule engine the rules and their tests are written for.
TARGETS = ("prometheus", "victoriametrics")
#: PromQL's native-histogram functions, which MetricsQL does not have.
NATIVE_FUNCTIONS = ("histogram_count", "histogram_fraction", "histogram_sum")
#: What the query tests compare at: VictoriaMetrics keeps 12 to 13 significant digits of a sample.
NEAREST = 1e-9
_NATIVE_CALL = re.compile(r"\bhistogram_(?:count|fraction|sum)\(")
_RULE_TESTS = re.compile(r"^(?P<rules>[\w-]+)\.test\.yml$")


@functools.cache
def _yaml() -> ModuleType:
    """PyYAML, imported only for this target: the Prometheus export loads no library beyond the
    standard one (Airflow installs PyYAML, so beside Airflow it is there)."""
    try:
        import yaml
    except ImportError:
        raise ValueError(
            "store-metrics export --target victoriametrics needs PyYAML (pip install pyyaml); "
            "--target prometheus does not"
        ) from None
    return yaml


@functools.cache
def _dumper() -> type:
    """A YAML dumper with block style for multi-line strings (the expressions), as the hand-written
    files have them."""
    yaml = _yaml()

    class Dumper(yaml.SafeDumper):  # type: ignore[name-defined,misc]
        pass

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def _load(text: str) -> Any:
    return _yaml().safe_load(text)


def _dump(document: Any) -> str:
    dumped: str = _yaml().dump(document, Dumper=_dumper(), sort_keys=False, width=100000, allow_unicode=True)
    return dumped


def _header(text: str) -> str:
    """The leading comment lines of a rendered file."""
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(lines)


def native_records(document: Mapping[str, Any]) -> set[str]:
    """The recorded series that the native-histogram functions read (records of native histograms)."""
    found = set()
    for group in document["groups"]:
        for rule in group["rules"]:
            for call in _NATIVE_CALL.finditer(rule["expr"]):
                # the function's last argument, up to its closing parenthesis
                depth, start, end = 1, call.end(), call.end()
                while depth and end < len(rule["expr"]):
                    depth += {"(": 1, ")": -1}.get(rule["expr"][end], 0)
                    end += 1
                argument = rule["expr"][start : end - 1].rsplit(",", 1)[-1].strip()
                found.add(argument)
    return found


def without_native(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (a rule file) without the native-histogram records and the ``or`` branches that
    read them: each such branch is the expression's tail from the first ``or`` line after which
    every native function call comes."""
    native = native_records(document)
    for group in document["groups"]:
        kept = []
        for rule in group["rules"]:
            if rule.get("record") in native:
                continue
            lines = rule["expr"].split("\n")
            for index, line in enumerate(lines):
                head, tail = "\n".join(lines[:index]), "\n".join(lines[index:])
                if (
                    line.lstrip().startswith("or")
                    and _NATIVE_CALL.search(tail)
                    and not _NATIVE_CALL.search(head)
                ):
                    rule["expr"] = head
                    break
            if _NATIVE_CALL.search(rule["expr"]):
                raise ValueError(
                    f"{rule.get('record') or rule.get('alert')}: a native histogram function left"
                )
            kept.append(rule)
        group["rules"] = kept
    return document


def go_round(value: float, nearest: float = NEAREST) -> float:
    """MetricsQL's ``round(value, nearest)``, step for step as VictoriaMetrics computes it (so the
    expected value rounds exactly as the query's does)."""
    if math.isnan(value) or math.isinf(value):
        return value
    exponent = math.floor(math.log10(nearest) + 1e-12)
    p10 = 10.0 ** (-exponent)
    value += 0.5 * math.copysign(nearest, value)
    value -= math.fmod(value, nearest)
    return math.trunc(value * p10) / p10


def _number(value: Any) -> float:
    return float(value) if not isinstance(value, str) else float(value.replace("Inf", "inf"))


def _alert_groups(rule_files: Mapping[str, str], names: list[str]) -> dict[str, str]:
    groups = {}
    for name in names:
        for group in _load(rule_files[name])["groups"]:
            groups.update({rule["alert"]: group["name"] for rule in group["rules"] if "alert" in rule})
    return groups


def adapt_tests(text: str, rule_files: Mapping[str, str]) -> str:
    """A promtool test file as vmalert-tool reads it (see the module's docstring)."""
    document = _load(text)
    groups = _alert_groups(rule_files, document["rule_files"])
    native: set[str] = set()
    for name in document["rule_files"]:
        native |= native_records(_load(rule_files[name]))
    for test in document["tests"]:
        external = test.get("external_labels", {})
        queries = []
        for case in test.pop("promql_expr_test", []):
            if any(re.search(rf"(?<![\w:]){re.escape(record)}(?![\w:])", case["expr"]) for record in native):
                continue  # a record this target leaves out
            case["expr"] = f"round({case['expr']}, {NEAREST:g}) keep_metric_names"
            for sample in case.get("exp_samples", []):
                sample["value"] = go_round(_number(sample["value"]))
            queries.append(case)
        if queries:
            test["metricsql_expr_test"] = queries
        for case in test.get("alert_rule_test", []):
            case["groupname"] = groups[case["alertname"]]
            for alert in case.get("exp_alerts", []):
                alert["exp_labels"] = {**external, **alert.get("exp_labels", {})}
    return _dump(document)


def _retitled(header: str) -> str:
    return (
        header.replace("promtool test rules", "vmalert-tool unittest --files")
        + "# For VictoriaMetrics (store-metrics export --target victoriametrics): vmalert-tool's format;\n"
        "# see store_metrics.shipped.victoriametrics for what differs from the Prometheus export.\n"
    )


def adapt(files: Mapping[PurePosixPath, str], collector: PurePosixPath) -> dict[PurePosixPath, str]:
    """The export's ``files`` for VictoriaMetrics: the rule files without native histograms (where
    they have any) and every promtool test file in vmalert-tool's format; the rest unchanged."""
    out = dict(files)
    rule_files: dict[str, str] = {}
    for path, text in files.items():
        if path.parent != collector or not path.name.endswith("rules.yml"):
            continue
        if _NATIVE_CALL.search(text):
            adapted = (
                _retitled(_header(text))
                + "# MetricsQL has no native-histogram functions and VictoriaMetrics stores no native\n"
                "# histograms: the records of native histograms and the branches that read them are left\n"
                "# out; the classic series (_bucket, _sum, _count) are recorded as on Prometheus.\n"
                + _dump(without_native(_load(text)))
            )
        else:
            adapted = text.replace("promtool test rules", "vmalert-tool unittest --files")
        out[path] = rule_files[path.name] = adapted
    for path, text in files.items():
        if path.parent == collector and _RULE_TESTS.match(path.name):
            out[path] = _retitled(_header(text)) + adapt_tests(text, rule_files)
    return out
