"""What Airflow's providers manager learns about this package: its config section and its plugin.

The ``apache_airflow_provider`` entry point (pyproject.toml) names ``get_provider_info``, the
way Airflow's own providers (OpenLineage, for one) declare themselves. From it, ``airflow
providers list`` lists the package, and ``airflow config list`` / ``airflow config get-value
store_metrics <option>`` know the ``[store_metrics]`` section: every ``[store_metrics]`` option with
its type, default, description and example.

Airflow reads it in every process it starts, a task's included: so it is data, ``provider_info.json``
beside this module, built from the option table at development time
(``generators/provider_info.py``, which also says why the plugin is named in the description and why
``host``, ``port`` and ``prefix`` default to empty) and checked current by the tests.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from .. import __version__

PACKAGE = "airflow-store-metrics"
#: The plugin, as ``airflow plugins`` lists it (entry point group ``airflow.plugins``).
PLUGIN = "store_metrics"


def get_provider_info() -> dict[str, Any]:
    """The provider info Airflow reads through the ``apache_airflow_provider`` entry point."""
    text = resources.files(__package__).joinpath("provider_info.json").read_text(encoding="utf-8")
    info: dict[str, Any] = json.loads(text)
    return {**info, "versions": [__version__]}
