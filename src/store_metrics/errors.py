"""The exceptions store-metrics raises at configuration time (never inside a task's store call)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .deltas import Delta


class ConfigError(ValueError):
    """A configuration value is not one store-metrics accepts.

    The message names the option, the value given and what is accepted, for example
    ``[store_metrics] backend = 'prom' is not valid: accepted values are airflow, otel, ...``.
    """

    def __init__(self, option: str, value: object, accepted: str | Iterable[str]) -> None:
        self.option = option
        self.value = value
        self.accepted = accepted if isinstance(accepted, str) else ", ".join(accepted)
        super().__init__(
            f"[store_metrics] {option} = {value!r} is not valid: accepted values are {self.accepted}"
        )


class TagsLostError(ConfigError):
    """``backend = airflow`` where Airflow's own sender would drop the tags (or the metrics)."""

    def __init__(self, loses: str) -> None:
        self.loses = loses
        ValueError.__init__(
            self,
            f"[store_metrics] backend = 'airflow' would send the counts without their tags: through "
            f"Airflow's [metrics] {loses}. Remove the backend option (the default, auto, sends its own "
            f"tagged lines to the same receiver), or change [metrics] so that nothing is dropped",
        )
        self.option, self.value, self.accepted = "backend", "airflow", "auto, otel, dogstatsd, statsd, none"


class MissingExtraError(ImportError):
    """A backend's library is not installed; the message names the extra to install."""

    def __init__(self, backend: str, extra: str, missing: str) -> None:
        self.backend = backend
        self.extra = extra
        super().__init__(
            f"store-metrics backend {backend!r} needs the {missing!r} package, which is not installed: "
            f"pip install 'airflow-store-metrics[{extra}]'"
        )


class PartialExport(Exception):
    """Raised by a backend's ``export()`` when some deltas were sent and others were not.

    ``unsent`` holds exactly the deltas (or parts of them, such as single histogram buckets)
    that did not leave the process; the emitter keeps them for the next flush and drops the
    rest, so nothing is sent twice. ``__cause__`` says why.
    """

    def __init__(self, unsent: Sequence[Delta], reason: str) -> None:
        self.unsent = list(unsent)
        self.reason = reason
        super().__init__(reason)


class Deferred(PartialExport):
    """A ``PartialExport`` by choice, not by failure: a paced backend (StatsD, DogStatsD)
    sent what its rate allowed before the flush's deadline and kept the rest.

    The emitter keeps ``unsent`` for the next flush exactly as for any partial export, but the
    backend is not down: this is said once, not as an outage.
    """
