"""Section 10 of the page: what the State store tab in Airflow's UI costs."""

from __future__ import annotations

from typing import Any

from ..results import Results, data_of
from .markdown import Rendered, join, table
from .targets import UI_IDLE_CPU_POINTS, UI_TAB_MS, VerdictRow, judge

METHOD = (
    "Method (`benchmarks/ui.py`): a throwaway PostgreSQL with Airflow's schema (`airflow db migrate`), "
    "filled as section 7's inventory benchmark fills it ({rows:,} task store rows over {dags:,} DAGs, "
    "{asset_rows:,} asset store rows, and every DAG's asset references); the tab's one statement for "
    "{tab_dags} DAGs, each timed through the UI's own reader (the database's time, and the wall time "
    "with the Python around it), first read and again; `EXPLAIN (ANALYZE, BUFFERS)` of one DAG's; the "
    "deployment page's statements, {repeat} times. Then a real `airflow api-server` on that database, "
    "its CPU over {window:g} s idle with the views on and off (twice each: the spread between the two "
    "blocks of one arm is the noise), and its CPU per tab view, first and cached."
)


def render(results: Results) -> Rendered:
    r: Any = data_of(results, "ui")
    tab, idle, view = r["tab"], r["api_server"]["idle"], r["api_server"]["per_tab_view"]
    median = tab["first"]["query_ms"]["median"]
    added, spread = idle["added_percent"], idle["aa_spread_percent"]
    verdicts = [
        VerdictRow(
            f"10. the State store tab's statement for one DAG, {r['data']['rows']:,} rows over "
            f"{r['data']['dags']:,} DAGs on PostgreSQL ≤ {UI_TAB_MS:g} ms (median)",
            f"{median:.1f} ms (p95 {tab['first']['query_ms']['p95']:.1f} ms)",
            judge(median <= UI_TAB_MS),
        ),
        VerdictRow(
            f"10. what the views add to an idle API server's CPU ≤ {UI_IDLE_CPU_POINTS:g} points of a core",
            f"{added:+.3f} points (on {_pair(idle['on'])} %, off {_pair(idle['off'])} %)",
            judge(added <= UI_IDLE_CPU_POINTS, gap=added - UI_IDLE_CPU_POINTS, noise=spread),
        ),
    ]
    plan = r["plan"]
    text = join(
        "## 10. The State store tab in Airflow's UI",
        "Targets: **the tab's statement for one DAG ≤ "
        f"{UI_TAB_MS:g} ms at the median** on a large deployment, using the table's key; **nothing "
        "measurable** added to an idle API server's CPU when nobody looks.",
        METHOD.format(
            rows=r["data"]["rows"],
            dags=r["data"]["dags"],
            asset_rows=r["data"]["asset_rows"],
            tab_dags=tab["dags"],
            repeat=r["sizes"]["repeat"],
            window=idle["window_s"],
        ),
        table(
            ["what", "median", "p95", "max"],
            [[f"tab statement, first read ({k})", *_ms(tab["first"][k])] for k in ("query_ms", "wall_ms")]
            + [[f"tab statement, again ({k})", *_ms(tab["again"][k])] for k in ("query_ms", "wall_ms")]
            + [["deployment page, whole tables (query_ms)", *_ms(r["deployment"]["query_ms"])]],
            "lrrr",
        ),
        f"One DAG's plan: {plan['execution_ms']:.2f} ms, {plan['shared_hit'] + plan['shared_read']} buffers, "
        "indexes " + ", ".join(f"`{i}`" for i in plan["indexes"]) + ". The deployment page reads whole "
        "tables; it is cached per API server worker for `ui_cache_ttl`.",
        f"API server CPU, idle, {idle['window_s']:g} s blocks: views on {_pair(idle['on'])} % of a core, off "
        f"{_pair(idle['off'])} % (added {added:+.3f} points; two blocks of one arm differ by up to "
        f"{spread:.3f}). Per tab view: {view['first']['cpu_ms']:.1f} ms of CPU when it queries, "
        f"{view['cached']['cpu_ms']:.1f} ms from the cache ({view['requests']} requests each).",
    )
    return Rendered(text, verdicts, [])


def _ms(summary: dict[str, float]) -> list[str]:
    return [f"{summary[k]:.1f} ms" for k in ("median", "p95", "max")]


def _pair(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)
