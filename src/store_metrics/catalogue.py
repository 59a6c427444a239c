"""The one list of metrics store-metrics emits.

Every other part of the product derives from this module or is checked against it: the
accessor wrappers pick their counters here, the adapters take names, kinds and descriptions
from here, and the docs, the collector config, the Prometheus rules and the Grafana
dashboards are tested against :data:`METRICS`.

Names are written without the prefix (``task_state_store.write``); the emitter puts the
configured prefix in front (default ``airflow``), so the OpenTelemetry path shows up in
Prometheus as ``airflow_task_state_store_write_total``, exactly the series the upstream
Airflow proposal produces.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

DEFAULT_PREFIX = "airflow"

# Tag keys, in the order they appear on the wire (InfluxDB and DogStatsD lines).
DAG_ID = "dag_id"
TASK_ID = "task_id"
RUN_TYPE = "run_type"
OPERATOR = "operator"
TEAM_NAME = "team_name"
OPERATION = "operation"

#: The tags every state store counter carries.
BASE_TAGS: tuple[str, ...] = (DAG_ID, TASK_ID, RUN_TYPE, OPERATOR)
#: Tags present only when set (``team_name`` exists on multi-team deployments only).
OPTIONAL_TAGS: tuple[str, ...] = (TEAM_NAME,)
#: The order tags are written in on the wire.
TAG_ORDER: tuple[str, ...] = (*BASE_TAGS, TEAM_NAME, OPERATION)


class Kind(str, enum.Enum):
    """What kind of instrument a metric is."""

    COUNTER = "counter"


class Scope(str, enum.Enum):
    """Which accessor a call went through."""

    TASK = "task_state_store"
    ASSET = "asset_state_store"


class Operation(str, enum.Enum):
    """The value of the ``operation`` tag on ``*.error``: which method raised."""

    GET = "get"
    SET = "set"
    DELETE = "delete"
    CLEAR = "clear"


class Outcome(str, enum.Enum):
    """The last part of a counter's name: what a completed call did."""

    READ_FOUND = "read_found"
    READ_ABSENT = "read_absent"
    WRITE = "write"
    DELETE = "delete"
    CLEAR = "clear"
    ERROR = "error"


@dataclass(frozen=True)
class Metric:
    """One metric: its unprefixed name, kind, description and tags."""

    name: str
    kind: Kind
    description: str
    tags: tuple[str, ...]
    optional_tags: tuple[str, ...] = OPTIONAL_TAGS
    unit: str = "{call}"

    @property
    def all_tags(self) -> tuple[str, ...]:
        """Every tag key the metric may carry, in wire order."""
        keys = set(self.tags) | set(self.optional_tags)
        return tuple(k for k in TAG_ORDER if k in keys)

    def full_name(self, prefix: str = DEFAULT_PREFIX) -> str:
        """The dotted name as emitted: ``airflow.task_state_store.write``."""
        return f"{prefix}.{self.name}" if prefix else self.name

    def prometheus_name(self, prefix: str = DEFAULT_PREFIX) -> str:
        """The series name Prometheus shows for this metric.

        Dots become underscores and counters get ``_total``, as both the OpenTelemetry
        Prometheus exporter and our statsd_exporter mapping produce.
        """
        base = self.full_name(prefix).replace(".", "_").replace("-", "_")
        return f"{base}_total" if self.kind is Kind.COUNTER else base


_DESCRIPTIONS: dict[Outcome, str] = {
    Outcome.READ_FOUND: "{what} get/aget calls that found a stored value.",
    Outcome.READ_ABSENT: "{what} get/aget calls for a key that was not stored (the default was returned).",
    Outcome.WRITE: "{what} set/aset calls that completed.",
    Outcome.DELETE: "{what} delete/adelete calls that completed.",
    Outcome.CLEAR: "{what} clear/aclear calls that completed.",
    Outcome.ERROR: "{what} calls that raised; the operation tag says which method.",
}
_SCOPE_WHAT = {Scope.TASK: "Task state store", Scope.ASSET: "Asset state store"}


def _build() -> tuple[Metric, ...]:
    metrics = []
    for scope in Scope:
        for outcome in Outcome:
            tags = (*BASE_TAGS, OPERATION) if outcome is Outcome.ERROR else BASE_TAGS
            metrics.append(
                Metric(
                    name=f"{scope.value}.{outcome.value}",
                    kind=Kind.COUNTER,
                    description=_DESCRIPTIONS[outcome].format(what=_SCOPE_WHAT[scope]),
                    tags=tags,
                )
            )
    return tuple(metrics)


#: The state store counters: what the accessor wrappers count, dashboards and rules show.
STATE_STORE_METRICS: tuple[Metric, ...] = _build()

#: The one increment ``store-metrics check`` sends to prove the pipeline end to end.
CHECK = Metric(
    name="store_metrics.check",
    kind=Kind.COUNTER,
    description="Test increments sent by `store-metrics check`; not a state store call.",
    tags=(),
    optional_tags=(),
)

#: Every metric store-metrics emits.
METRICS: tuple[Metric, ...] = (*STATE_STORE_METRICS, CHECK)
_BY_NAME = {m.name: m for m in METRICS}


def get(name: str) -> Metric:
    """Return the metric called ``name`` (unprefixed), or raise ``KeyError``."""
    return _BY_NAME[name]


def metric_for(scope: Scope, outcome: Outcome) -> Metric:
    """Return the counter for ``outcome`` of a call through ``scope``."""
    return _BY_NAME[f"{scope.value}.{outcome.value}"]


def counters() -> Iterator[Metric]:
    """Iterate over every counter (state store counters and the check counter), in catalogue order."""
    return (m for m in METRICS if m.kind is Kind.COUNTER)


def task_tags(
    *, dag_id: str, task_id: str, run_type: str, operator: str, team_name: str | None = None
) -> dict[str, str]:
    """Build the tag set of one task's accessors; ``team_name`` only when it is set."""
    tags = {DAG_ID: dag_id, TASK_ID: task_id, RUN_TYPE: run_type, OPERATOR: operator}
    if team_name:
        tags[TEAM_NAME] = team_name
    return tags
