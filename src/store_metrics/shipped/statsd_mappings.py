"""The statsd_exporter mappings' ``mappings:`` lists, from the catalogue.

Each of the three mapping files is a template (``templates/statsd-mapping*.yml``: its comments say
what the file is for and how to load it) whose list is ``@statsd_mappings@``, written here: one
entry per catalogue metric of the file's group (``FILES``), in catalogue order. An entry matches
the dotted name the backends send (``Metric.full_name``), names the series as the OpenTelemetry path
does (``Metric.prometheus_name``), takes the catalogue's description as its help, and its kind
decides the rest: a counter is a counter, a gauge a gauge kept ``statsd_gauge_ttl``, a histogram
an observer with the catalogue's buckets. So a metric added to the catalogue is mapped with no
edit here, and no name or help text is copied by hand.

The tags travel on the lines themselves (InfluxDB or DogStatsD tags), which statsd_exporter turns
into labels: no entry names a label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from store_metrics import catalogue
from store_metrics.catalogue import Kind, Metric

__all__ = ["FILES", "TOKEN", "entry", "mappings", "values", "yaml_scalar"]

#: The token of a mapping template that its ``mappings:`` list replaces.
TOKEN = "statsd_mappings"
#: Each mapping template (under ``templates/``) and the catalogue metrics its list maps, in order.
FILES: dict[str, tuple[Metric, ...]] = {
    "statsd-mapping.yml": catalogue.METRICS,
    "statsd-mapping-server.yml": catalogue.SERVER_METRICS,
    "statsd-mapping-inventory.yml": catalogue.INVENTORY_METRICS,
}
#: statsd_exporter's ``match_metric_type`` of each kind (a histogram's observations are timers or
#: distributions, which it calls observers).
_MATCH_TYPE = {Kind.COUNTER: "counter", Kind.HISTOGRAM: "observer", Kind.GAUGE: "gauge"}
#: The setting a kind's ``ttl`` is: the inventory and the API server send every gauge again each
#: flush, so a gauge has its own (shorter) one.
_TTL_SETTING = {Kind.COUNTER: "statsd_ttl", Kind.HISTOGRAM: "statsd_ttl", Kind.GAUGE: "statsd_gauge_ttl"}

# What keeps a YAML 1.1 plain scalar from reading back as the same string: an indicator first, a
# ": " or " #" inside, a ":" last, spaces at either end; or a value the resolvers would type (a
# number, a boolean, null, a timestamp).
_INDICATOR_FIRST = re.compile(r"^([,\[\]{}#&*!|>'\"%@`]|[-?:](\s|$)|$)")
_INSIDE = re.compile(r": | #|:$|^\s|\s$")
_TYPED = re.compile(
    r"^(?:[-+]?[0-9][0-9a-zA-Z_.:+-]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|~|null|Null|NULL"
    r"|y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|=|<<)$"
)
_PRINTABLE_ASCII = re.compile(r"^[\x20-\x7e]*$")


def yaml_scalar(text: str) -> str:
    """``text`` as a one-line YAML scalar that reads back as exactly this string: plain where that is
    safe, else single-quoted, as ``yaml.safe_dump`` writes it (so the mapping files kept their bytes
    when they stopped being copied by hand; a few texts PyYAML leaves plain, ``1e5``, are quoted
    here); outside printable ASCII, one double-quoted line with JSON's escapes."""
    if not _PRINTABLE_ASCII.match(text):
        return json.dumps(text)
    if _INDICATOR_FIRST.match(text) or _INSIDE.search(text) or _TYPED.match(text):
        return "'" + text.replace("'", "''") + "'"
    return text


def _bucket(bound: float) -> str:
    return repr(float(bound))


def entry(metric: Metric, prefix: str, given: Mapping[str, str]) -> str:
    """One metric's mapping for ``prefix``, its ``ttl`` from the settings ``given``."""
    lines = [
        f"- match: {metric.full_name(prefix)}",
        f"  match_metric_type: {_MATCH_TYPE[metric.kind]}",
        f"  name: {metric.prometheus_name(prefix)}",
        f"  help: {yaml_scalar(metric.description)}",
    ]
    if metric.kind is Kind.HISTOGRAM:
        lines += ["  observer_type: histogram", "  histogram_options:", "    buckets:"]
        lines += [f"    - {_bucket(bound)}" for bound in metric.buckets]
    lines.append(f"  ttl: {given[_TTL_SETTING[metric.kind]]}")
    return "\n".join(lines)


def mappings(metrics: tuple[Metric, ...], prefix: str, given: Mapping[str, str]) -> str:
    """The ``mappings:`` list of ``metrics`` (YAML, one entry each, in order)."""
    return "\n".join(entry(metric, prefix, given) for metric in metrics)


def values(name: str, prefix: str, given: Mapping[str, str]) -> dict[str, str]:
    """Mapping template ``name``'s computed value: its list, for ``prefix`` and the settings."""
    return {TOKEN: mappings(FILES[name], prefix, given)}
