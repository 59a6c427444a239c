"""What ``store-metrics demo`` feeds besides the tasks' counters, so every row of the dashboard has data.

Everything goes to the demo's one OpenTelemetry ``MeterProvider`` (the tasks' Prometheus endpoint),
so one scrape target lights the whole dashboard, through the product's own code paths:

* **API server rows**: the plugin's root middleware
  (``StateStoreRouteMetrics``) on the in-process Execution API that
  ``dag.test()`` talks to. That is Airflow's own Execution API app, serving the routes an API server
  serves under ``/execution``; the stall monitor watches the
  loop it runs on.
* **Triggers row**: an asset watcher's trigger run as Airflow's triggerer runs one: a fresh instance
  from its serialized form, ``asset_state_store`` set to the watched asset's store, instrumented by
  the plugin's triggerer hook (``store_metrics.integration.triggerer.instrument_trigger``), its
  calls going to the same in-process Execution API through a supervisor's comms.
* **Footprint row**: the inventory's collection over the demo's metadata database, published as the
  inventory's gauges (``Publisher``).

Airflow is imported only inside the functions: the demo sets its environment first.
"""

from __future__ import annotations

import importlib
import uuid
from types import SimpleNamespace
from typing import Any

from ..api_server import ServerMetrics, StateStoreRouteMetrics, worker_identity
from ..config.reader import OptionValues
from ..counting.runtime import create_emitter


def _emitter_on(provider: Any, options: OptionValues, instance: str) -> Any:
    """A long-lived emitter (cumulative, like the API server's and the inventory's) on ``provider``."""
    return create_emitter(
        "otel",
        meter_provider=provider,
        prefix=options.prefix,
        temporality="cumulative",
        instance_id=instance,
        flush_interval=options.flush_interval,
        flush_timeout=options.flush_timeout,
    )


def attach_api_server_metrics(provider: Any, options: OptionValues) -> ServerMetrics:
    """Put the plugin's root middleware on the in-process Execution API; before its first request."""
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    worker = worker_identity(options.worker_label_style)
    metrics = ServerMetrics(
        _emitter_on(provider, options, worker),
        worker,
        tick_ms=options.stall_tick_ms,
        threshold_ms=options.stall_threshold_ms,
        log_interval=options.flush_interval,
    )
    # The app on its own serves the Execution API at its root, not under /execution.
    in_process_api_server().app.add_middleware(StateStoreRouteMetrics, metrics=metrics, mounted_at="")
    return metrics


def run_asset_watcher(dag: Any, times: int) -> list[Any]:
    """Run the watcher of the asset that schedules ``dag``, ``times`` times, the triggerer's way."""
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import AssetStateStoreAccessors
    from airflow.sdk.execution_time.supervisor import InProcessTestSupervisor

    from ..integration.triggerer import instrument_trigger

    asset = next(a for a in dag.timetable.asset_condition.objects if getattr(a, "watchers", None))
    classpath, kwargs = asset.watchers[0].trigger.serialize()
    module, _, name = classpath.rpartition(".")
    trigger_class = getattr(importlib.import_module(module), name)
    events = []
    for _ in range(times):
        trigger = trigger_class(**kwargs)
        trigger.asset_state_store = AssetStateStoreAccessors(inlets=[Asset(name=asset.name, uri=asset.uri)])
        instrument_trigger(trigger)
        # A trigger has no task instance: the supervisor only needs an id for its comms.
        events.append(
            InProcessTestSupervisor.run_trigger_in_process(  # type: ignore[no-untyped-call]
                trigger=trigger, ti=SimpleNamespace(id=uuid.uuid4())
            )
        )
    return events


class Footprint:
    """The inventory over the demo's database, published on ``provider`` each time it is read."""

    def __init__(self, provider: Any, options: OptionValues) -> None:
        from ..inventory.collect import Collector
        from ..inventory.database import Database
        from ..inventory.publish import INSTANCE_ID, Publisher

        self._collector = Collector(Database.from_airflow(options.inventory_timeout), options.inventory_top)
        self._publisher = Publisher(_emitter_on(provider, options, INSTANCE_ID), options.flush_timeout)

    def refresh(self) -> int:
        """Read both tables once and publish; return how many entries the stores hold."""
        snapshot = self._collector.collect()
        self._publisher.publish(snapshot)
        totals = (footprint.total for footprint in snapshot.footprints.values())
        return sum(total.entries for total in totals if total is not None)
