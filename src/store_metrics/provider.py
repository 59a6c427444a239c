"""What Airflow's providers manager learns about this package: its config section and its plugin.

The ``apache_airflow_provider`` entry point (pyproject.toml) names :func:`get_provider_info`, the
way Airflow's own providers (OpenLineage, for one) declare themselves. From it, ``airflow
providers list`` lists the package, and ``airflow config list`` / ``airflow config get-value
store_metrics <option>`` know the ``[store_metrics]`` section: every option of
:data:`store_metrics.options.CONFIG_OPTIONS` with its type, default, description and example.

The plugin is named in the description, not under ``plugins``: it loads through the
``airflow.plugins`` entry point in every Airflow process, whatever ``[core]
lazy_discover_providers`` says, while a provider's ``plugins`` are loaded only when that option is
``False``, and then Airflow finds the same plugin twice and reports "Plugin 'store_metrics' already
registered, skipping" as a plugin import error.

Options whose value falls back to Airflow's ``[metrics]`` section (``host``, ``port``,
``prefix``) are declared with an empty default: an empty value is "not set" to
:mod:`store_metrics.config`, which then reads ``[metrics]``, as it does without this entry point.
"""

from __future__ import annotations

import re
from typing import Any

from . import __version__
from .options import CONFIG_OPTIONS, EXAMPLES, Option

PACKAGE = "airflow-store-metrics"
SECTION = "store_metrics"
#: The plugin, as ``airflow plugins`` lists it (entry point group ``airflow.plugins``).
PLUGIN = "store_metrics"
PLUGIN_CLASS = "store_metrics.plugin.StoreMetricsPlugin"
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


def option_default(option: Option) -> str:
    """The default as Airflow's configuration holds it: text, empty where ``[metrics]`` decides."""
    if option.airflow:
        return ""
    if isinstance(option.default, bool):
        return str(option.default)
    if isinstance(option.default, float) and option.default.is_integer():
        return str(int(option.default))
    return str(option.default)


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
                "default": option_default(option),
            }
            for option in CONFIG_OPTIONS
        },
    }


def get_provider_info() -> dict[str, Any]:
    """The provider info Airflow reads through the ``apache_airflow_provider`` entry point."""
    return {
        "package-name": PACKAGE,
        "name": "store-metrics",
        "description": "Counters for every Apache Airflow state store call: who reads, writes, deletes "
        f"and clears, per DAG and task. Its plugin `{PLUGIN}` ({PLUGIN_CLASS}: a task and triggerer "
        "listener, an API server middleware) loads through the airflow.plugins entry point. "
        f"Documentation: {DOCS}\n",
        "versions": [__version__],
        "config": {SECTION: config_section()},
    }
