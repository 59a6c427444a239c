"""The ``none`` backend: counts are kept in memory and go nowhere."""

from __future__ import annotations

from collections.abc import Sequence

from ..contracts import TotalsSource
from ..deltas import Delta


class NoneBackend:
    """Sends nothing; useful to switch emission off while keeping the plugin installed."""

    #: The emitter pushes as to any backend; ``export`` drops what it is given (the emitter's
    #: cumulative counts stay readable in memory, as ``store_metrics.testing`` reads them).
    pull = False
    opens_without_io = False
    live_histograms = False
    prefix = ""
    sends_nowhere = True

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
