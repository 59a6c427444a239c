"""One collection: both tables read once, the last good footprint kept, each problem said once.

``Collector`` is what the serve loop and the one-shot command call. A collection runs one
aggregate query per table. A failure never escapes it:

* the store keeps the footprint of its last good reading, and is marked down (``up = 0``);
* the problem is logged once (``store_metrics.logs.once``), keyed by its kind
  (``timeout``, ``failed``: and the store; ``unavailable``: the database as a whole), however many
  intervals it lasts;
* when the database cannot be reached at all, the other table is not tried in that collection:
  one problem, one line;
* the first good reading after a problem says so once (INFO) and lets the next problem be
  logged again.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from .. import logs
from ..catalogue import Store
from .database import UNAVAILABLE, Database, problem_of, short
from .footprint import StoreFootprint, footprint_of

LOG_KEY = "inventory:"


@dataclass(frozen=True)
class Snapshot:
    """What the inventory knows now: each store's last good footprint and whether it is current."""

    footprints: Mapping[Store, StoreFootprint] = field(default_factory=dict)
    #: ``True`` when the store's last query succeeded.
    up: Mapping[Store, bool] = field(default_factory=dict)
    #: The last problem per store that is down, as logged (kind: message).
    problems: Mapping[Store, str] = field(default_factory=dict)


class Collector:
    """Reads the footprint of both stores from ``database``, keeping ``top`` groups of each."""

    def __init__(self, database: Database, top: int) -> None:
        self.database = database
        self.top = top
        self._lock = threading.Lock()
        self._snapshot = Snapshot()
        self._outage = logs.Outage(LOG_KEY)

    @property
    def snapshot(self) -> Snapshot:
        """The latest ``Snapshot`` (replaced whole after each collection: safe to read anytime)."""
        return self._snapshot

    def collect(self, now: dt.datetime | None = None) -> Snapshot:
        """Read both tables once; return (and keep) the new snapshot. Never raises."""
        previous = self._snapshot
        footprints = dict(previous.footprints)
        up: dict[Store, bool] = {}
        problems: dict[Store, str] = {}
        unreachable = ""
        for store in Store:
            if unreachable:
                up[store] = False
                problems[store] = unreachable
                continue
            try:
                reading = self.database.read(store, now)
                footprints[store] = footprint_of(
                    store, reading.rows, reading.at, reading.duration_ms, self.top
                )
            except Exception as exc:
                kind = problem_of(exc)
                up[store] = False
                problems[store] = f"{kind}: {short(exc)}"
                self._say(store, kind, exc)
                unreachable = problems[store] if kind == UNAVAILABLE else ""
            else:
                up[store] = True
        if all(up.values()):
            self._outage.recovered(
                "store-metrics inventory: reading the state store tables from %s works again",
                self.database.describe(),
            )
        snapshot = Snapshot(footprints=footprints, up=up, problems=problems)
        with self._lock:
            self._snapshot = snapshot
        return snapshot

    def _say(self, store: Store, kind: str, exc: BaseException) -> None:
        # A database that cannot be reached is one problem, whichever table's query found out.
        problem = kind if kind == UNAVAILABLE else f"{store.value}:{kind}"
        what = {
            "timeout": f"took longer than its statement timeout ({self.database.timeout:g} s)",
            "unavailable": "could not reach the database",
            "failed": "failed",
        }[kind]
        self._outage.failed(
            problem,
            logging.WARNING,
            "store-metrics inventory: the %s query %s (%s): %s; the last footprint read is kept "
            "and the query is retried every interval (said once until it recovers)",
            store.value,
            what,
            self.database.describe(),
            short(exc),
        )
