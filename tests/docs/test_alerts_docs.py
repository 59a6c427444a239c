"""docs/alerts.md and docs/runbooks/: a page per alert, where each alert's runbook_url points, and
the page's generated tables (settings, alerts, panels) up to date with what ships."""

from __future__ import annotations

import re

import yaml

from store_metrics.shipped import settings
from testbed.repository import ROOT

RUNBOOKS = ROOT / "docs" / "runbooks"
SITE = "https://store-metrics.github.io/airflow-store-metrics/"


def alerts() -> dict[str, dict]:
    found = {}
    for path in (ROOT / "collector").glob("*rules.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            found |= {r["alert"]: r for r in group["rules"] if "alert" in r}
    return found


def test_every_alert_has_its_runbook_page_where_its_url_points() -> None:
    found = alerts()
    assert len(found) == 11
    assert {p.stem for p in RUNBOOKS.glob("*.md")} == {name.lower() for name in found}
    for name, rule in found.items():
        page = RUNBOOKS / f"{name.lower()}.md"
        # A page docs/x/y.md is served at <site>/x/y/ (MkDocs).
        assert rule["annotations"]["runbook_url"] == f"{SITE}runbooks/{page.stem}/"
        text = page.read_text()
        assert text.startswith(f"# {name}\n")
        for section in ("## What it means", "## How to confirm", "## What to do"):
            assert section in text, (name, section)
        assert f"**Severity:** {rule['labels']['severity']}" in text, name


def test_the_generated_tables_are_up_to_date() -> None:
    # That every generated block is current, this page's tables too: tests/docs/test_docs.py.
    page = (ROOT / "docs" / "alerts.md").read_text()
    for setting in settings.SETTINGS:
        assert f"| `{setting.name}` | `{setting.default}` |" in page
    for name in alerts():
        assert f"[{name}](runbooks/{name.lower()}.md)" in page


def test_every_runbook_names_only_settings_that_exist() -> None:
    names = {s.name for s in settings.SETTINGS}
    for page in RUNBOOKS.glob("*.md"):
        header = page.read_text().split("## What it means", 1)[0]
        for name in re.findall(r"`([a-z_]+)`", header):
            if name.endswith((".yml", ".json")) or "/" in name:
                continue
            assert name in names or name.startswith("store-metrics"), (page.name, name)
