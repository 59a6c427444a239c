"""The rules that repeat per metric, generated from the catalogue (rules as data, as the mixins do).

rules.yml's recording group is a template around ``call_recording_rules``: one rule per counter
that has a ``Recording``, written once here, so adding a counter to
the catalogue gives it its recorded calls, its place in the series count the "counts stopped
arriving" alert reads, and nothing to copy by hand.

One rule records a counter's calls of each rule interval (setting ``rule_interval``), read
``rule_offset`` behind so a scrape being written is never half seen:

* a series present at the previous read: its growth since then;
* a series absent at the previous read (stale) while its target was scraped successfully then
  (``up == 1``): it went away and came back -- its exporter, Collector or API server worker
  restarted, or dropped it after its ``ttl`` -- so its whole value is the calls since: counted in
  full, even where it came back at or above its old value (which a "lower than before" check misses);
* a series absent at the previous read while its target was not scraped (a failed scrape, Prometheus
  down): its growth since its newest value within ``counter_lookback`` (``last_over_time`` bridges
  the gap);
* the same series lower than before (a reset: the exporter, the Collector or the API server worker
  restarted and already counted again): its whole value, the calls since the restart;
* a series not seen within ``counter_lookback`` (a task's first run, a series the exporter dropped
  after its ``ttl``): its whole value, **only if its target was scraped successfully within
  ``counter_lookback`` before the previous read** (``up == 1``, matched on the deployment label and
  ``instance``), **or if its target is new to Prometheus in a job Prometheus already scrapes**: not
  scraped at all (successfully or not) where that lookback starts, scraped successfully now, and one
  of its job's targets scraped successfully within ``counter_lookback`` before the read before the
  previous one (``rule_job_offset``, a rule interval earlier). That is a rollout's new pod, an
  exporter or Collector pod replacing the old one, a job scaled up, a worker on a new address -- also
  one that fails its first scrapes while it starts: what it holds at its first scrape are calls made
  since it started. The read a rule interval earlier (not shorter than a scrape interval) keeps a
  fresh Prometheus's own first scrape interval out: its targets, first scraped up to a scrape
  interval apart, are all as new as their jobs. A fresh or replaced Prometheus, a job it never
  scraped before, a target that failed every scrape for longer than the lookback: what their
  counters hold were calls made before Prometheus could see them; those never count, so no alert
  fires on history. What is lost is bounded: the calls a series held when its job was first scraped,
  and the calls a restarted peer counted before its first successful scrape where they are not
  fewer than before the restart.

Summed over a range, the recorded series is the calls made in it, exactly, in steady state and
across restarts of the exporter, the Collector or an API server worker, and across rollouts.

Cost: each rule reads every series of its counter at two instants and over ``counter_lookback``, so
an evaluation grows with the series (docs/performance.md section 17: one counter's 50,000 series,
21.6 s with the hour scan, 15.4 s without it, on a loaded 2-core machine). The rest (the instant
reads and the vector operations on every series) is a floor no rewrite of the rule goes below. A
variant with helper series in place of the scan (the last value of a series absent at the read,
recorded by one evaluation for the next; benchmarks/rules_cost.py keeps its expressions) was exact
on every promtool test but cost about as much (19.1 s for its rule and two helpers): its helpers find
the series that went away by reading every series at an instant again. So the scan stays.
"""

from __future__ import annotations

from collections.abc import Mapping

from store_metrics import catalogue

from . import records, templating

__all__ = [
    "GENERATED_RECORDS",
    "SERIES_COUNT",
    "call_recording_rules",
    "counter_expr",
    "grouping",
    "values",
]

#: Series of the recorded counters per deployment, job and instance: what the "counts stopped
#: arriving" alert (StateStoreMetricsMissing) and the inventory's per-deployment absence read.
SERIES_COUNT = "instance:store_metrics_series:count"
#: The recorded series this module's rules write (the templates write the others' ``- record:``).
GENERATED_RECORDS: frozenset[str] = frozenset(
    {*(m.recording.series for m in catalogue.recorded_counters() if m.recording), SERIES_COUNT}
)
_RULE_INDENT = "  "
_EXPR_INDENT = " " * 6


def grouping(metric: catalogue.Metric) -> tuple[str, ...]:
    """What a counter's calls are recorded by: the deployment, the job and the counter's tags
    (``instance`` is summed away: the API server's workers add up to one)."""
    return ("@cluster_label@", "job", *metric.all_tags)


def counter_expr(metric: catalogue.Metric) -> str:
    """A counter's calls of one rule interval, as a template (tokens for the prefix and settings)."""
    series = f"@{metric.name}@{{@selector@}}"
    now = f"{series} offset @rule_offset@"
    at_previous = f"{series} offset @rule_previous_offset@"
    previous = f"last_over_time({series}[@counter_lookback@] offset @rule_previous_offset@)"
    scraped_then = "up offset @rule_previous_offset@ == 1"
    up = "max_over_time(up[@counter_lookback@] offset @rule_previous_offset@)"
    job_up = "max_over_time(up[@counter_lookback@] offset @rule_job_offset@)"
    new_target = (
        "up offset @rule_offset@ == 1 unless on (@cluster_label@, instance) up offset @rule_lookback_offset@"
    )
    lines = [
        f"sum by ({', '.join(grouping(metric))}) (",
        "  (",
        f"    {now}",
        "    - (",
        f"      {at_previous}",
        "      or",
        f"      ({previous} unless on (@cluster_label@, instance) ({scraped_then}))",
        "    )",
        "  ) >= 0",
        "  or",
        "  (",
        f"    {now}",
        "    and on (@cluster_label@, instance)",
        "    (",
        f"      max by (@cluster_label@, instance) ({up}) == 1",
        "      or",
        f"      (max by (@cluster_label@, job) ({job_up}) == 1)",
        "      * on (@cluster_label@, job) group_right ()",
        f"      max by (@cluster_label@, job, instance) ({new_target})",
        "    )",
        "  )",
        ")",
    ]
    return "\n".join(lines)


def _rule(record: str, expr: str, labels: tuple[tuple[str, str], ...] = ()) -> list[str]:
    lines = [f"{_RULE_INDENT}- record: @{records.TOKEN}{record}@", f"{_RULE_INDENT}  expr: |-"]
    lines += [f"{_EXPR_INDENT}{line}" if line else "" for line in expr.splitlines()]
    if labels:
        lines.append(f"{_RULE_INDENT}  labels:")
        lines += [f"{_RULE_INDENT}    {name}: {value}" for name, value in labels]
    return lines


def _series_count() -> str:
    counters = "\n  or ".join(f"@{m.name}@{{@selector@}}" for m in catalogue.recorded_counters())
    return f"count by (@cluster_label@, job, instance) (\n  {counters}\n)"


def call_recording_rules() -> str:
    """The recording group's rules (YAML, indented for the group's ``rules:``), as a template."""
    lines: list[str] = []
    for metric in catalogue.recorded_counters():
        assert metric.recording is not None
        lines += _rule(metric.recording.series, counter_expr(metric), metric.recording.labels)
    lines += _rule(SERIES_COUNT, _series_count())
    return "\n".join(lines)


def values(prefix: str, given: Mapping[str, str]) -> dict[str, str]:
    """rules.yml's computed value: its recording rules, filled in for ``prefix`` and the settings."""
    text = templating.fill(call_recording_rules(), prefix, given, "the call-recording rules")
    return {"call_recording_rules": text}
