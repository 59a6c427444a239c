"""The one list of metrics store-metrics emits.

Every other part of the product derives from this module or is checked against it: the
accessor wrappers pick their counters here, the adapters take names, kinds and descriptions
from here, and the docs, the collector config, the Prometheus rules and the Grafana
dashboards are tested against ``METRICS``.

Names are written without the prefix (``task_state_store.write``); the emitter puts the
configured prefix in front (default ``airflow``), so the OpenTelemetry path shows up in
Prometheus as ``airflow_task_state_store_write_total``, exactly the series the upstream
Airflow proposal produces.

``METRICS`` is what task processes emit: a counter per state store call
(``STATE_STORE_METRICS``), and one per retried attempt saying whether its first read found what
an earlier attempt saved (``RETRY_METRICS``). ``SERVER_METRICS`` is what the API server's
workers emit about the Execution API's state store routes and their own event loop
(``store_metrics.api_server``): counters, histograms (fixed bucket boundaries in ms and bytes)
and one gauge, tagged by store, operation and status class, never by id or key.
``INVENTORY_METRICS`` is what ``store-metrics inventory`` reads from the metadata database
(``store_metrics.inventory``): gauges of what each DAG and task, and each asset, keeps in the
state store, never by key or run.
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
# Server-side tags (API server: the state store routes and the event loop).
STORE = "store"
STATUS_CLASS = "status_class"
OUTCOME = "outcome"
VALUE_SIZE = "value_size"
WORKER = "worker"
# State store footprint tag (the inventory): the asset's name.
ASSET = "asset"

# Tag values of the state store calls an asset watcher's trigger makes in the triggerer
# (store_metrics.integration.triggerer): a watcher belongs to an asset, not to a DAG or a task.
#: ``run_type`` of a watcher's calls (never one of Airflow's DagRunType values).
RUN_TYPE_ASSET_WATCHER = "asset_watcher"

# The values the plugin makes up. Each is written between angle brackets, which Airflow refuses in
# a DAG or task id (``[\w.-]+``) and which every value from outside is escaped out of
# (store_metrics.naming), so a DAG named ``unknown`` and the calls nobody could attribute are two
# series, and no dashboard or tab can show one as the other.
#: ``dag_id`` of a watcher's calls: no DAG made them.
DAG_ID_NONE = "<none>"
#: A tag value nobody could know (no token, no task instance, an empty value): never a guess.
UNKNOWN = "<unknown>"
#: Every tag value of the series new tag sets are counted under past ``max_series``.
OVERFLOW = "<overflow>"

#: The tags every state store counter carries.
BASE_TAGS: tuple[str, ...] = (DAG_ID, TASK_ID, RUN_TYPE, OPERATOR)
#: Tags present only when set (``team_name`` exists on multi-team deployments only).
OPTIONAL_TAGS: tuple[str, ...] = (TEAM_NAME,)
#: The order tags are written in on the wire.
TAG_ORDER: tuple[str, ...] = (
    *BASE_TAGS,
    TEAM_NAME,
    STORE,
    OPERATION,
    STATUS_CLASS,
    OUTCOME,
    VALUE_SIZE,
    WORKER,
    ASSET,
)


class Kind(str, enum.Enum):
    """What kind of instrument a metric is."""

    COUNTER = "counter"
    #: Observations counted into fixed buckets (``Metric.buckets``), with their count and sum.
    HISTOGRAM = "histogram"
    #: The largest value observed in each export interval.
    GAUGE = "gauge"


class Store(str, enum.Enum):
    """Which accessor a call went through."""

    TASK = "task_state_store"
    ASSET = "asset_state_store"

    @property
    def tag(self) -> str:
        """The ``store`` tag's value for it (``task``, ``asset``): the API server's and the rules'."""
        return self.value.split("_", 1)[0]

    @classmethod
    def of_tag(cls, tag: str) -> Store:
        """The store a ``store`` tag names (``task``, ``asset``)."""
        return next(store for store in cls if store.tag == tag)


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
class Recording:
    """How the shipped rules record a task-side counter: exactly, per rule interval.

    ``series`` is the recorded series' base name (``level:store_metrics_...:increase``; the exported
    name carries the metric prefix, ``store_metrics.shipped.records``), ``labels`` the labels its
    samples get besides the counter's own tags. Several counters may share one series when their
    labels tell them apart (every state store counter is ``task:store_metrics_calls:increase`` with
    its ``store`` and ``outcome``). A counter with a recording gets its rule, its promtool cases and
    its place in the "counts stopped arriving" alert from this row alone.
    """

    series: str
    labels: tuple[tuple[str, str], ...]


#: The recorded state store calls: one series, every panel and alert of the task side reads it.
CALLS_RECORDING = "task:store_metrics_calls:increase"
#: The recorded retried attempts: apart from the calls (a retried attempt is not a call, and no sum
#: of calls may count it), labelled ``store`` (``task``) and ``outcome`` (the counter's last part).
RETRIES_RECORDING = "task:store_metrics_retries:increase"


@dataclass(frozen=True)
class Metric:
    """One metric: its unprefixed name, kind, description and tags (and, for a counter the rules
    record, its ``Recording``)."""

    name: str
    kind: Kind
    description: str
    tags: tuple[str, ...]
    optional_tags: tuple[str, ...] = OPTIONAL_TAGS
    unit: str = "{call}"
    #: Upper bounds of a histogram's buckets, ascending (``+Inf`` is implied).
    buckets: tuple[float, ...] = ()
    #: How the rules record it (task-side counters only).
    recording: Recording | None = None

    @property
    def all_tags(self) -> tuple[str, ...]:
        """Every tag key the metric may carry, in wire order."""
        keys = set(self.tags) | set(self.optional_tags)
        return tuple(k for k in TAG_ORDER if k in keys)

    def full_name(self, prefix: str = DEFAULT_PREFIX) -> str:
        """The dotted name as emitted: ``airflow.task_state_store.write``."""
        return full_name(prefix, self.name)

    def prometheus_name(self, prefix: str = DEFAULT_PREFIX) -> str:
        """The series name Prometheus shows for this metric.

        Dots become underscores, counters get ``_total``, and a histogram or gauge gets its unit
        as a suffix (``_milliseconds``, ``_bytes``; a histogram's series then add ``_bucket``,
        ``_sum``, ``_count``), as the OpenTelemetry Prometheus exporters and our statsd_exporter
        mappings produce.
        """
        base = self.full_name(prefix).replace(".", "_").replace("-", "_")
        if self.kind is Kind.COUNTER:
            return f"{base}_total"
        suffix = UNIT_SUFFIXES.get(self.unit, "")
        return f"{base}_{suffix}" if suffix and not base.endswith(f"_{suffix}") else base


def full_name(prefix: str, name: str) -> str:
    """``prefix.name``, or ``name`` alone when the prefix is empty."""
    return f"{prefix}.{name}" if prefix else name


#: How the OpenTelemetry Prometheus exporters spell a unit as a name suffix.
UNIT_SUFFIXES: dict[str, str] = {"ms": "milliseconds", "By": "bytes", "s": "seconds"}

_DESCRIPTIONS: dict[Outcome, str] = {
    Outcome.READ_FOUND: "{what} get/aget calls that found a stored value.",
    Outcome.READ_ABSENT: "{what} get/aget calls for a key that was not stored (the default was returned).",
    Outcome.WRITE: "{what} set/aset calls that completed.",
    Outcome.DELETE: "{what} delete/adelete calls that completed.",
    Outcome.CLEAR: "{what} clear/aclear calls that completed.",
    Outcome.ERROR: "{what} calls that raised; the operation tag says which method.",
}
_STORE_WHAT = {Store.TASK: "Task state store", Store.ASSET: "Asset state store"}


def _build() -> tuple[Metric, ...]:
    metrics = []
    for store in Store:
        for outcome in Outcome:
            tags = (*BASE_TAGS, OPERATION) if outcome is Outcome.ERROR else BASE_TAGS
            metrics.append(
                Metric(
                    name=f"{store.value}.{outcome.value}",
                    kind=Kind.COUNTER,
                    description=_DESCRIPTIONS[outcome].format(what=_STORE_WHAT[store]),
                    tags=tags,
                    recording=Recording(CALLS_RECORDING, ((STORE, store.tag), (OUTCOME, outcome.value))),
                )
            )
    return tuple(metrics)


#: The state store counters: what the accessor wrappers count, dashboards and rules show.
STATE_STORE_METRICS: tuple[Metric, ...] = _build()

# -- retried attempts: did the retry resume? ---------------------------------------------------------

_RETRY_WHEN = (
    "Retried attempts (try_number >= 2, each map index its own) whose first task state store get/aget "
    "that answered found {what}; once per attempt, a read that raised decides nothing."
)


def _retry_metric(outcome: str, what: str) -> Metric:
    """A retried-attempt counter: the call counters' tags, recorded apart from the calls."""
    return Metric(
        name=f"task_state_store.{outcome}",
        kind=Kind.COUNTER,
        description=_RETRY_WHEN.format(what=what),
        tags=BASE_TAGS,
        unit="{attempt}",
        recording=Recording(RETRIES_RECORDING, ((STORE, Store.TASK.tag), (OUTCOME, outcome))),
    )


RETRY_RESUMED = _retry_metric("retry_resumed", "a stored value, so the retry could resume")
RETRY_NOT_RESUMED = _retry_metric("retry_not_resumed", "nothing, so the retry started over")
#: Per retried attempt, not per call: whether a retry found what an earlier attempt saved.
RETRY_METRICS: tuple[Metric, ...] = (RETRY_RESUMED, RETRY_NOT_RESUMED)


def retry_metric(found: bool) -> Metric:
    """The counter of a retried attempt whose first task store read ``found`` a value (or not)."""
    return RETRY_RESUMED if found else RETRY_NOT_RESUMED


#: The one increment ``store-metrics check`` sends to prove the pipeline end to end.
CHECK = Metric(
    name="store_metrics.check",
    kind=Kind.COUNTER,
    description="Test increments sent by `store-metrics check`; not a state store call.",
    tags=(),
    optional_tags=(),
)

#: Every metric a task process (or ``store-metrics check``) emits.
METRICS: tuple[Metric, ...] = (*STATE_STORE_METRICS, *RETRY_METRICS, CHECK)

# -- the API server side ---------------------------------------------------------------------------

#: Bucket upper bounds of request durations, in ms (roughly 1-2.5-5 per decade, 1 ms to 10 s).
DURATION_BUCKETS_MS: tuple[float, ...] = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
#: Bucket upper bounds of event-loop stalls, in ms. A tick less than 1 ms late is no stall.
STALL_BUCKETS_MS: tuple[float, ...] = (2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
#: Bucket upper bounds of body sizes, in bytes: powers of 4 from 64 B to 16 MiB, so the proposal's
#: 0.4 KB, 59 KB and 689 KB values land in three different buckets (1 KiB, 64 KiB, 1 MiB).
SIZE_BUCKETS_BYTES: tuple[float, ...] = tuple(float(4**i) for i in range(3, 13))

_ROUTE_TAGS = (STORE, OPERATION, STATUS_CLASS)

SERVER_REQUESTS = Metric(
    name="api_server.state_store.requests",
    kind=Kind.COUNTER,
    description="Execution API state store requests served by this API server worker; outcome mirrors "
    "the task side (a GET answered 404 is read_absent, any other 4xx/5xx is error).",
    tags=(*_ROUTE_TAGS, OUTCOME, WORKER),
    optional_tags=(),
    unit="{request}",
)
SERVER_DURATION = Metric(
    name="api_server.state_store.request.duration",
    kind=Kind.HISTOGRAM,
    description="Time from the request reaching the API server's app to the last byte of its response, "
    "by the size class of the value moved (request body of a set, response body of a get).",
    tags=(*_ROUTE_TAGS, VALUE_SIZE, WORKER),
    optional_tags=(),
    unit="ms",
    buckets=DURATION_BUCKETS_MS,
)
SERVER_REQUEST_SIZE = Metric(
    name="api_server.state_store.request.size",
    kind=Kind.HISTOGRAM,
    description="Request body bytes of state store requests, counted as the app reads them.",
    tags=(*_ROUTE_TAGS, WORKER),
    optional_tags=(),
    unit="By",
    buckets=SIZE_BUCKETS_BYTES,
)
SERVER_RESPONSE_SIZE = Metric(
    name="api_server.state_store.response.size",
    kind=Kind.HISTOGRAM,
    description="Response body bytes of state store requests, counted as they are sent (streaming too).",
    tags=(*_ROUTE_TAGS, WORKER),
    optional_tags=(),
    unit="By",
    buckets=SIZE_BUCKETS_BYTES,
)
LOOP_STALL = Metric(
    name="api_server.event_loop.stall",
    kind=Kind.HISTOGRAM,
    description="How late the stall monitor's ticker woke up on the API server worker's event loop, "
    "one observation per tick at least 1 ms late: time the loop could not serve anything.",
    tags=(WORKER,),
    optional_tags=(),
    unit="ms",
    buckets=STALL_BUCKETS_MS,
)
LOOP_STALL_MAX = Metric(
    name="api_server.event_loop.stall.max",
    kind=Kind.GAUGE,
    description="The longest event-loop stall of the API server worker in the last export interval.",
    tags=(WORKER,),
    optional_tags=(),
    unit="ms",
)
LONG_STALLS = Metric(
    name="api_server.event_loop.long_stalls",
    kind=Kind.COUNTER,
    description="Event-loop stalls at or above stall_threshold_ms, once per state store (store, "
    "operation) in flight when the loop got going again; none/none when no state store request was.",
    tags=(STORE, OPERATION, WORKER),
    optional_tags=(),
    unit="{stall}",
)

#: Every metric an API server worker emits.
SERVER_METRICS: tuple[Metric, ...] = (
    SERVER_REQUESTS,
    SERVER_DURATION,
    SERVER_REQUEST_SIZE,
    SERVER_RESPONSE_SIZE,
    LOOP_STALL,
    LOOP_STALL_MAX,
    LONG_STALLS,
)
# -- the state store footprint (store-metrics inventory) -------------------------------------------

#: The ``<other>`` bucket's tag value: what lies outside the top ``inventory_top`` DAGs, tasks or assets.
OTHER = "<other>"
#: Every value the plugin makes up (see ``DAG_ID_NONE``): kept as they are on every backend.
RESERVED_VALUES: frozenset[str] = frozenset({DAG_ID_NONE, UNKNOWN, OVERFLOW, OTHER})
_FOOTPRINT_WHAT = {Store.TASK: "the task state store", Store.ASSET: "the asset state store"}
_FOOTPRINT_PER = {
    Store.TASK: "per DAG and task (the largest inventory_top, the rest under `<other>`)",
    Store.ASSET: "per asset name (the largest inventory_top, the rest under `<other>`)",
}


def _footprint(scope: Store, tags: tuple[str, ...]) -> tuple[Metric, ...]:
    what, per = _FOOTPRINT_WHAT[scope], _FOOTPRINT_PER[scope]
    rows = [
        ("entries", "{entry}", f"Entries (keys) {what} holds in the metadata database, {per}."),
        (
            "bytes",
            "By",
            f"Bytes of the values {what} holds (the stored JSON text, measured in SQL), {per}; no series "
            "while some of the entries hold a reference to a custom state store backend (size unknown).",
        ),
        ("oldest_age", "s", f"Seconds since the least recently updated entry of {what} was written, {per}."),
        ("newest_age", "s", f"Seconds since the most recently updated entry of {what} was written, {per}."),
        (
            "external_entries",
            "{entry}",
            f"Entries of {what} whose value is a reference to a custom state store backend "
            f"([workers] state_store_backend), {per}.",
        ),
    ]
    if scope is Store.TASK:
        rows.append(
            (
                "expired_entries",
                "{entry}",
                f"Entries of {what} whose expires_at has passed but that are still stored (retention "
                f"not yet applied), {per}.",
            )
        )
    return tuple(
        Metric(
            name=f"{scope.value}.footprint.{name}",
            kind=Kind.GAUGE,
            description=description,
            tags=tags,
            optional_tags=(),
            unit=unit,
        )
        for name, unit, description in rows
    )


#: What ``store-metrics inventory`` reads from the metadata database: how much each DAG and task,
#: and each asset, keeps in the state store. Gauges, by ``dag_id``/``task_id`` or ``asset``; never
#: by key or run.
FOOTPRINT_METRICS: tuple[Metric, ...] = (
    *_footprint(Store.TASK, (DAG_ID, TASK_ID)),
    *_footprint(Store.ASSET, (ASSET,)),
)
INVENTORY_UP = Metric(
    name="state_store_inventory.up",
    kind=Kind.GAUGE,
    description="1 when the inventory's last query of this store's table succeeded, 0 when it failed "
    "(the footprint then shown is the last one read).",
    tags=(STORE,),
    optional_tags=(),
    unit="{state}",  # an annotation, not "1": exporters would add "_ratio" to the name
)
INVENTORY_QUERY_DURATION = Metric(
    name="state_store_inventory.query.duration",
    kind=Kind.GAUGE,
    description="How long the inventory's last successful aggregate query of this store's table took.",
    tags=(STORE,),
    optional_tags=(),
    unit="ms",
)
INVENTORY_FOOTPRINT_AGE = Metric(
    name="state_store_inventory.footprint.age",
    kind=Kind.GAUGE,
    description="Seconds since the footprint shown for this store was read from the database.",
    tags=(STORE,),
    optional_tags=(),
    unit="s",
)
#: Every metric ``store-metrics inventory`` reports: the footprint and the inventory's own health.
INVENTORY_METRICS: tuple[Metric, ...] = (
    *FOOTPRINT_METRICS,
    INVENTORY_UP,
    INVENTORY_QUERY_DURATION,
    INVENTORY_FOOTPRINT_AGE,
)
#: What ``store-metrics catalogue`` prints (the README's catalogue table).
CATALOGUE_TABLE: tuple[Metric, ...] = (*METRICS, *INVENTORY_METRICS)

#: Everything store-metrics can emit, task side, API server side and inventory.
ALL_METRICS: tuple[Metric, ...] = (*METRICS, *SERVER_METRICS, *INVENTORY_METRICS)
_BY_NAME = {m.name: m for m in ALL_METRICS}


def markdown_table(prefix: str = DEFAULT_PREFIX) -> str:
    """What ``store-metrics catalogue`` prints, and docs/metrics.md shows: ``CATALOGUE_TABLE``."""
    rows = ["| metric | Prometheus series | tags | description |", "|---|---|---|---|"]
    for m in CATALOGUE_TABLE:
        tags = ", ".join(m.tags) + (f" (+ {', '.join(m.optional_tags)} when set)" if m.optional_tags else "")
        rows.append(
            f"| `{m.full_name(prefix)}` | `{m.prometheus_name(prefix)}` | {tags or '-'} | {m.description} |"
        )
    return "\n".join(rows) + "\n"


def get(name: str) -> Metric:
    """Return the metric called ``name`` (unprefixed), or raise ``KeyError``."""
    return _BY_NAME[name]


def metric_for(store: Store, outcome: Outcome) -> Metric:
    """Return the counter for ``outcome`` of a call through ``store``."""
    return _BY_NAME[f"{store.value}.{outcome.value}"]


def counters() -> Iterator[Metric]:
    """Iterate over every counter (state store counters and the check counter), in catalogue order."""
    return (m for m in METRICS if m.kind is Kind.COUNTER)


def recorded_counters() -> tuple[Metric, ...]:
    """The task-side counters the rules record (``Metric.recording``), in catalogue order."""
    return tuple(m for m in METRICS if m.recording is not None)


def call_counters() -> tuple[Metric, ...]:
    """The counters recorded with the calls (``CALLS_RECORDING``), in catalogue order: every call a task
    makes, whatever its store and outcome. What the dashboards' "every call" selections name, so a
    counter added here with that recording is counted there too."""
    return tuple(m for m in METRICS if m.recording is not None and m.recording.series == CALLS_RECORDING)


def all_counters() -> Iterator[Metric]:
    """Every counter, task side and API server side."""
    return (m for m in ALL_METRICS if m.kind is Kind.COUNTER)


def task_tags(
    *, dag_id: str, task_id: str, run_type: str, operator: str, team_name: str | None = None
) -> dict[str, str]:
    """Build the tag set of one task's accessors; ``team_name`` only when it is set."""
    tags = {DAG_ID: dag_id, TASK_ID: task_id, RUN_TYPE: run_type, OPERATOR: operator}
    if team_name:
        tags[TEAM_NAME] = team_name
    return tags
