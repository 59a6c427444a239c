"""Builds ``src/store_metrics/integration/provider_info.json``: what Airflow's providers manager learns
about the package, its config section and its plugin, from the option table (development time: run
``python -m generators.provider_info``; tests/airflow/test_provider.py checks the shipped file is current).

The ``apache_airflow_provider`` entry point (pyproject.toml) names
``store_metrics.integration.provider_info.get_provider_info``, which reads the shipped file,
the way Airflow's own providers (OpenLineage, for one) declare themselves; Airflow reads it in every
process it starts, so the wheel ships the result, not the building. From it, ``airflow
providers list`` lists the package, and ``airflow config list`` / ``airflow config get-value
store_metrics <option>`` know the ``[store_metrics]`` section: every option of
``store_metrics.config.options.CONFIG_OPTIONS`` with its type, default, description and example.

The plugin is named in the description, not under ``plugins``: it loads through the
``airflow.plugins`` entry point in every Airflow process, whatever ``[core]
lazy_discover_providers`` says, while a provider's ``plugins`` are loaded only when that option is
``False``, and then Airflow finds the same plugin twice and reports "Plugin 'store_metrics' already
registered, skipping" as a plugin import error.

Options whose value falls back to Airflow's ``[metrics]`` section (``host``, ``port``,
``prefix``) are declared with an empty default: an empty value is "not set" to
``store_metrics.config.reader``, which then reads ``[metrics]``, as it does without this entry point.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from store_metrics.config.options import CONFIG_OPTIONS, EXAMPLES, Option
from store_metrics.integration.provider_info import PACKAGE, PLUGIN

#: The file the wheel ships.
SHIPPED = (
    Path(__file__).resolve().parent.parent / "src" / "store_metrics" / "integration" / "provider_info.json"
)

SECTION = "store_metrics"
PLUGIN_CLASS = "store_metrics.integration.plugin.StoreMetricsPlugin"
DOCS = "https://store-metrics.github.io/airflow-store-metrics/"
_LINK = re.compile(r"\[([^\]]+)\]\([^)]+\)")


def _plain(text: str) -> str:
    """Documentation text without its Markdown links (Airflow shows it as plain text)."""
    return _LINK.sub(r"\1", text)


def option_type(option: Option) -> str:
    """Airflow's name for the option's type: boolean, integer, float or string."""
    default = option.default
    if isinstance(default, bool):
        return "boolean"
    if isinstance(default, int):
        return "integer"
    if isinstance(default, float):
        return "float"
    return "string"


def option_description(option: Option) -> str:
    parts = [_plain(option.doc).rstrip(".") + "."]
    parts.append(f"Accepted: {_plain(option.accepted)}.")
    if option.default_doc:
        parts.append(f"Default: {_plain(option.default_doc)}.")
    return "\n".join(parts) + "\n"


def config_section() -> dict[str, Any]:
    """The ``[store_metrics]`` section in the shape of Airflow's provider info ``config``."""
    return {
        "description": "store-metrics: counters for every state store call of every task "
        f"(the airflow-store-metrics plugin). Reference: {DOCS}configure/\n",
        "options": {
            option.name: {
                "description": option_description(option),
                "version_added": None,
                "type": option_type(option),
                "example": EXAMPLES.get(option.name),
                "default": option.airflow_default,
            }
            for option in CONFIG_OPTIONS
        },
    }


def build() -> dict[str, Any]:
    """The provider info, without the version (added by
    ``store_metrics.integration.provider_info.get_provider_info``)."""
    return {
        "package-name": PACKAGE,
        "name": "store-metrics",
        "description": "Counters for every Apache Airflow state store call: who reads, writes, deletes "
        f"and clears, per DAG and task. Its plugin `{PLUGIN}` ({PLUGIN_CLASS}: a task and triggerer "
        "listener, an API server middleware) loads through the airflow.plugins entry point. "
        f"Documentation: {DOCS}\n",
        "config": {SECTION: config_section()},
    }


def text() -> str:
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write (or check) src/store_metrics/integration/provider_info.json."
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if the shipped file is out of date")
    if parser.parse_args(argv).check:
        if SHIPPED.read_text(encoding="utf-8") != text():
            print(f"out of date: {SHIPPED} (run python -m generators.provider_info)", file=sys.stderr)
            return 1
        return 0
    SHIPPED.write_text(text(), encoding="utf-8")
    print(f"wrote {SHIPPED}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
