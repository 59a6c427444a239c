"""Which template each generator writes, and the command that writes (or checks) them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .datadog import dashboard as datadog_dashboard
from .datadog import monitors as datadog_monitors
from .grafana import dashboard as grafana_dashboard
from .tokens import SENTINEL, tokenize

__all__ = ["GENERATED", "TEMPLATES", "build", "main"]

#: The package's template folder.
TEMPLATES = Path(__file__).resolve().parent.parent / "src" / "store_metrics" / "shipped" / "templates"


def _monitor(name: str) -> Callable[[str], str]:
    return lambda prefix: datadog_monitors.render(name, prefix)


#: Template name (relative to ``TEMPLATES``) -> builder (prefix -> file text).
GENERATED: dict[str, Callable[[str], str]] = {
    "dashboards/store-metrics.json": grafana_dashboard.render,
    "datadog/dashboard.json": datadog_dashboard.render,
    **{f"datadog/monitors/{name}": _monitor(name) for name in datadog_monitors.MONITORS},
}


def build() -> dict[str, str]:
    """Every generated template's text, by template name."""
    return {name: tokenize(render(SENTINEL)) for name, render in GENERATED.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the dashboard templates the generators build.")
    parser.add_argument("--check", action="store_true", help="exit 1 if a template is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name, text in build().items():
        path = TEMPLATES / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    say = "out of date" if args.check else "wrote"
    for path in stale:
        print(f"{say}: {path}", file=sys.stderr if args.check else sys.stdout)
    return 1 if args.check and stale else 0
