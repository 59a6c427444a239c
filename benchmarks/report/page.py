"""The one writer of ``docs/performance.md``: the page, rendered whole from the saved results.

Head (how to re-make it), the verdict table (every section's, in page order, with the one rule
stated), "Why" notes derived from the same figures, the environment and each section's run, then
the sections in the order of ``benchmarks.sections.SECTIONS``.
"""

from __future__ import annotations

from ..results import Results
from ..sections import GENERIC, SECTIONS, resolve
from . import generic
from .markdown import Rendered, join, table
from .targets import Verdict, VerdictRow

HEAD = (
    "Rendered by `python -m benchmarks` from the results saved in `benchmarks/results.json`: "
    "`python -m benchmarks --render` renders it again, `python -m benchmarks --only SECTION` "
    "measures one section again and keeps the others' results. Do not edit by hand. Every figure "
    "is a difference or ratio against a baseline measured in the same process and run, repeated, "
    "median reported; the machine is shared and noisy. When, and on what, each section was "
    "measured: [Environment](#environment)."
)
RULE = (
    "One rule for every verdict: **met** if the figure meets the target as written; otherwise "
    "**not resolved** when the run cannot tell the effect from the machine (the A/A spread measured "
    "in the same run, the same statistic between two identical arms, is at least as large as the "
    "gap between the arms, or the figure's 95% interval reaches the target), and **missed** when it "
    "can. A figure without an A/A arm is met or missed. No target was changed; where one is missed "
    "the measured figure is given."
)


def _sections(results: Results) -> list[Rendered]:
    out = []
    for section in SECTIONS:
        if section.name not in results["sections"] or section.render is None:
            continue
        if section.render == GENERIC:
            out.append(generic.render(results, section))
        else:
            rendered: Rendered = resolve(section.render)(results)
            out.append(rendered)
    return out


def _verdicts(rows: list[VerdictRow]) -> str:
    count = {v: sum(1 for r in rows if r.verdict is v) for v in Verdict}
    summary = ", ".join(f"{count[v]} {v.value}" for v in Verdict) + "."
    return join(
        "## Verdicts",
        summary + " " + RULE,
        table(["target", "measured", "verdict"], [r.cells() for r in rows], "lll") if rows else "",
    )


def _environment(results: Results) -> str:
    rows = [[k, v] for k, v in results["environment"].items()]
    runs = []
    for name in (s.name for s in SECTIONS if s.name in results["sections"]):
        run = results["sections"][name]["run"]
        took = f"{run['seconds']:,.0f} s" if run["seconds"] is not None else "-"
        runs.append(
            [name, run["date"], run["mode"], took, f"{run['load_start']} → {run['load_end']}", run["code"]]
        )
    return join(
        "## Environment",
        table(["", "value"], rows, "ll"),
        "Each section's run (load averages over 1, 5 and 15 min, at its start and its end):",
        table(["section", "measured", "mode", "took", "load average", "code"], runs, "lllrll"),
    )


def render(results: Results) -> str:
    """The whole page."""
    sections = _sections(results)
    verdicts = [row for s in sections for row in s.verdicts]
    why = [note for s in sections for note in s.why]
    quick = any(s["run"]["mode"] == "quick" for s in results["sections"].values())
    head = HEAD + (" **Quick mode: small sizes and few repetitions; not figures to quote.**" if quick else "")
    parts = ["# Performance", head, _verdicts(verdicts)]
    if why:
        parts.append(join("## Why (from these figures)", "\n".join(why)))
    parts.append(_environment(results))
    parts += [s.text for s in sections]
    return join(*parts).rstrip() + "\n"
