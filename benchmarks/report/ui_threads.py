"""Section 14 of the page: Airflow's sync routes while the State store tab waits on a hung Prometheus."""

from __future__ import annotations

import statistics

from ..results import Results, data_of
from ..ui_threads import UiThreads
from .markdown import Rendered, join, table
from .targets import VerdictRow, judge

#: The issue's target: a synchronous Airflow route during 45 tab requests, hung Prometheus, ≤ 2x idle.
SYNC_ROUTE_RATIO = 2.0

METHOD = (
    "Method (`benchmarks/ui_threads.py`): the views' app as the plugin builds it, mounted at "
    "`/store-metrics` beside a plain `def` route (what Airflow's synchronous routes are: FastAPI runs them "
    "on the server's one shared thread pool, 40 threads) on a real uvicorn server; the tab's Prometheus is "
    "a TCP listener that accepts and never answers (`ui_timeout` {timeout:g} s, the default). Airflow's "
    "authentication is replaced by stand-ins of the same shape (an async user dependency, a synchronous "
    "per-DAG one). The sync route's latency, sequential requests: idle ({idle} requests), then while {tabs} "
    "tab requests for one DAG's calls wait ({during} requests), with the views as they are (**now**) and "
    "as they were (**before**: a plain `def` handler calling the same sources, on the shared pool)."
)


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values):,.1f} ms (max {max(values):,.1f})"


def render(results: Results) -> Rendered:
    r: UiThreads = data_of(results, "ui_threads")
    idle = statistics.median(r["idle_ms"])
    now, before = r["now"], r["before"]
    ratio = statistics.median(now["latencies_ms"]) / idle
    verdict = VerdictRow(
        f"14. a synchronous route during {r['tabs']} tab requests, hung Prometheus: "
        f"≤ {SYNC_ROUTE_RATIO:g}x idle",
        f"{ratio:.2f}x ({statistics.median(now['latencies_ms']):.1f} / {idle:.1f} ms, medians; longest "
        f"{max(now['latencies_ms']):.1f} ms; before: longest {max(before['latencies_ms']):,.0f} ms)",
        judge(ratio <= SYNC_ROUTE_RATIO),
    )
    text = join(
        "## 14. Airflow's routes while the State store tab waits on a hung Prometheus",
        METHOD.format(
            timeout=r["ui_timeout_s"],
            idle=len(r["idle_ms"]),
            tabs=r["tabs"],
            during=len(now["latencies_ms"]),
        ),
        table(
            ["sync route", "latency (median, max)", "tab requests answered", "Prometheus queries"],
            [
                ["idle", _ms(r["idle_ms"]), "-", "-"],
                [
                    f"during {r['tabs']} tab requests, now",
                    _ms(now["latencies_ms"]),
                    now["tab_answers"],
                    now["prometheus_connections"],
                ],
                [
                    f"during {r['tabs']} tab requests, before",
                    _ms(before["latencies_ms"]),
                    before["tab_answers"],
                    before["prometheus_connections"],
                ],
            ],
            "lrrr",
        ),
        "Before, the tab's handlers held the shared pool's threads while the one query waited for "
        "`ui_timeout` (the others waited on its lock), so the sync route's first request waited about as "
        "long; now they wait on the event loop, their reads on the views' own four threads, and the route "
        "is answered as when idle. One query served every tab request in both.",
    )
    return Rendered(text, [verdict])
