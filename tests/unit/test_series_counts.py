"""How many series each topology creates per task, DAG and API server worker (docs/alerts.md, "Bounded
series"): the page's numbers are the catalogue's and the API server's own value sets, and a task
that makes every kind of call emits exactly that many.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import store_metrics
from store_metrics import catalogue
from store_metrics.api_server import routes
from store_metrics.catalogue import Operation, Outcome, Store
from support.lines import parse_influx
from testbed.repository import ROOT
from testbed.udp import UdpReceiver

PAGE = ROOT / "docs" / "alerts.md"
COMPLETED = [o for o in Outcome if o is not Outcome.ERROR]
#: The status classes the Execution API answers state store requests with.
STATUSES = (200, 404, 400, 500)


def per_task() -> int:
    """Per store: a series per completed outcome, and one per failing method (the operation tag)."""
    return len(Store) * (len(COMPLETED) + len(Operation))


def per_worker() -> int:
    """Every label set the API server side can emit for one worker, histogram series counted."""
    operations = [o.value for o in Operation]
    classes = {routes.status_class(s) for s in STATUSES}
    requests = {(op, routes.status_class(s), routes.outcome_of(op, s)) for op in operations for s in STATUSES}
    sizes = {op: {routes.value_size(op, n, n) for n in (10, 5_000, 500_000, 5_000_000)} for op in operations}

    def histogram(metric: catalogue.Metric) -> int:
        return len(metric.buckets) + 3  # the buckets, +Inf, _sum, _count

    durations = len(Store) * sum(len(classes) * len(sizes[op]) for op in operations)
    bodies = len(Store) * len(operations) * len(classes)
    long_stalls = len(Store) * len(operations) + 1  # and none/none: no state store route in flight
    return (
        len(Store) * len(requests)
        + durations * histogram(catalogue.SERVER_DURATION)
        + bodies * (histogram(catalogue.SERVER_REQUEST_SIZE) + histogram(catalogue.SERVER_RESPONSE_SIZE))
        + histogram(catalogue.LOOP_STALL)
        + 1  # the stall maximum gauge
        + long_stalls
    )


def documented() -> dict[str, list[str]]:
    section = PAGE.read_text().split("## Bounded series", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    return {
        cells[0]: cells[1:] for cells in ([c.strip() for c in row.strip("|").split("|")] for row in rows[1:])
    }


def test_the_documented_counts_are_the_catalogue_s() -> None:
    assert (per_task(), per_worker()) == (18, 1635)
    table = documented()
    for topology, (task, dag, worker) in table.items():
        assert task.startswith(str(per_task())), topology
        assert dag == "0 beyond its tasks'", topology
        assert worker in (f"{per_worker():,}", "0"), topology
    assert f"{per_worker():,} per API server worker" in PAGE.read_text()


class _Store:
    """A state store whose methods raise while ``failing`` is set."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.failing = False

    def _check(self) -> None:
        if self.failing:
            raise RuntimeError("store down")

    def get(self, key: str, default: Any = None) -> Any:
        self._check()
        return self.data.get(key, default)

    def set(self, key: str, value: Any, **_: Any) -> None:
        self._check()
        self.data[key] = value

    def delete(self, key: str) -> None:
        self._check()
        self.data.pop(key, None)

    def clear(self) -> None:
        self._check()
        self.data.clear()


def every_call(store: Any, inner: _Store) -> None:
    """Every outcome, then every method failing, twice (the second time adds no series)."""
    for _ in range(2):
        inner.failing = False
        store.get("k")  # absent
        store.set("k", 1)
        store.get("k")  # found
        store.delete("k")
        store.clear()
        inner.failing = True
        for call in (
            lambda: store.get("k"),
            lambda: store.set("k", 1),
            lambda: store.delete("k"),
            store.clear,
        ):
            with contextlib.suppress(RuntimeError):
                call()


def test_a_task_making_every_kind_of_call_emits_exactly_the_documented_series(
    udp_receiver: UdpReceiver,
) -> None:
    emitter = store_metrics.configure("statsd", host="127.0.0.1", port=udp_receiver.port, flush_interval=60.0)
    tags = catalogue.task_tags(dag_id="d", task_id="t", run_type="manual", operator="X", team_name=None)
    task_inner, asset_inner = _Store(), _Store()
    every_call(store_metrics.instrument_task_store(task_inner, emitter, tags), task_inner)
    every_call(store_metrics.instrument_asset_store(asset_inner, emitter, tags), asset_inner)
    assert emitter.flush(5.0)
    lines = udp_receiver.lines_before_marker()
    series = {(name, tuple(sorted(labels.items()))) for name, labels, _ in map(parse_influx, lines)}
    assert len(series) == per_task()
    # The same series statsd_exporter and the collector serve: one name per outcome, operation on errors.
    errors = {dict(labels)["operation"] for name, labels in series if name.endswith(".error")}
    assert errors == {o.value for o in Operation}
    assert not any(re.search(r"pid|host|instance", str(labels)) for _, labels in series)
