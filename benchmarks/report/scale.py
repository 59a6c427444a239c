"""Sections 11 and 12 of the page: a large deployment's series through the real peers
(statsd_exporter, Prometheus 3 and the exported rules), and through ``count_at = api_server``."""

from __future__ import annotations

import statistics
from typing import Any

from ..results import Results, data_of
from ..scale_api import ScaleApi
from ..scale_peers import ScalePeers
from ..scale_prometheus import RECORDING_GROUP
from ..scale_statsd import Burst, Paced
from .markdown import Rendered, join, mib, table


def _spread(values: list[float], unit: str = "s", digits: int = 3) -> str:
    """Median and the range of a few repeats."""
    if not values:
        return "-"
    return (
        f"{statistics.median(values):.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def _run_line(results: Results, name: str) -> str:
    run = results["sections"][name]["run"]
    return (
        f"Measured on {run['date']} ({run['seconds']:,.0f} s) on this 2-core machine shared with other "
        f"engineers' work: load average (1, 5, 15 min) {run['load_start']} at the start, "
        f"{run['load_end']} at the end."
    )


def _paced_row(p: Paced, again: Paced | None) -> list[str]:
    c = p["counts"]
    repeat = f"{mib(again['rss'])} / {_spread(again['scrape_seconds'])}" if again else "-"
    return [
        f"{p['dags']:,}",
        f"{p['series']:,}",
        f"{c['lines']:,} of {p['lines_sent']:,}",
        f"{c['exporter_drops']:,} / {c['kernel_drops']:,}",
        f"{p['series_exported']:,}",
        mib(p["rss"]),
        f"{mib(p['metrics_bytes'], 1)} ({mib(p['metrics_gzip_bytes'], 2)} gzip)",
        _spread(p["scrape_seconds"]),
        repeat,
    ]


def _burst_rows(bursts: list[Burst]) -> list[list[str]]:
    by_size: dict[int, dict[int, Burst]] = {}
    for b in bursts:
        by_size.setdefault(b["dags"], {})[b["read_buffer"]] = b
    rows = []
    for dags, arms in by_size.items():
        default, larger = arms.get(0), next((b for k, b in arms.items() if k), None)
        assert default is not None
        cells = [f"{dags:,}", f"{default['lines_sent']:,} in {default['datagrams_sent']:,}"]
        for arm in (default, larger):
            if arm is None:
                cells += ["-"]
                continue
            lost = arm["lines_sent"] - arm["counts"]["lines"]
            cells.append(
                f"{arm['counts']['lines']:,} ({lost / arm['lines_sent']:.0%} lost; "
                f"{arm['counts']['kernel_drops']:,} datagrams dropped by the kernel; flush "
                f"{arm['flush_seconds']:.2f} s)"
            )
        rows.append(cells)
    return rows


def _evaluated_rows(r: ScalePeers) -> list[list[str]]:
    rows = []
    for e, load in zip(r["evaluated"], r.get("evaluated_load", [None] * len(r["evaluated"])), strict=False):
        recording = e["durations"].get(RECORDING_GROUP, [])
        others = [
            sum(v[i] for g, v in e["durations"].items() if g != RECORDING_GROUP)
            for i in range(len(recording))
        ]
        rows.append(
            [
                f"{e['dags']:,}",
                f"{e['series']:,}",
                f"{e['samples_in_window']}",
                ", ".join(f"{s:.2f}" for s in recording) + " s",
                ", ".join(f"{s:.2f}" for s in others) + " s",
                f"{e['recorded_series']:,}",
                f"{e['head_series']:,}",
                mib(e["rss"]),
                f"{e['fill_seconds']:,.0f} s",
                f"{load:.1f}" if load is not None else "-",
            ]
        )
    return rows


def _evaluated_table(r: ScalePeers) -> str:
    return table(
        [
            "DAGs",
            "input series",
            "samples / series / hour",
            "recording group",
            "other groups",
            "recorded series",
            "head series",
            "RSS MiB",
            "hour filled in",
            "load",
        ],
        _evaluated_rows(r),
        "rrrrrrrrrr",
    )


def _per_series(r: ScalePeers) -> tuple[float, float]:
    """The exporter's RSS and ``/metrics`` bytes per series, from the smallest size to the largest."""
    lo, hi = r["paced"][0], r["paced"][-1]
    series = max(1, hi["series"] - lo["series"])
    return (hi["rss"] - lo["rss"]) / series, (hi["metrics_bytes"] - lo["metrics_bytes"]) / series


def _largest_whole(bursts: list[Burst], buffer_set: bool) -> str:
    """The largest flush the exporter counted whole with (or without) the larger read buffer."""
    whole = [
        b for b in bursts if bool(b["read_buffer"]) == buffer_set and b["counts"]["lines"] >= b["lines_sent"]
    ]
    if not whole:
        lost = [
            1 - b["counts"]["lines"] / max(1, b["lines_sent"])
            for b in bursts
            if bool(b["read_buffer"]) == buffer_set
        ]
        return f"no flush whole (each lost {min(lost):.0%} to {max(lost):.0%})"
    best = max(whole, key=lambda b: b["lines_sent"])
    return f"a flush whole up to {best['lines_sent']:,} lines ({best['dags']:,} DAGs)"


def _pace(b: Burst) -> str:
    rate = b.get("max_udp_rate", 0)
    return f"paced at {rate:,} bytes/s" if rate else "one unpaced burst"


def _native_scrape(results: Results) -> tuple[int, float] | None:
    """Section 16's native endpoint at its largest size: (series, median scrape seconds)."""
    if "exposition" not in results["sections"]:
        return None
    arms = [a for a in data_of(results, "exposition")["arms"] if a["mode"] == "native"]
    if not arms:
        return None
    top = max(arms, key=lambda a: a["series"])
    return top["series"], statistics.median(s["seconds"] for s in top["scrapes"])


def _backend_advice(r: ScalePeers, results: Results) -> str:
    """Which backend fits `count_at = api_server` at this size, from the flush and scrape figures."""
    recommended = [b for b in r["bursts"] if b["read_buffer"]]
    whole = [b for b in recommended if b["counts"]["lines"] >= b["lines_sent"]]
    top = max(recommended, key=lambda b: b["dags"])
    native = _native_scrape(results)
    scrape = (
        f"`backend = otel` with the native scrape endpoint served {native[0]:,} series in {native[1]:.3f} s "
        "a scrape (section 16)"
        if native
        else "`backend = otel` serves the series on each worker's scrape endpoint (section 16)"
    )
    if top in whole:
        return (
            f"With `count_at = api_server`, both backends fit up to {top['dags']:,} DAGs "
            f"({top['lines_sent']:,} series) on these figures: `backend = statsd` delivered one flush of "
            f"every series whole ({_pace(top)}, the default `max_udp_rate`) into statsd_exporter with "
            f"`--statsd.read-buffer={r['rmem_max']}`, in {top['flush_seconds']:.1f} s (keep "
            "`flush_interval` above that: what a flush has not sent when its wait is over goes with the next "
            f"one); {scrape}. Without the larger read buffer the exporter counted "
            f"{_largest_whole(r['bursts'], False)}."
        )
    lost = 1 - top["counts"]["lines"] / max(1, top["lines_sent"])
    upto = max(whole, key=lambda b: b["dags"]) if whole else None
    fits = f"up to {upto['dags']:,} DAGs ({upto['lines_sent']:,} series)" if upto else "at no size measured"
    return (
        f"With `count_at = api_server`, `backend = statsd` ({_pace(top)}) delivered one flush of every "
        f"series whole with `--statsd.read-buffer={r['rmem_max']}` {fits}; at {top['dags']:,} DAGs it "
        f"lost {lost:.0%}. Past that size use `backend = otel`: {scrape}."
    )


def _loss_advice(r: ScalePeers, results: Results) -> str:
    lost = [p for p in r["paced"] if p["counts"]["lines"] < p["lines_sent"]]
    if lost:
        first = lost[0]
        whole = [p["dags"] for p in r["paced"] if p["dags"] < first["dags"]]
        upto = f"up to {max(whole):,} DAGs" if whole else "at no size"
        paced = (
            f"the paced feed ({r['rate']:,.0f} lines/s) arrived whole {upto}; at "
            f"{first['dags']:,} DAGs the exporter had counted {first['counts']['lines']:,} of "
            f"{first['lines_sent']:,} lines (kernel drops {first['counts']['kernel_drops']:,} datagrams, "
            "while the machine's other work held the CPU its one reader needs)"
        )
    else:
        paced = f"the paced feed ({r['rate']:,.0f} lines/s) arrived whole at every size"
    return (
        "**Lines lost on the way in** are what nothing upstream reports: "
        f"{paced}. Give statsd_exporter `--statsd.read-buffer` (raise `net.core.rmem_max` on the node to "
        "allow more) and alert on `statsd_exporter_udp_packet_drops_total` and the node's UDP receive "
        "errors. " + _backend_advice(r, results)
    )


def _prometheus_advice(r: ScalePeers) -> str:
    top = r["evaluated"][-1]
    slowest = max(top["durations"].get(RECORDING_GROUP, [0.0]))
    interval = r["rule_interval_s"]
    limit = top["series"] * interval / 2 / max(slowest, 1e-9)
    per_head = top["rss"] / max(1, top["head_series"])
    return (
        f"**Prometheus**: the recording group's slowest evaluation took {slowest:.1f} s at "
        f"{top['series']:,} input series with an hour of 15 s samples each, {slowest / interval:.0%} of a "
        f"`rule_interval` of {interval:.0f} s; it grows about in proportion to the series, so on a machine "
        f"like this one the group stays under half its interval up to about {round(limit, -3):,.0f} series. "
        "Keep `rule_interval` (export setting) at least twice the slowest "
        "`prometheus_rule_group_last_duration_seconds` you see (past the interval the group skips "
        "evaluations: `prometheus_rule_group_iterations_missed_total`), or give Prometheus more CPU. "
        f"Memory: about {per_head / 1024:.1f} KiB of Prometheus RSS per head series at that size (input "
        "series, the recorded ones and the exporter's own), an hour of samples each."
    )


def _gap(a: float, b: float) -> str:
    return f"{abs(a - b) / max(a, b, 1e-12):.0%}"


def _peers_noise(r: ScalePeers) -> str:
    """How far the run's own repeats are apart, at the largest size."""
    parts = []
    repeat = r.get("paced_repeat") or []
    if repeat:
        one, two = r["paced"][-1], repeat[-1]
        parts.append(
            f"the two exporters fed the same lines differ by {_gap(one['rss'], two['rss'])} in RSS and "
            f"{_gap(statistics.median(one['scrape_seconds']), statistics.median(two['scrape_seconds']))} in "
            f"median scrape time at {one['dags']:,} DAGs"
        )
    recording = r["evaluated"][-1]["durations"].get(RECORDING_GROUP, [])
    if len(recording) > 1:
        parts.append(f"the recording group's evaluations differ by {_gap(max(recording), min(recording))}")
    loads = r.get("evaluated_load") or []
    if loads:
        parts.append(f"the 1-min load average was {min(loads):.1f} to {max(loads):.1f} while they ran")
    short = [e for e in r["evaluated"] if e["samples_in_window"] < 240]
    if short:
        parts.append(
            "fewer than 240 samples per series in the hour at "
            + ", ".join(f"{e['dags']:,}" for e in short)
            + " DAGs: a replayed scrape that outran the fill's 2 s scrape timeout lost its steps, so those "
            "evaluations read a little less"
        )
    partial = [e for e in r["evaluated"] if e["recorded_series"] < e["series"]]
    if partial:
        parts.append(
            "the recording group recorded fewer series than it read at "
            + ", ".join(
                f"{e['dags']:,} DAGs ({e['recorded_series']:,} of {e['series']:,}; "
                f"{e.get('failures', 'unknown')} failed evaluations)"
                for e in partial
            )
            + ": its durations there are not those of a whole evaluation"
        )
    unsettled = [
        b for b in r["bursts"] if b["counts"]["lines"] < b["lines_sent"] and not b["counts"]["kernel_drops"]
    ]
    if unsettled:
        parts.append(
            "at "
            + ", ".join(
                f"{b['dags']:,} DAGs (read buffer {b['read_buffer'] or 'default'})" for b in unsettled
            )
            + " a flush lost lines the kernel did not drop: the exporter was still behind when its count "
            "settled (no new line for 0.5 s), so that row may overstate the loss"
        )
    return (
        "How noisy: "
        + "; ".join(parts)
        + ". The one-flush rows are one trial each: how much of a burst is lost depends on how soon the "
        "exporter's reader gets a CPU, so on the other work on the machine; read them as orders of "
        "magnitude."
    )


def _peers_advice(r: ScalePeers, results: Results) -> str:
    rss_per, bytes_per = _per_series(r)
    top = r["paced"][-1]
    return join(
        "**statsd_exporter**: memory grows by about "
        f"{rss_per / 1024:.1f} KiB and `/metrics` by about {bytes_per:.0f} bytes per series (from "
        f"{r['paced'][0]['series']:,} to {top['series']:,} series): give the exporter a memory limit well "
        f"above that (here {mib(top['rss'])} MiB at {top['series']:,} series) and Prometheus a "
        "`scrape_timeout` above the scrape time in the table. The exporter drops a series nothing updated "
        "for the mappings' `ttl` (export setting `statsd_ttl`, 25 h by default, so a daily DAG keeps its "
        "series): `/metrics` holds the DAGs that ran within that time, not every DAG ever seen.",
        _loss_advice(r, results),
        _prometheus_advice(r),
    )


def peers(results: Results) -> Rendered:
    r: ScalePeers = data_of(results, "scale_peers")
    sizes = ", ".join(f"{s:,}" for s in r["sizes"])
    repeat = r.get("paced_repeat") or []
    again = {p["dags"]: p for p in repeat}
    text = join(
        "## 11. Scale: a large deployment's series through statsd_exporter and Prometheus 3",
        f"A deployment of {sizes} DAGs x {r['tasks']} tasks, each task calling its task state store "
        "three ways "
        f"({', '.join(r['outcomes'])}): {len(r['outcomes']) * r['tasks']} counter series per DAG, "
        f"{r['sizes'][-1] * len(r['outcomes']) * r['tasks']:,} at the largest size, each with the task "
        "side's "
        "tags (`dag_id`, `task_id`, `run_type`, `operator`). Method (`benchmarks/scale_peers.py`, "
        "`scale_statsd.py`, `scale_prometheus.py`): the real programs a user runs, built from their Go "
        f"modules: statsd_exporter {r['statsd_exporter']} (the Airflow chart's pinned version) with the "
        "exported `statsd-mapping.yml`, fed over UDP on 127.0.0.1 the `statsd` backend's exact "
        "InfluxDB-tagged "
        f"lines packed in its {r['datagram']}-byte datagrams, at a bounded {r['rate']:,.0f} lines/s, one DAG "
        "range after another, measured at each size (what it counted, what it and the kernel dropped, its "
        "RSS, `/metrics` fetched 5 times with gzip as Prometheus asks). The same feed went to a second "
        "fresh exporter: the repeat column is the run's own spread. Then one flush of every series from "
        "the product's emitter (`statsd` backend) into a fresh exporter, with the default socket buffer "
        f"and with `--statsd.read-buffer={r['rmem_max']}`. Then Prometheus {r['prometheus']} (newest pin) "
        "over that exporter's output at each size with every exported rule file, after an hour of samples "
        "15 s apart was filled in (the recording rules read each counter's last hour, so one evaluation's "
        "cost depends on the samples an hour holds); then two evaluations read from "
        "`prometheus_rule_group_last_duration_seconds`.",
        _run_line(results, "scale_peers"),
        "statsd_exporter, paced feed (cumulative: each size adds its DAGs to the same exporter):",
        table(
            [
                "DAGs",
                "series",
                "lines counted",
                "drops: exporter / kernel",
                "series exported",
                "RSS MiB",
                "`/metrics` MiB",
                "scrape (median, range of 5)",
                "repeat: RSS MiB / scrape",
            ],
            [_paced_row(p, again.get(p["dags"])) for p in r["paced"]],
            "rrrrrrrrr",
        ),
        f"Idle exporter: {mib(r['exporter_idle_rss'])} MiB RSS.",
        "One flush of every series (the product's emitter, `statsd` backend, "
        + (_pace(r["bursts"][0]) if r["bursts"] else "")
        + ") into a fresh exporter:",
        table(
            [
                "DAGs",
                "lines sent",
                "counted, default buffer",
                f"counted, `--statsd.read-buffer={r['rmem_max']}`",
            ],
            _burst_rows(r["bursts"]),
            "rrll",
        ),
        "Prometheus 3 and the exported rules over the exporter's series (each size a fresh TSDB; "
        f"`{RECORDING_GROUP}` is the recording group, the other groups' durations are summed; \"hour filled "
        'in" is the wall time to replay the hour of samples; load is the 1-min '
        "load average when the evaluations were read):",
        _evaluated_table(r),
        _peers_noise(r),
        _peers_advice(r, results),
    )
    return Rendered(text)


def _real_rows(r: ScaleApi) -> list[list[str]]:
    rows = []
    for s in r["real"]:
        failed = sum(s["failures"].values())
        rows.append(
            [
                f"{s['dags']:,}",
                f"{s['requests']:,} ({failed} failed)",
                f"{s['server_cpu_ms_per_request']:.1f} ms",
                f"{s['named_series']:,} / {s['overflow_series']:,}",
                mib(s["rss"]),
                f"{mib(s['metrics_bytes'], 2)}",
                _spread(s["scrape_seconds"]),
                f"{s['wait_idle_ms']:.1f} ms / {max(s['wait_during_scrape_ms']):.0f} ms",
            ]
        )
    return rows


def _probe_rows(r: ScaleApi) -> list[list[str]]:
    rows = []
    for s in r["probe"]:
        rows.append(
            [
                f"{s['dags']:,}",
                f"{s['dags'] * 30:,}",
                f"{s['named_series']:,} / {s['overflow_series']:,}",
                f"{s['overflow_calls']:,}",
                mib(s["rss"]),
                f"{mib(s['metrics_bytes'], 2)}",
                _spread(s["scrape_seconds"]),
                _spread(s["stall_ms"], "ms", 0),
            ]
        )
    return rows


def _capped(r: ScaleApi) -> dict[str, Any] | None:
    return next((s for s in r["probe"] if s["overflow_series"]), None)


def _cap_warning(r: ScaleApi) -> str:
    capped = _capped(r)
    if capped is None:
        return f"No size reached `max_series` ({r['max_series']:,})."
    lines = [w for w in capped["warnings"] if "its limit" in w]
    first = next(s for s in r["probe"] if s["dags"])
    own = first["emitter_series"] - first["named_series"]
    said = f'store-metrics\' log line: "{lines[0]}"' if lines else "no store-metrics log line named the cap"
    return (
        f"Where `max_series` ({r['max_series']:,}) bites: at {capped['dags']:,} DAGs "
        f"({capped['dags'] * 30:,} task series) the worker exported {capped['named_series']:,} named "
        "series and "
        f'{capped["overflow_series"]:,} `dag_id="overflow"` series holding {capped["overflow_calls"]:,} '
        "calls "
        f"(counted, not attributed); {said}. With {own} series of the API server's own, the cap is reached "
        f"at about {(r['max_series'] - own) // 30:,} DAGs of this shape. The stall monitor's warnings are "
        "the other thing the user sees at this size: "
        f'{sum(1 for w in capped["warnings"] if "stalled" in w)} "event loop ... stalled" lines over 100 ms '
        "by then (the scrapes block the loop; see below)."
    )


def _same_series(r: ScaleApi) -> str:
    """Two capped sizes hold the same series: their scrape times differ only by the machine."""
    capped = [s for s in r["probe"] if s["overflow_series"]]
    if len(capped) < 2:
        return ""
    one, two = capped[0], capped[-1]
    return (
        f"; at {one['dags']:,} and {two['dags']:,} DAGs the capped worker holds the same "
        f"{one['named_series'] + one['overflow_series']:,} series, and its median scrapes took "
        f"{statistics.median(one['scrape_seconds']):.2f} and {statistics.median(two['scrape_seconds']):.2f} s"
    )


def _api_noise(r: ScaleApi) -> str:
    real, probe = r["real"][-1], r["probe"][-1]
    return (
        f"How noisy: the three scrapes of the real worker at {real['dags']:,} DAGs span "
        f"{min(real['scrape_seconds']):.2f}-{max(real['scrape_seconds']):.2f} s, the probe's at "
        f"{probe['dags']:,} DAGs {min(probe['scrape_seconds']):.2f}-{max(probe['scrape_seconds']):.2f} s"
        f"{_same_series(r)}. Memory and series counts hardly depend on the machine's load; times do (the "
        "load averages above)."
    )


def _slow_advice(r: ScaleApi) -> str:
    """Where a scrape took more than a second (computed: the first such size, or none)."""
    slow = next((s for s in r["probe"] if statistics.median(s["scrape_seconds"]) > 1.0), None)
    if slow is None:
        top = r["probe"][-1]
        return (
            f"No size measured, up to {top['dags']:,} DAGs, had a scrape of more than a second, so none "
            "calls for `count_at = tasks` on the scrape's account."
        )
    return (
        f"From about {slow['dags']:,} DAGs ({slow['named_series']:,} series) on this machine, where a scrape "
        "takes more than a second and stalls the worker's requests, prefer `count_at = tasks` (each task "
        "process sends its own few series, and statsd_exporter or the Collector holds them: section 11)."
    )


def _api_advice(r: ScaleApi) -> str:
    probe = [s for s in r["probe"] if s["dags"]]
    uncapped = [s for s in probe if not s["overflow_series"]] or probe
    lo, hi = uncapped[0], uncapped[-1]
    series = max(1, hi["named_series"] - lo["named_series"])
    per_rss = (hi["rss"] - lo["rss"]) / series
    per_bytes = (hi["metrics_bytes"] - lo["metrics_bytes"]) / series
    top = probe[-1]
    real = r["real"][-1]
    return join(
        f"How it grows: about {per_rss / 1024:.1f} KiB of worker memory and {per_bytes:.0f} bytes of "
        f"`/metrics` per series (from {lo['named_series']:,} to {hi['named_series']:,} series), in every "
        "API server worker that has served those task instances (each worker counts what it serves; "
        "Prometheus sums the workers). A scrape (the worker's endpoint as configured by default, "
        "`server_exposition = native`: section 16) took "
        f"{statistics.median(real['scrape_seconds']):.2f} s for the real worker "
        f"at {real['named_series']:,} series and {statistics.median(top['scrape_seconds']):.2f} s for the "
        f"probe at {top['named_series'] + top['overflow_series']:,} (the real worker's health request "
        f"waited up to {max(real['wait_during_scrape_ms']):.0f} ms "
        f"during a scrape against {real['wait_idle_ms']:.1f} ms idle; the probe's event loop was "
        f"blocked up to {max(top['stall_ms']):,.0f} ms per scrape).",
        f"What to set: `max_series` (default {r['max_series']:,} per process) at least the series your "
        "deployment makes (DAGs x tasks per DAG x the operations they use, 30 per DAG here, plus a few of "
        "the API server's own), else the rest are counted under `dag_id=\"overflow\"`; the worker's memory "
        "limit raised by the figure above per series; Prometheus' `scrape_timeout` above the scrape time. "
        + _slow_advice(r)
        + " The attribution cache holds "
        f"{r['cache_size']:,} task instances per worker: a task instance's first call after eviction costs "
        "one metadata query again.",
    )


def _rate(r: ScaleApi) -> float:
    """Requests per second the real worker answered, over every size."""
    return sum(s["requests"] for s in r["real"]) / max(1e-9, sum(s["client_seconds"] for s in r["real"]))


def api(results: Results) -> Rendered:
    r: ScaleApi = data_of(results, "scale_api")
    real_sizes = ", ".join(f"{s['dags']:,}" for s in r["real"])
    text = join(
        "## 12. Scale with `count_at = api_server`: one API server worker holding the series",
        "The same deployment (30 series per DAG) counted where its calls arrive: `count_at = api_server`, "
        "`backend = otel`, `otel_exporter = prometheus` (as "
        "[Count at the API server](count-at-api-server.md) sets it up: each worker serves its own "
        "`/metrics`). Method "
        "(`benchmarks/scale_api.py`, `scale_setup.py`, `scale_client.py`, `scale_api_probe.py`): a throwaway "
        "Airflow home (SQLite) with one real DAG made by Airflow (`db migrate`, `dags reserialize`, `dags "
        "trigger`), its run and task instance rows copied in SQL for the other DAGs, and a real task "
        "token per "
        "task instance from Airflow's JWT generator "
        f"(setup {r['setup_seconds']:.0f} s). **Real**: `airflow api-server --workers 1` with the plugin "
        f"(started in {r['real_startup_seconds']:.0f} s, {mib(r['real_idle_rss'])} MiB idle), each task "
        f"instance's three calls over HTTP (8 at a time), {real_sizes} DAGs (each size adds its DAGs); "
        f"at the {_rate(r):.0f} requests/s measured, a 5,000-DAG pass (150,000 requests) would take "
        f"{150_000 / max(_rate(r), 1e-9) / 60:.0f} min here, so the real worker stops there. **Probe** "
        "(up to the largest size): the worker's own counting stack as an API server worker builds it "
        "(the plugin's root middleware, `server_metrics()` with the OTel "
        "backend and its Prometheus endpoint, the attribution with its lookup threads querying the real "
        "database), with Airflow's route replaced by a stand-in that leaves the validated token on the "
        "request as Airflow's JWT dependency does and answers as the route does; memory and series are the "
        "counting's, not Airflow's (add the real worker's idle RSS). A 1 ms ticker on the probe's event loop "
        "measures how long a scrape blocks it.",
        _run_line(results, "scale_api"),
        "Real API server worker (wait: a `/api/v2/monitor/health` request to the same worker, median idle / "
        "longest while a scrape ran):",
        table(
            [
                "DAGs",
                "requests",
                "server CPU / request",
                "series named / overflow",
                "RSS MiB",
                "`/metrics` MiB",
                "scrape (median, range of 3)",
                "wait idle / during scrape",
            ],
            _real_rows(r),
            "rrrrrrrr",
        ),
        "Probe (the worker's counting stack, cumulative):",
        table(
            [
                "DAGs",
                "task series",
                "series named / overflow",
                "calls under overflow",
                "RSS MiB",
                "`/metrics` MiB",
                "scrape (median, range of 3)",
                "event loop blocked per scrape",
            ],
            _probe_rows(r),
            "rrrrrrrr",
        ),
        _cap_warning(r),
        _api_noise(r),
        _api_advice(r),
    )
    return Rendered(text)
