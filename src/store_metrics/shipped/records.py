"""The names of the recorded series (the rule files' ``record:``), which carry the metric prefix.

A recorded series is named ``level:metric:operations`` (Prometheus' convention). Its ``metric`` part
starts with the Prometheus form of the metric prefix, as the raw series do: for the default prefix
``task:airflow_store_metrics_calls:increase``, for ``myco.airflow``
``task:myco_airflow_store_metrics_calls:increase``, for the empty prefix
``task:store_metrics_calls:increase``. So two prefixes exported into one Prometheus (two Airflow
fleets, a prefix migration) record apart, and every panel and alert reads its own prefix's series.

Templates write a recorded series by its base name (the empty prefix's) as a token,
``@record:task:store_metrics_calls:increase@`` (``templating`` fills it in with ``name``); the
dashboards' builders by its base name too, named for the export's prefix by ``name``
(``store_metrics.shipped.render_context.RenderContext.record``).
"""

from __future__ import annotations

import re

from store_metrics import catalogue

__all__ = ["CALLS", "RETRIES", "TOKEN", "name", "prometheus_prefix"]

#: The recorded calls (base name): every task-side panel and alert reads it (rules.yml).
CALLS = catalogue.CALLS_RECORDING
#: The recorded retried attempts (base name): the resume rate's panel, alert and UI tab read it.
RETRIES = catalogue.RETRIES_RECORDING
#: How a template writes a recorded series: ``@record:<base name>@``.
TOKEN = "record:"
_BASE = re.compile(r"^[a-z_]+:store_metrics_[a-z0-9_]+:[a-z0-9_]+$")


def prometheus_prefix(prefix: str) -> str:
    """The metric prefix as the raw series spell it: ``myco.airflow`` -> ``myco_airflow``."""
    return catalogue.full_name(prefix, "x").removesuffix("x").rstrip(".").replace(".", "_")


def name(base: str, prefix: str = catalogue.DEFAULT_PREFIX) -> str:
    """The recorded series ``base`` (``level:store_metrics_...:operations``) for ``prefix``."""
    if not _BASE.match(base):
        raise ValueError(f"not a recorded series' base name: {base!r}")
    level, metric, operations = base.split(":")
    spelled = prometheus_prefix(prefix)
    return f"{level}:{spelled}_{metric}:{operations}" if spelled else base
