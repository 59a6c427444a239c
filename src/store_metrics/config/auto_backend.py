"""What Airflow's ``[metrics]`` section would do with a tagged count, and what ``backend = auto`` picks.

Airflow sends its metrics through one sender, picked in this order
(``airflow.sdk.observability.metrics.stats_utils.get_stats_factory``): DogStatsD when
``statsd_datadog_enabled``, else StatsD when ``statsd_on``, else OpenTelemetry when ``otel_on``,
else nothing. Whether a count that goes through it keeps its tags depends on that sender:

* StatsD drops every tag unless ``statsd_influxdb_enabled`` (the default on Airflow's Helm chart:
  ``statsd_on`` alone, so every DAG's calls would arrive as one label-less series);
* DogStatsD drops every tag when ``statsd_datadog_metrics_tags`` is off;
* both drop the tag names ``statsd_disabled_tags`` matches; OpenTelemetry keeps all attributes;
* every sender drops the metric names that ``metrics_allow_list`` / ``metrics_block_list`` reject.

``backend = auto`` (the default) hands the counts to Airflow only where they arrive whole, and
otherwise sends them itself, tagged, to the same place (``statsd_host``/``statsd_port`` and
``statsd_prefix``). So with no ``[store_metrics]`` section counts arrive with their tags whatever
``[metrics]`` says, or, where ``[metrics]`` sends nowhere, not at all and the plugin says so.
An explicit ``backend = airflow`` on a sender that would drop tags or names is refused
(``AirflowMetrics.loses``), never sent half-labelled.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .. import catalogue

#: Reads one Airflow option: its raw text, or None when it is not set.
Read = Callable[[str, str], "str | None"]

DOGSTATSD = "dogstatsd"
STATSD = "statsd"
OTEL = "otel"
NONE = "none"
_SECTION = "metrics"
#: Every tag name any store-metrics series carries.
_TAGS = tuple(dict.fromkeys(tag for metric in catalogue.ALL_METRICS for tag in metric.tags))


def _flag(read: Read, option: str, default: bool) -> bool:
    """An Airflow boolean as ``conf.getboolean`` reads it (``t``, ``true``, ``1``; ``#`` starts a comment)."""
    value = read(_SECTION, option)
    if value is None or not value.split("#")[0].strip():
        return default
    return value.split("#")[0].strip().lower() in ("t", "true", "1")


def _patterns(read: Read, option: str) -> tuple[str, ...]:
    """A comma-separated list of regular expressions, as Airflow's ``ListValidator`` reads it."""
    value = read(_SECTION, option) or ""
    return tuple(item.strip().lower() for item in value.split(",") if item.strip())


def _matches(patterns: tuple[str, ...], name: str) -> bool:
    for pattern in patterns:
        try:
            if re.search(pattern, name.lower()):
                return True
        except re.error:  # Airflow would fail on it too; do not guess what it meant
            continue
    return False


@dataclass(frozen=True)
class AirflowMetrics:
    """Airflow's sender, and what of store-metrics' counts it would drop."""

    sender: str
    #: Why the sender drops every tag (empty when it keeps them).
    drops_all_tags: str = ""
    #: Tag names ``statsd_disabled_tags`` removes.
    disabled_tags: tuple[str, ...] = ()
    #: store-metrics' metric names that Airflow's allow/block list rejects.
    blocked: tuple[str, ...] = ()

    @property
    def loses(self) -> str:
        """Why counts sent through Airflow would arrive without their tags or not at all ('' if whole)."""
        reasons = []
        if self.drops_all_tags:
            reasons.append(f"every tag is dropped ({self.drops_all_tags})")
        if self.disabled_tags:
            reasons.append(f"[metrics] statsd_disabled_tags drops {', '.join(self.disabled_tags)}")
        if self.blocked:
            shown = ", ".join(self.blocked[:3]) + (", ..." if len(self.blocked) > 3 else "")
            reasons.append(
                f"[metrics] metrics_allow_list/metrics_block_list drops {len(self.blocked)} of "
                f"store-metrics' metrics ({shown})"
            )
        return "; ".join(reasons)

    def describe(self) -> str:
        return {
            DOGSTATSD: "Airflow's DogStatsD client ([metrics] statsd_datadog_enabled)",
            STATSD: "Airflow's StatsD client ([metrics] statsd_on)",
            OTEL: "Airflow's OpenTelemetry meter ([metrics] otel_on)",
        }.get(self.sender, "nothing: [metrics] enables no backend")


def read_airflow_metrics(read: Read) -> AirflowMetrics:
    """Airflow's sender and what it drops, from ``[metrics]`` (``read`` answers None for unset options)."""
    if _flag(read, "statsd_datadog_enabled", False):
        sender = DOGSTATSD
    elif _flag(read, "statsd_on", False):
        sender = STATSD
    elif _flag(read, "otel_on", False):
        sender = OTEL
    else:
        return AirflowMetrics(NONE)
    drops = ""
    if sender == STATSD and not _flag(read, "statsd_influxdb_enabled", False):
        drops = "[metrics] statsd_on without statsd_influxdb_enabled"
    elif sender == DOGSTATSD and not _flag(read, "statsd_datadog_metrics_tags", True):
        drops = "[metrics] statsd_datadog_metrics_tags = False"
    disabled: tuple[str, ...] = ()
    if sender != OTEL:
        off = _patterns(read, "statsd_disabled_tags")
        disabled = tuple(tag for tag in _TAGS if _matches(off, tag))
    allow, block = _patterns(read, "metrics_allow_list"), _patterns(read, "metrics_block_list")
    blocked = tuple(
        m.name
        for m in catalogue.ALL_METRICS
        if (allow and not _matches(allow, m.name)) or (not allow and _matches(block, m.name))
    )
    return AirflowMetrics(sender, drops, disabled, blocked)


def choose_backend(airflow: AirflowMetrics) -> tuple[str, str]:
    """The backend ``auto`` stands for with this ``[metrics]``, and why, in one line."""
    if airflow.sender == NONE:
        return NONE, "[metrics] enables no backend (statsd_on, statsd_datadog_enabled or otel_on)"
    loses = airflow.loses
    if not loses:
        return "airflow", f"{airflow.describe()} keeps the tags"
    own = airflow.sender  # the same protocol, to the same place, with the tags in every line
    return own, f"through {airflow.describe()} {loses}: store-metrics sends its own tagged lines"
