#@ helm/merge_values.py: written as it is by store_metrics.shipped.helm (no token).
"""Merge Helm values files as Helm does, except that a list is joined instead of replaced.

    python merge_values.py values-store-metrics.yaml my-values.yaml > merged.yaml
    helm upgrade --install airflow apache-airflow/airflow -f merged.yaml

Helm merges the maps of several ``-f`` files key by key, but a list in a later file replaces the
whole list of an earlier one: ``-f values-store-metrics.yaml -f my-values.yaml`` keeps only your
``statsd.extraMappings`` (or ``env``) and drops store-metrics'. This merges the files left to right
the same way (maps key by key, a later scalar wins, ``null`` removes the key, as in Helm) except
that a later list's items are appended to the earlier list, leaving out an item equal to one
already there. Needs PyYAML (``pip install pyyaml``; every Airflow installation has it).
"""

import sys
from typing import Any

import yaml


def merge(base: Any, extra: Any) -> Any:
    """``extra`` over ``base``: maps merged key by key, lists joined, anything else replaced."""
    if isinstance(base, dict) and isinstance(extra, dict):
        merged = dict(base)
        for key, value in extra.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = merge(base[key], value) if key in base else value
        return merged
    if isinstance(base, list) and isinstance(extra, list):
        return base + [item for item in extra if item not in base]
    return extra


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    merged: Any = {}
    for path in paths:
        with open(path, encoding="utf-8") as file:
            merged = merge(merged, yaml.safe_load(file) or {})
    yaml.safe_dump(merged, sys.stdout, sort_keys=False, default_flow_style=False, width=1000)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
