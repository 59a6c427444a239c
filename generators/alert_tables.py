"""The tables of docs/alerts.md: the export settings, the alerts, the dashboard's panels.

Each from what ships (the settings table, the exported rule files, the exported dashboard), so the
page never drifts from it; ``generators.docs`` writes them into the page.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from store_metrics.shipped import export, settings

RULE_FILES = ("rules.yml", "watcher-rules.yml", "server-rules.yml", "footprint-rules.yml")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_table() -> str:
    rows = ["| Setting | Default | Range | What it is |", "| --- | --- | --- | --- |"]
    rows += [
        f"| `{s.name}` | `{_cell(s.default)}` | {s.range} | {_cell(s.description)} |"
        for s in settings.SETTINGS
    ]
    return "\n".join(rows)


def _files() -> dict[str, str]:
    return {str(path): text for path, text in export.render_all().items()}


def _alerts(changes: dict[str, str] | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every alert of the exported rule files: (file, rule), by name."""
    files = {str(path): text for path, text in export.render_all(changes=changes, tests=False).items()}
    return {
        rule["alert"]: (name, rule)
        for name in RULE_FILES
        for group in yaml.safe_load(files[f"collector/{name}"])["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }


#: The kinds of setting an alert's expression, ``for`` or text may follow.
_NUMERIC = (
    settings.ValueType.DURATION,
    settings.ValueType.RATIO,
    settings.ValueType.COUNT,
    settings.ValueType.NUMBER,
)
_THRESHOLDS = [s for s in settings.SETTINGS if s.kind in _NUMERIC and s.name != "rule_interval"]


def _other(setting: settings.Setting) -> str:
    """A valid value of ``setting`` other than its default (one end of its range, or a stall bound)."""
    for value in (setting.high, setting.low, "250"):
        if value and value != setting.default:
            try:
                settings.resolve({setting.name: value})
            except ValueError:
                continue
            return value
    raise AssertionError(f"no other valid value of {setting.name}")


def _said(rule: dict[str, Any]) -> tuple[str, ...]:
    notes = rule["annotations"]
    return (rule["expr"], rule["for"], notes["summary"], notes["description"])


def _settings_of(alerts: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """The threshold and duration settings each alert's expression, ``for`` or text follows."""
    used: dict[str, list[str]] = {name: [] for name in alerts}
    for setting in _THRESHOLDS:
        changed = _alerts({setting.name: _other(setting)})
        for name, (_, rule) in alerts.items():
            if _said(changed[name][1]) != _said(rule):
                used[name].append(f"`{setting.name}`")
    return used


def alerts_table() -> str:
    rows = ["| Alert | Severity | For | Rule file | Settings |", "| --- | --- | --- | --- | --- |"]
    alerts = _alerts()
    used = _settings_of(alerts)
    for name, (path, rule) in alerts.items():
        link = f"[{name}](runbooks/{name.lower()}.md)"
        rows.append(
            f"| {link} | {rule['labels']['severity']} | {rule['for']} | {path} | {', '.join(used[name])} |"
        )
    return "\n".join(rows)


def _first_sentence(text: str) -> str:
    # A full stop inside an abbreviation ("i.e.", "e.g.") does not end the sentence.
    return re.split(r"(?<!\bi\.e)(?<!\be\.g)\. ", text, maxsplit=1)[0].rstrip(".") + "."


def panels_table() -> str:
    rows = ["| Row | Panel | Shows |", "| --- | --- | --- |"]
    board: dict[str, Any] = json.loads(_files()["dashboards/store-metrics.json"])
    row = ""
    for panel in board["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            nested = panel.get("panels", [])
        else:
            nested = [panel]
        for inner in nested:
            rows.append(
                f"| {_cell(row)} | {_cell(inner['title'])} | {_cell(_first_sentence(inner['description']))} |"
            )
    return "\n".join(rows)
