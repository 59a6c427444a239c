"""``footprint-rules.yml`` and ``footprint-rules.test.yml``: rules over the state store footprint.

The gauges of ``store-metrics inventory --serve`` (:data:`store_metrics.catalogue.INVENTORY_METRICS`,
one exporter per deployment on ``:9490``). Every rule first takes the ``max`` across the labels that
tell replicas apart (``max without (instance, pod, job)``), so a second inventory during a rollout
does not double a sum; the ``other`` buckets (``dag_id="other"``, ``task_id="other"``,
``asset="other"``) are summed with the rest, so totals are exact whatever ``inventory_top`` is.

Recording rules: entries, bytes and expired entries per DAG, entries and bytes per asset, the same
per store (totals), and the inventory's health per store (up, age of the footprint, query
duration). Alerting rules: expired entries nobody removes (``StateStoreRetentionNotApplied``), an
inventory that cannot read the tables or is gone (``StateStoreInventoryDown``), a footprint that
is not being refreshed (``StateStoreInventoryStale``). Built from the catalogue; the promtool unit
tests are hand-written (``templates/footprint-rules.test.yml``) with the series names filled in
for the prefix.

A separate file from ``rules.yml`` because it is about a separate process: a deployment that does
not run the inventory leaves this file out of ``prometheus.yml`` (``StateStoreInventoryDown``
fires while the inventory's series are absent).
"""

from __future__ import annotations

from typing import Any

from store_metrics import catalogue
from store_metrics.catalogue import Metric, Store

from . import rule_file, templating
from .promql import by, one_replica

__all__ = [
    "ASSET_BYTES",
    "ASSET_ENTRIES",
    "DAG_BYTES",
    "DAG_ENTRIES",
    "DAG_EXPIRED",
    "FILENAME",
    "INVENTORY_AGE",
    "INVENTORY_QUERY_DURATION",
    "INVENTORY_UP",
    "RECORDED",
    "STALE_AFTER_SECONDS",
    "STORE_BYTES",
    "STORE_ENTRIES",
    "STORE_EXPIRED",
    "TESTS_FILENAME",
    "alerting_rules",
    "recording_rules",
    "render",
    "render_tests",
    "rules_document",
]

FILENAME = "footprint-rules.yml"
TESTS_FILENAME = "footprint-rules.test.yml"

#: Recorded series (``level:metric:operations``).
DAG_ENTRIES = "dag_id:store_metrics_footprint_entries:sum"
DAG_BYTES = "dag_id:store_metrics_footprint_bytes:sum"
DAG_EXPIRED = "dag_id:store_metrics_footprint_expired_entries:sum"
ASSET_ENTRIES = "asset:store_metrics_footprint_entries:sum"
ASSET_BYTES = "asset:store_metrics_footprint_bytes:sum"
STORE_ENTRIES = "store:store_metrics_footprint_entries:sum"
STORE_BYTES = "store:store_metrics_footprint_bytes:sum"
STORE_EXPIRED = "store:store_metrics_footprint_expired_entries:sum"
INVENTORY_UP = "store:store_metrics_inventory_up:max"
INVENTORY_AGE = "store:store_metrics_inventory_footprint_age_seconds:min"
INVENTORY_QUERY_DURATION = "store:store_metrics_inventory_query_duration_ms:max"
RECORDED = (
    DAG_ENTRIES,
    DAG_BYTES,
    DAG_EXPIRED,
    ASSET_ENTRIES,
    ASSET_BYTES,
    STORE_ENTRIES,
    STORE_BYTES,
    STORE_EXPIRED,
    INVENTORY_UP,
    INVENTORY_AGE,
    INVENTORY_QUERY_DURATION,
)

#: Alert settings (edit here, then re-export).
#: Expired entries must have stayed, with not one removed, for longer than this: set it above the
#: interval at which `airflow state-store clean` runs.
RETENTION_FOR = "6h"
#: A drop of the expired count within this window is a cleanup that ran (longer than two readings
#: of the inventory, 300 s apart by default).
CLEANUP_SEEN_WITHIN = "15m"
INVENTORY_DOWN_FOR = "15m"
#: Three default ``inventory_interval`` (300 s): two readings in a row missed.
STALE_AFTER_SECONDS = 900
STALE_FOR = "5m"

_HEADER = """\
# State store footprint (docs/footprint.md): the gauges of
# `store-metrics inventory --serve`. Every rule takes the max across replicas first
# (max without (instance, pod, job)), so two inventories during a rollout do not double a sum; the
# `other` buckets are summed with the rest, so totals are exact. Recording rules: entries, bytes
# and expired entries per DAG, per asset and per store; the inventory's health per store.
# Alerting rules: expired entries nobody removes, an inventory down or gone, a stale footprint.
# Load this file only where the inventory runs: StateStoreInventoryDown fires while its series
# are absent.
# Unit tests: promtool test rules collector/footprint-rules.test.yml
"""


def _footprint(store: Store, name: str) -> Metric:
    return catalogue.get(f"{store.value}.footprint.{name}")


def _store_label(store: Store) -> str:
    return "task" if store is Store.TASK else "asset"


def _summed(metric: Metric, prefix: str, labels: tuple[str, ...]) -> str:
    """``sum by (labels)`` of the gauge, each series counted once across replicas."""
    return f"sum {by(labels)}({one_replica(metric.prometheus_name(prefix))})"


def _per_group_rules(prefix: str) -> list[dict[str, Any]]:
    """Entries, bytes (and expired entries) per DAG and per asset, ``other`` included."""
    rows: list[tuple[str, Store, str, tuple[str, ...]]] = [
        (DAG_ENTRIES, Store.TASK, "entries", (catalogue.DAG_ID,)),
        (DAG_BYTES, Store.TASK, "bytes", (catalogue.DAG_ID,)),
        (DAG_EXPIRED, Store.TASK, "expired_entries", (catalogue.DAG_ID,)),
        (ASSET_ENTRIES, Store.ASSET, "entries", (catalogue.ASSET,)),
        (ASSET_BYTES, Store.ASSET, "bytes", (catalogue.ASSET,)),
    ]
    return [
        {"record": record, "expr": _summed(_footprint(store, name), prefix, labels)}
        for record, store, name, labels in rows
    ]


def _per_store_rules(prefix: str) -> list[dict[str, Any]]:
    """Each store's totals: every group, ``other`` included."""
    rows: list[tuple[str, Store, str]] = [
        (STORE_ENTRIES, Store.TASK, "entries"),
        (STORE_ENTRIES, Store.ASSET, "entries"),
        (STORE_BYTES, Store.TASK, "bytes"),
        (STORE_BYTES, Store.ASSET, "bytes"),
        (STORE_EXPIRED, Store.TASK, "expired_entries"),
    ]
    return [
        {
            "record": record,
            "expr": _summed(_footprint(store, name), prefix, ()),
            "labels": {catalogue.STORE: _store_label(store)},
        }
        for record, store, name in rows
    ]


def _health_rules(prefix: str) -> list[dict[str, Any]]:
    """Per store: up if any replica can read the table, the freshest footprint, the slowest query."""
    store = (catalogue.STORE,)
    return [
        {
            "record": INVENTORY_UP,
            "expr": f"max {by(store)}({catalogue.INVENTORY_UP.prometheus_name(prefix)})",
        },
        {
            "record": INVENTORY_AGE,
            "expr": f"min {by(store)}({catalogue.INVENTORY_FOOTPRINT_AGE.prometheus_name(prefix)})",
        },
        {
            "record": INVENTORY_QUERY_DURATION,
            "expr": f"max {by(store)}({catalogue.INVENTORY_QUERY_DURATION.prometheus_name(prefix)})",
        },
    ]


def recording_rules(prefix: str) -> list[dict[str, Any]]:
    return [*_per_group_rules(prefix), *_per_store_rules(prefix), *_health_rules(prefix)]


_WHERE = " See https://store-metrics.github.io/airflow-store-metrics/footprint/"


def _retention_alert() -> dict[str, Any]:
    expired = STORE_EXPIRED
    return {
        "alert": "StateStoreRetentionNotApplied",
        # Expired entries are there, and none was removed lately: a cleanup, even one batch of it,
        # makes the count drop, which resets() sees; only entries that outlive every cleanup (or no
        # cleanup at all) keep the alert pending for RETENTION_FOR.
        "expr": (
            f"{expired} > 0\nunless on ({catalogue.STORE})\nresets({expired}[{CLEANUP_SEEN_WITHIN}]) > 0"
        ),
        "for": RETENTION_FOR,
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": (
                "{{ $value }} {{ $labels.store }} state store entries past their retention are "
                f"still stored after {RETENTION_FOR}"
            ),
            "description": (
                "The {{ $labels.store }} state store has held entries whose expires_at has passed "
                f"for {RETENTION_FOR}, and not one has been removed meanwhile: nobody runs `airflow "
                "state-store clean` (or it fails), so they stay in the metadata database. "
                f"{DAG_EXPIRED} says which DAGs hold them." + _WHERE
            ),
        },
    }


def _inventory_down_alert(prefix: str) -> dict[str, Any]:
    up = catalogue.INVENTORY_UP.prometheus_name(prefix)
    return {
        "alert": "StateStoreInventoryDown",
        "expr": f"{INVENTORY_UP} == 0\nor\nabsent({up})",
        "for": INVENTORY_DOWN_FOR,
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": (
                "{{ if $labels.store }}The state store inventory cannot read the {{ $labels.store }} "
                "store's table{{ else }}No state store inventory reports{{ end }}"
            ),
            "description": (
                "{{ if $labels.store }}For "
                f"{INVENTORY_DOWN_FOR}"
                " every query of store-metrics inventory on the {{ $labels.store }} state store's "
                "table has failed: the footprint shown is the last one read. Its log says why (a "
                "statement timeout, an unreachable database).{{ else }}For "
                f"{INVENTORY_DOWN_FOR} Prometheus has had no {up} series: "
                "`store-metrics inventory --serve` is not running or not scraped (job "
                "store-metrics-inventory of prometheus.yml), or does not reach this Prometheus. "
                "Where no inventory runs, leave footprint-rules.yml out.{{ end }}" + _WHERE
            ),
        },
    }


def _inventory_stale_alert(prefix: str) -> dict[str, Any]:
    age = catalogue.INVENTORY_FOOTPRINT_AGE.prometheus_name(prefix)
    return {
        "alert": "StateStoreInventoryStale",
        # The raw series, not the recorded INVENTORY_AGE: the alerts are another group, evaluated
        # in no set order with the recording rules, and the summary gives the age itself.
        "expr": f"min {by((catalogue.STORE,))}({age}) > {STALE_AFTER_SECONDS}",
        "for": STALE_FOR,
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": (
                "The {{ $labels.store }} state store footprint is {{ $value | humanizeDuration }} old"
            ),
            "description": (
                "The footprint store-metrics inventory shows for the {{ $labels.store }} state "
                f"store was read more than {STALE_AFTER_SECONDS // 60} minutes ago (three default "
                "inventory_interval) and has not been refreshed since: its queries fail or hang, "
                "or inventory_interval is longer than that." + _WHERE
            ),
        },
    }


def alerting_rules(prefix: str) -> list[dict[str, Any]]:
    return [_retention_alert(), _inventory_down_alert(prefix), _inventory_stale_alert(prefix)]


def rules_document(prefix: str) -> dict[str, Any]:
    return rule_file.document("store-metrics-footprint", recording_rules(prefix), alerting_rules(prefix))


def render(prefix: str) -> str:
    """``footprint-rules.yml``."""
    return rule_file.render(rules_document(prefix), prefix, _HEADER)


def render_tests(prefix: str) -> str:
    """``footprint-rules.test.yml``: promtool unit tests of :func:`render`'s rules."""
    return templating.render(TESTS_FILENAME, prefix)
