"""Every target the page judges, and the one rule for a verdict.

The rule (``judge``), used by every section: a figure that meets its target as written is
**met**; one that does not is **not resolved** when this run cannot tell the effect from the
machine -- the A/A spread measured in the same run (the same statistic between two identical arms)
is at least as large as the gap between the arms, or the 95% interval of the figure reaches the
target -- and **missed** otherwise.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

MiB = 1024 * 1024

# 1. Per call, in a task.
PER_CALL_ADDED_NS = 1_000.0  # ≤ 1 µs added per call, every backend
PER_CALL_RATIO = 10.0  # ≥ 10x cheaper than Airflow's per-call path on the same backend
# 2, 4, 6. Event-loop stalls: nothing added beyond noise, at the median.
STALL_ADDED_MS = 0.05
# 3. Memory, exit.
RSS_ALLOWANCE = MiB  # RSS growth over the bare run's, allocator noise
EXIT_ADDED_MS = 100.0  # ≤ 100 ms added to process exit, backend down
# 4. The API server side.
PASS_THROUGH_NS = 1_000.0  # other requests
STORE_REQUEST_NS = 25_000.0  # 1% of the cheapest real state store request (2.5 ms)
MONITOR_CPU_PERCENT = 1.0  # the stall monitor at its default tick, idle loop
BLOCK_READ_SLACK_MS = 5.0  # a blocked loop reads within one tick below and this much above
# 7. The API server under load, and faults.
LOAD_THROUGHPUT_RATIO = 0.98  # plugin on / off
LOAD_P99_RATIO = 1.05
FAULT_THROUGHPUT_RATIO = 0.95  # during the fault / before it
# 9. Importing the plugin in a task process.
IMPORT_MS = 10.0
# The State store tab's per-DAG statement on PostgreSQL, median over DAGs (section 10).
UI_TAB_MS = 100.0
# What the views add to an idle API server's CPU (percentage points of one core): nothing measurable.
UI_IDLE_CPU_POINTS = 0.1


class Verdict(enum.Enum):
    MET = "met"
    MISSED = "missed"
    NOT_RESOLVED = "not resolved"


def judge(
    met: bool, gap: float = math.nan, noise: float = math.nan, interval_reaches: bool = False
) -> Verdict:
    """The one rule: ``met``; else not resolved when ``noise`` (the A/A spread of the same run) is at
    least ``gap`` (the distance between the arms, same unit), or the figure's 95% interval reaches
    the target; else missed. Without an A/A arm (``noise`` NaN) a figure is met or missed."""
    if met:
        return Verdict.MET
    if interval_reaches or (not math.isnan(noise) and abs(noise) >= abs(gap)):
        return Verdict.NOT_RESOLVED
    return Verdict.MISSED


def judge_ratio(ratio: float, met: bool, spread: float) -> Verdict:
    """``judge`` for a ratio of two arms (1 = no difference) against the largest ratio between
    two identical blocks of the same run (``spread`` >= 1)."""
    return judge(met, gap=1.0 - ratio, noise=spread - 1.0)


@dataclass(frozen=True)
class VerdictRow:
    """One row of the page's verdict table."""

    target: str
    measured: str
    verdict: Verdict
    note: str = ""

    def cells(self) -> list[str]:
        return [self.target, self.measured, cell(self.verdict, self.note)]


def cell(verdict: Verdict, note: str = "") -> str:
    return f"**{verdict.value}**" + (f" {note}" if note else "")
