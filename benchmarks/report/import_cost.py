"""Section 9 of the page: what importing the plugin costs a task process."""

from __future__ import annotations

from ..import_cost import ImportCost, ModuleTime
from ..results import Results, data_of
from .markdown import Rendered, join, table
from .targets import IMPORT_MS, Verdict, VerdictRow, judge

METHOD = (
    'Method: `python -X importtime -c "import airflow.sdk; import store_metrics.integration.plugin"` '
    "in a fresh interpreter ({runs} of them, one after the other; Python {python}, a throw-away "
    "`AIRFLOW_HOME`), with markers written to stderr between the statements, so each line of "
    "`-X importtime` is known to belong to the SDK's import or to the plugin's. The plugin's cost is the "
    "cumulative time of what its import statement loaded on top of `airflow.sdk` (store-metrics' modules "
    "and anything they import that the SDK had not); medians over the runs. "
    "Module: `benchmarks/import_cost.py`."
)


def _row(m: ModuleTime) -> list[str]:
    return [
        "&nbsp;&nbsp;" * m["depth"] + f"`{m['module']}`",
        f"{m['self_ms']:.2f}",
        f"{m['cumulative_ms']:.2f}",
    ]


def render(results: Results) -> Rendered:
    r: ImportCost = data_of(results, "import_cost")
    verdict = VerdictRow(
        f"9. importing `store_metrics.integration.plugin` in a task process ≤ {IMPORT_MS:g} ms "
        "(on top of `airflow.sdk`)",
        f"{r['plugin_ms']:.1f} ms ({r['percent_of_sdk']:.1f}% of `airflow.sdk`'s {r['sdk_ms']:,.0f} ms)",
        judge(r["plugin_ms"] <= IMPORT_MS),
    )
    others = ", ".join(f"`{m['module']}` {m['self_ms']:.2f} ms" for m in r["others"]) or "none"
    text = join(
        "## 9. Importing the plugin in a task process",
        f"Target: **importing `store_metrics.integration.plugin` costs a task process ≤ {IMPORT_MS:g} ms** "
        "on top of `airflow.sdk`, which every task process imports first.",
        METHOD.format(runs=r["runs"], python=r["python"]),
        f"`import airflow.sdk`: **{r['sdk_ms']:,.0f} ms**; then `import store_metrics.integration.plugin`: "
        f"**{r['plugin_ms']:.1f} ms**, {r['percent_of_sdk']:.1f}% of the SDK's import. Every store-metrics "
        "module it loads (indented under what imported it), ms:",
        table(["module", "self ms", "cumulative ms"], [_row(m) for m in r["modules"]], "lrr"),
        f"Other modules it loaded that `airflow.sdk` had not, costliest first (self time): {others}.",
    )
    return Rendered(text, [verdict], _why(r) if verdict.verdict is not Verdict.MET else [])


def _why(r: ImportCost) -> list[str]:
    costly = sorted(r["modules"], key=lambda m: -m["self_ms"])[:4]
    return [
        f"- **Importing `store_metrics.integration.plugin`: {r['plugin_ms']:.1f} ms** on top of "
        f"`airflow.sdk` (target ≤ {IMPORT_MS:g} ms), {r['percent_of_sdk']:.1f}% of the SDK's own import, "
        "paid once by every task process. Its costliest modules by their own time: "
        + ", ".join(f"`{m['module']}` {m['self_ms']:.1f} ms" for m in costly)
        + " (section 9 has every module, nested as imported)."
    ]
