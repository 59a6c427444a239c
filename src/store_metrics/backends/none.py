"""The ``none`` backend: counts are kept in memory and go nowhere."""

from __future__ import annotations

from collections.abc import Sequence

from ..contracts import TotalsSource
from ..deltas import Delta


class NoneBackend:
    """Sends nothing; useful to switch emission off while keeping the plugin installed."""

    #: Nothing is pushed: counters stay in the emitter's memory (nothing reads them).
    pull = True
    opens_without_io = False
    live_histograms = False

    def describe(self) -> str:
        return "none (metrics are not sent anywhere)"

    def open(self, source: TotalsSource) -> None:
        return None

    def export(self, deltas: Sequence[Delta]) -> None:
        return None

    def force_flush(self, timeout: float) -> None:
        return None

    def close(self, timeout: float) -> None:
        return None

    def after_fork_in_child(self) -> None:
        return None


def create() -> NoneBackend:
    return NoneBackend()
