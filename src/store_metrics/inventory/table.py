"""``store-metrics inventory`` without ``--serve``: the footprint as a table, largest first.

One block per store: a summary line (entries, bytes, groups, how long the query took), then one
row per kept group by stored bytes, descending, with the ``<other>`` buckets last. Bytes are exact
(thousands separated); ``unknown`` when some of the group's entries hold a reference to a custom
backend, with their count in ``external``. Ages are compact (``3d 4h``, ``12m``, ``45s``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ..catalogue import Store
from .collect import Snapshot
from .footprint import Group, StoreFootprint

_TITLES = {Store.TASK: "task state store", Store.ASSET: "asset state store"}
_KEY_HEADERS = {Store.TASK: ("dag_id", "task_id"), Store.ASSET: ("asset",)}


def age(seconds: float | None) -> str:
    """``45s``, ``12m 3s``, ``5h 2m``, ``3d 4h``; ``-`` when there is nothing."""
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            rest = (s % size) // sub_size
            return f"{s // size}{unit}" + (f" {rest}{sub}" if rest else "")
    return f"{s}s"


def _bytes(group: Group) -> str:
    value = group.value_bytes
    return "unknown" if value is None else f"{value:,}"


def _since(now: dt.datetime, then: dt.datetime | None) -> float | None:
    return None if then is None else max(0.0, (now - then).total_seconds())


def _row(key: Sequence[str], group: Group, now: dt.datetime, store: Store) -> list[str]:
    row = [
        *key,
        f"{group.entries:,}",
        _bytes(group),
        age(_since(now, group.oldest)),
        age(_since(now, group.newest)),
    ]
    if store is Store.TASK:
        row.append(f"{group.expired or 0:,}")
    row.append(f"{group.external:,}")
    return row


def _grid(headers: list[str], rows: list[list[str]], text_columns: int) -> list[str]:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        parts = [
            cell.ljust(widths[i]) if i < text_columns else cell.rjust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  " + "  ".join(parts).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def render_store(footprint: StoreFootprint, now: dt.datetime, top: int) -> list[str]:
    store = footprint.store
    total = footprint.total
    title = _TITLES[store]
    took = f"read in {footprint.duration_ms:,.0f} ms"
    if total is None:
        return [f"{title}: empty; {took}"]
    what = ("DAG task", "DAG tasks") if store is Store.TASK else ("asset", "assets")
    summary = f"{title}: {_count(total.entries, 'entry', 'entries')}"
    if total.value_bytes is not None:
        summary += f", {total.value_bytes:,} bytes,"
    summary += f" in {_count(footprint.distinct, *what)}"
    if total.external:
        summary += (
            f", {_count(total.external, 'entry holds', 'entries hold')} a custom backend's reference "
            "(bytes unknown)"
        )
    summary += f"; {took}; the top {top} by bytes shown, the rest under <other>"
    headers = [*_KEY_HEADERS[store], "entries", "bytes", "oldest", "newest"]
    if store is Store.TASK:
        headers.append("expired")
    headers.append("external")
    rows = [_row(key, group, now, store) for key, group in footprint.largest_first()]
    return [summary, *_grid(headers, rows, len(_KEY_HEADERS[store]))]


def render(snapshot: Snapshot, top: int, now: dt.datetime | None = None) -> str:
    """The whole terminal output for ``snapshot``."""
    now = now or dt.datetime.now(dt.timezone.utc)
    lines: list[str] = []
    for store in Store:
        footprint = snapshot.footprints.get(store)
        if footprint is None:
            problem = snapshot.problems.get(store, "not read")
            lines.append(f"{_TITLES[store]}: could not be read ({problem})")
        else:
            lines += render_store(footprint, now, top)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
