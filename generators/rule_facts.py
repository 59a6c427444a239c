"""What the dashboards and monitors take from the shipped rule files (the templates, read as data)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from store_metrics.pipeline import templating

__all__ = ["ERROR_RATIO_THRESHOLD", "alert"]


def alert(name: str, template: str = "rules.yml") -> dict[str, Any]:
    """The alerting rule ``name`` of the rule file ``template`` (rendered for the default prefix)."""
    document = yaml.safe_load(templating.render(template, "airflow"))
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    (found,) = [rule for rule in rules if rule.get("alert") == name]
    return dict(found)


def _threshold(expr: str) -> float:
    match = re.search(r"> ([0-9.]+)$", expr)
    if match is None:
        raise ValueError(f"no threshold in {expr!r}")
    return float(match.group(1))


#: StateStoreErrorRateHigh's threshold: the Datadog monitors use the same.
ERROR_RATIO_THRESHOLD = _threshold(alert("StateStoreErrorRateHigh")["expr"])
