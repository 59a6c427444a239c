"""9. What importing the plugin costs a task process, on top of ``airflow.sdk``.

Every task process imports ``store_metrics.integration.plugin`` (Airflow's plugin manager loads the entry
point) after ``airflow.sdk``. Method: ``python -X importtime`` in a fresh interpreter (a throw-away
``AIRFLOW_HOME``) that imports ``airflow.sdk``, then ``store_metrics.integration.plugin``; markers written to
stderr between the two tell which import printed which lines. The plugin's cost is the cumulative
time of what its import statement loaded (store-metrics' modules and whatever they import that
``airflow.sdk`` had not), the SDK's the same for its statement. ``runs`` fresh interpreters, one
after the other; medians. Per store-metrics module: its own time (*self*) and with what it
imported (*cumulative*), medians over the runs.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from typing import TypedDict

from .common import REPO_ROOT, log, subprocess_env

MARKS = ("--sdk--", "--plugin--", "--end--")
CODE = (
    f"import os; os.write(2, b'{MARKS[0]}\\n'); import airflow.sdk; os.write(2, b'{MARKS[1]}\\n'); "
    f"import store_metrics.integration.plugin; os.write(2, b'{MARKS[2]}\\n')"
)


class ModuleTime(TypedDict):
    module: str
    depth: int  # nesting in the import tree of the first run (0: the import statement's own)
    self_ms: float
    cumulative_ms: float


class ImportCost(TypedDict):
    runs: int
    python: str
    sdk_ms: float  # median over runs: import airflow.sdk
    plugin_ms: float  # median over runs: import store_metrics.integration.plugin, after airflow.sdk
    percent_of_sdk: float  # median over runs of plugin / sdk
    modules: list[ModuleTime]  # store-metrics' modules, in import order
    others: list[ModuleTime]  # the costliest other modules the plugin's import loaded (self time)


#: One line of ``-X importtime``: (depth, module, self µs, cumulative µs).
Line = tuple[int, str, int, int]


def _lines(text: str) -> list[Line]:
    out = []
    for raw in text.splitlines():
        if not raw.startswith("import time:") or "self [us]" in raw:
            continue
        head, cumulative_us, name = raw.split("|", 2)
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        out.append((depth, name.strip(), int(head.split(":", 1)[1]), int(cumulative_us)))
    return out


def _preorder(lines: list[Line]) -> list[Line]:
    """``-X importtime`` lists a module after what it imported; the same tree, each module first."""
    stack: list[tuple[Line, list[Line]]] = []  # (module, its subtree in pre-order)
    for line in lines:
        below: list[Line] = []
        while stack and stack[-1][0][0] > line[0]:
            below = stack.pop()[1] + below
        stack.append((line, [line, *below]))
    return [line for _, subtree in stack for line in subtree]


def _between(text: str, start: str, end: str) -> list[Line]:
    return _preorder(_lines(text.split(start + "\n", 1)[1].split(end + "\n", 1)[0]))


def _total_ms(lines: list[Line]) -> float:
    """Cumulative time of the statement's own imports (the shallowest lines)."""
    top = min(d for d, *_ in lines)
    return sum(cumulative for d, _, _, cumulative in lines if d == top) / 1000.0


def _one_run() -> str:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", CODE],
        cwd=REPO_ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return proc.stderr


def _medians(runs: list[list[Line]], keep: set[str]) -> list[ModuleTime]:
    order = [(d, name) for d, name, _, _ in runs[0] if name in keep]
    out = []
    for depth, name in order:
        selfs = [s / 1000.0 for lines in runs for _, n, s, _ in lines if n == name]
        cumulatives = [c / 1000.0 for lines in runs for _, n, _, c in lines if n == name]
        out.append(
            ModuleTime(
                module=name,
                depth=depth - min(d for d, *_ in runs[0]),
                self_ms=statistics.median(selfs),
                cumulative_ms=statistics.median(cumulatives),
            )
        )
    return out


def run(quick: bool) -> ImportCost:
    runs = 3 if quick else 11
    sdk, plugin = [], []
    for i in range(runs):
        log(f"  import cost: run {i + 1} of {runs}")
        text = _one_run()
        sdk.append(_between(text, MARKS[0], MARKS[1]))
        plugin.append(_between(text, MARKS[1], MARKS[2]))
    sdk_ms = [_total_ms(lines) for lines in sdk]
    plugin_ms = [_total_ms(lines) for lines in plugin]
    ours = {name for _, name, _, _ in plugin[0] if name.split(".")[0] == "store_metrics"}
    others = sorted(
        _medians(plugin, {name for _, name, _, _ in plugin[0]} - ours), key=lambda m: -m["self_ms"]
    )
    return ImportCost(
        runs=runs,
        python=sys.version.split()[0],
        sdk_ms=statistics.median(sdk_ms),
        plugin_ms=statistics.median(plugin_ms),
        percent_of_sdk=statistics.median(p / s * 100 for p, s in zip(plugin_ms, sdk_ms, strict=True)),
        modules=_medians(plugin, ours),
        others=others[:5],
    )
