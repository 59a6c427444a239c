"""The generated tables of docs/alerts.md: the export settings, the alerts, the dashboard's panels.

Each table sits between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in the page and is
written from its source (the settings table, the exported rule files, the exported dashboard), so
the page never drifts from what ships; tests/docs/test_alerts_docs.py checks it is up to date.

    python -m generators.docs          # rewrite the tables
    python -m generators.docs --check  # exit 1 if one is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from store_metrics.pipeline import export, settings

__all__ = ["PAGE", "TABLES", "main", "render"]

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "alerts.md"
RULE_FILES = ("rules.yml", "watcher-rules.yml", "server-rules.yml", "footprint-rules.yml")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_table() -> str:
    rows = ["| Setting | Default | What it is |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | `{_cell(s.default)}` | {_cell(s.description)} |" for s in settings.SETTINGS]
    return "\n".join(rows)


def _files() -> dict[str, str]:
    return {str(path): text for path, text in export.render_all().items()}


def _alerts(changes: dict[str, str] | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every alert of the exported rule files: (file, rule), by name."""
    files = {str(path): text for path, text in export.render_all(changes=changes).items()}
    return {
        rule["alert"]: (name, rule)
        for name in RULE_FILES
        for group in yaml.safe_load(files[f"collector/{name}"])["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }


#: A value other than the default, per kind, to see which alerts a setting changes.
_OTHER = {
    settings.Kind.DURATION: "7h",
    settings.Kind.RATIO: "0.123",
    settings.Kind.COUNT: "7",
    settings.Kind.NUMBER: "250",  # a stall bucket bound too
}
_THRESHOLDS = [s for s in settings.SETTINGS if s.kind in _OTHER and s.name != "rule_interval"]


def _said(rule: dict[str, Any]) -> tuple[str, ...]:
    notes = rule["annotations"]
    return (rule["expr"], rule["for"], notes["summary"], notes["description"])


def _settings_of(alerts: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """The threshold and duration settings each alert's expression, ``for`` or text follows."""
    used: dict[str, list[str]] = {name: [] for name in alerts}
    for setting in _THRESHOLDS:
        changed = _alerts({setting.name: _OTHER[setting.kind]})
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
    return text.split(". ", 1)[0].rstrip(".") + "."


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


#: Table name -> its text.
TABLES: dict[str, Callable[[], str]] = {
    "settings": settings_table,
    "alerts": alerts_table,
    "panels": panels_table,
}


def render(page: str) -> str:
    """``page`` with every generated table rewritten."""
    for name, build in TABLES.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        if start not in page or end not in page:
            raise ValueError(f"docs/alerts.md lacks the {start} ... {end} block")
        before, rest = page.split(start, 1)
        _, after = rest.split(end, 1)
        page = f"{before}{start}\n{build()}\n{end}{after}"
    return page


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or check) docs/alerts.md's generated tables.")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = PAGE.read_text(encoding="utf-8")
    wanted = render(text)
    if text == wanted:
        return 0
    if args.check:
        print(f"out of date: {PAGE} (run python -m generators.docs)", file=sys.stderr)
        return 1
    PAGE.write_text(wanted, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
