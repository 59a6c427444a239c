"""What one evaluation of the recording group costs at 150,000 input series, in one Prometheus
(the newest pin) over the same hour, beside the cheapest rule of the same shape.

The input is 5,000 DAGs of ``benchmarks.scale``'s deployment (10 tasks, three counters each:
150,000 series, one target, job ``store-metrics-statsd-exporter``), every series carrying the task
side's tags. An hour of 15 s samples is filled first the way ``benchmarks.scale_prometheus`` does
(a replay answering each scrape with the next samples of the history, ``honor_timestamps``), then
Prometheus scrapes every 15 s as shipped.

Two recording groups are measured, one at a time in the same process over the same samples (the
configuration reloaded between them, scraping every 15 s throughout): the exported ``rules.yml``'s
recording group ``store-metrics.rules`` (per counter, three instant reads,
``last_over_time(...[counter_lookback])`` and ``max_over_time(up[counter_lookback])``), then a floor
group, ``store-metrics.rules.floor`` (``floor_rules``: per counter only its growth between the two
reads, summed by the same labels, recording under names of its own): what any rule that reads every
counter at two instants costs at least. Nothing else evaluates while a group is measured (no rules
while the hour is filled, one group loaded at a time), so the figures are the group's own cost, not
two groups' contention. What each took is Prometheus' own
``prometheus_rule_group_last_duration_seconds``, read after each of ``EVALUATIONS`` evaluations
(after one to settle); the verdict is on the shipped group's slowest, the floor beside it.

Then, with no rules loaded, one counter's expressions run as instant queries (``stats=all``): the
shipped rule and its parts, the floor, the helper-series variant tried before, and one read of every
series as a range function (``increase(...[1m] anchored)``, Prometheus 3.16): what a rule reading
each counter once would cost.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.parse
from pathlib import Path
from typing import TypedDict

from store_metrics import catalogue
from store_metrics.shipped import settings, templating
from testbed.peers import pin_for

from . import scale, scale_prometheus
from .common import log
from .scale_prometheus import (
    HISTORY,
    STEP,
    Prometheus,
    evaluation_stamps,
    filled_hour,
    next_durations,
    per_scrape,
    write_config,
)

#: 5,000 DAGs x 10 tasks x 3 counters: the issue's 150,000 input series; a quick run's size.
DAGS = 5_000
QUICK_DAGS = 100
#: Evaluations of both groups read (a quick run reads fewer).
EVALUATIONS = 5
QUICK_EVALUATIONS = 2
SHIPPED_GROUP = "store-metrics.rules"
FLOOR_GROUP = "store-metrics.rules.floor"
FLOOR_FILE = "rules-floor.yml"
#: Samples per replayed scrape while filling (lines per scrape at most), and the scrapes' interval
#: (and timeout) then: 150,000 series take 125 scrapes.
LINES_PER_SCRAPE = 300_000
FILL_INTERVAL = 4.0


class GroupCost(TypedDict):
    group: str
    rules: int
    durations_s: list[float]  # prometheus_rule_group_last_duration_seconds after each evaluation
    recorded_series: int  # the recorded calls' series after the last evaluation


class Probe(TypedDict):
    name: str
    expr: str
    seconds: list[float]  # the query's evalTotalTime (stats=all), each run


class RulesCost(TypedDict):
    quick: bool
    prometheus: str
    dags: int
    series: int
    samples_in_window: int  # one input series' samples in the rules' [1h] window at the end
    fill_seconds: float
    rule_interval: str
    counter_lookback: str
    shipped: GroupCost
    floor: GroupCost
    probes: list[Probe]  # one counter's expressions, each run as an instant query
    head_series: int
    load_average: list[float]


def _floor_counter_expr(metric: catalogue.Metric) -> str:
    """The cheapest rule of the same shape: a counter's growth between the two reads, summed by the
    same labels -- two instant reads and one subtraction, nothing bridged, not exact."""
    series = f"@{metric.name}@{{@selector@}}"
    tags = ", ".join(("@cluster_label@", "job", *metric.all_tags))
    return f"sum by ({tags}) ({series} offset @rule_offset@ - {series} offset @rule_previous_offset@)"


FLOOR_CALLS = "task:store_metrics_calls_floor:increase"
FLOOR_RETRIES = "task:store_metrics_retries_floor:increase"


def floor_rules(values: dict[str, str]) -> str:
    """The floor group (``_floor_counter_expr`` per counter) for ``values``, as a rule file."""
    lines = [f"groups:\n- name: {FLOOR_GROUP}\n  interval: {values['rule_interval']}\n  rules:"]
    for metric in catalogue.recorded_counters():
        assert metric.recording is not None
        base = FLOOR_CALLS if metric.recording.series == catalogue.CALLS_RECORDING else FLOOR_RETRIES
        expr = templating.fill(_floor_counter_expr(metric), scale.PREFIX, values, "the floor rules")
        labels = "".join(f"\n      {name}: {value}" for name, value in metric.recording.labels)
        lines.append(f"  - record: {templating.fill(f'@record:{base}@', scale.PREFIX, values)}")
        lines.append(f"    expr: |-\n      {expr}\n    labels:{labels}")
    return "\n".join(lines) + "\n"


#: The write counter's rule and its two helpers as they were in the helper-series variant (the
#: hour scan replaced by per-series helpers the previous evaluation records; tried and not kept), at
#: the default settings (``W``: the counter, ``H``: its helpers' stem). Queried with the helpers empty:
#: what they cost is their reads of every counter series.
_HELPER_VARIANT = {
    "helper variant: the counter's rule": (
        "sum by (cluster, job, dag_id, task_id, run_type, operator, team_name) ("
        "(W offset 30s - (W offset 90s or (H:absent_last offset 1m"
        " unless on (cluster, instance) (up offset 90s == 1)))) >= 0"
        " or (W offset 30s and on (cluster, instance) instance:airflow_store_metrics_calls:counted_in_full))"
    ),
    "helper variant: absent_at helper": (
        "((timestamp(W offset 90s) or H:absent_at offset 1m) unless W offset 30s) > time() - 30 - 3600"
    ),
    "helper variant: absent_last helper": (
        "((W offset 90s or H:absent_last offset 1m) unless W offset 30s) and H:absent_at"
    ),
}
#: How often each probe runs.
PROBE_RUNS = 3


def _probes(shipped_rule: str) -> dict[str, str]:
    """One counter's expressions (the write counter's, 50,000 of the series): the shipped rule, it
    without the hour scan, its reads alone, the floor, and the helper variant's three rules."""
    counter = f'{scale.PREFIX}_task_state_store_write_total{{job!=""}}'
    hour = f"last_over_time({counter}[1h] offset 90s)"
    flat = " ".join(shipped_rule.split())
    assert hour in flat, flat
    tags = "cluster, job, dag_id, task_id, run_type, operator, team_name"
    probes = {
        "shipped rule": flat,
        "shipped rule, the hour scan replaced by the instant read at 90s": flat.replace(
            hour, f"{counter} offset 90s"
        ),
        "the hour scan alone": hour,
        "one instant read": f"{counter} offset 30s",
        "floor: sum of the growth between the two reads": (
            f"sum by ({tags}) ({counter} offset 30s - {counter} offset 90s)"
        ),
        # Stable from Prometheus 3.16 (experimental before): one read of each series, the sample
        # before the window its anchor. Not the shipped semantics (no bridge, no first-seen rule).
        "one read as a range function, summed (3.16 `anchored`)": (
            f"sum by ({tags}) (increase({counter}[1m] anchored offset 30s))"
        ),
    }
    helper = "series:airflow_store_metrics_task_state_store_write"
    probes.update(
        {
            name: expr.replace("W ", f"{counter} ").replace("H:", f"{helper}:")
            for name, expr in _HELPER_VARIANT.items()
        }
    )
    return {name: f"count({expr})" for name, expr in probes.items()}


def _timed(prometheus: Prometheus, expr: str) -> float:
    """``expr``'s evaluation time (s) as Prometheus reports it (``stats=all``)."""
    query = urllib.parse.urlencode({"query": expr, "stats": "all"})
    answer = json.loads(
        scale.fetch(f"http://127.0.0.1:{prometheus.port}/api/v1/query?{query}", timeout=600)[0]
    )
    seconds: float = answer["data"]["stats"]["timings"]["evalTotalTime"]
    return seconds


def exposition(dags: int) -> str:
    """The deployment's counters as a Prometheus text exposition (every series at 1)."""
    out = []
    for dag in range(dags):
        for task in range(scale.TASKS):
            labels = ",".join(f'{k}="{v}"' for k, v in scale.tags(dag, task).items())
            for outcome in scale.OUTCOMES:
                out.append(f"{scale.PREFIX}_task_state_store_{outcome}_total{{{labels}}} 1")
    return "\n".join(out) + "\n"


def run(quick: bool) -> RulesCost:
    dags = QUICK_DAGS if quick else DAGS
    evaluations = QUICK_EVALUATIONS if quick else EVALUATIONS
    values = settings.values()
    interval = settings.seconds(values["rule_interval"])
    with tempfile.TemporaryDirectory(prefix="store-metrics-bench-rules-") as tmp:
        work = Path(tmp)
        collector = scale.exported(work / "export")
        floor = work / FLOOR_FILE
        floor.write_text(floor_rules(values), encoding="utf-8")
        series = dags * scale.SERIES_PER_DAG
        log(f"  rules_cost: {series:,} series, filling the rules' hour")
        samples = per_scrape(LINES_PER_SCRAPE, series)
        with filled_hour(
            exposition(dags),
            samples,
            [],
            work,
            name="",
            fill_interval=f"{FILL_INTERVAL:.0f}s",
            bound=120.0 + 3.0 * HISTORY / STEP / samples * FILL_INTERVAL,
            poll_every=1.0,
        ) as filled:
            prometheus = filled.prometheus
            target, config = filled.replay.target, filled.config
            log(f"  rules_cost: filled in {filled.seconds:.0f} s ({filled.replay.scrapes} scrapes)")
            groups: dict[str, GroupCost] = {}
            for group, path, record in (
                (SHIPPED_GROUP, collector / "rules.yml", f"@record:{catalogue.CALLS_RECORDING}@"),
                (FLOOR_GROUP, floor, f"@record:{FLOOR_CALLS}@"),
            ):
                # One group loaded at a time: what it costs alone, every 15 s scrape still running.
                write_config(config, [path], target, f"{STEP:.0f}s")
                prometheus.signal(1)
                durations = _evaluations(prometheus, group, evaluations, 3 * interval + 120)
                groups[group] = GroupCost(
                    group=group,
                    rules=len(_group_rules(path, group)),
                    durations_s=durations,
                    recorded_series=int(
                        prometheus.query(f"count({templating.fill(record, scale.PREFIX, values)})")
                    ),
                )
            write_config(config, [], target, f"{STEP:.0f}s")
            prometheus.signal(1)
            first = f'{{dag_id="{scale.dag_id(0)}",task_id="{scale.task_id(0)}"}}'
            window = prometheus.query(f"count_over_time({scale_prometheus.WINDOWED}{first}[1h] offset 90s)")
            own = prometheus.own()
            shipped_group = _group_rules(collector / "rules.yml", SHIPPED_GROUP)
            (write_rule,) = [
                str(rule["expr"])  # type: ignore[index]
                for rule in shipped_group
                if rule.get("labels", {}) == {"store": "task", "outcome": "write"}  # type: ignore[attr-defined]
            ]
            probes: list[Probe] = []
            for name, expr in _probes(write_rule).items():
                seconds = [round(_timed(prometheus, expr), 4) for _ in range(PROBE_RUNS)]
                probes.append(Probe(name=name, expr=expr, seconds=seconds))
                log(f"  rules_cost: {name}: {', '.join(f'{x:.2f}' for x in seconds)} s")
            return RulesCost(
                quick=quick,
                prometheus=pin_for("prometheus", "newest").version,
                dags=dags,
                series=series,
                samples_in_window=int(window),
                fill_seconds=round(filled.seconds, 1),
                rule_interval=values["rule_interval"],
                counter_lookback=values["counter_lookback"],
                shipped=groups[SHIPPED_GROUP],
                floor=groups[FLOOR_GROUP],
                probes=probes,
                head_series=int(scale.total(own, "prometheus_tsdb_head_series")),
                load_average=list(os.getloadavg()),
            )


def _evaluations(prometheus: Prometheus, group: str, evaluations: int, timeout: float) -> list[float]:
    """``group``'s own duration (s) at each of ``evaluations`` evaluations, after one to settle."""
    after = {group: _stamp(prometheus, group)}
    next_durations(prometheus, after, timeout)
    durations = []
    for i in range(evaluations):
        after = {group: _stamp(prometheus, group)}
        seconds = next_durations(prometheus, after, timeout)[group]
        durations.append(round(seconds, 4))
        log(f"  rules_cost: {group}, evaluation {i + 1}: {seconds:.3f} s")
    return durations


def _stamp(prometheus: Prometheus, group: str) -> float:
    """``group``'s last evaluation stamp (0 before its first)."""
    return evaluation_stamps(prometheus).get(group, 0.0)


def _group_rules(path: Path, group: str) -> list[object]:
    import yaml

    groups = yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
    (found,) = [g for g in groups if g["name"] == group]
    rules: list[object] = found["rules"]
    return rules
