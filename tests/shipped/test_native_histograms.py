"""The API server rules and panels on native histograms, and across Prometheus 3's ``le`` spelling.

Prometheus 3 can store a scraped classic histogram as one native histogram with custom buckets
(``convert_classic_histograms_to_nhcb``; kube-prometheus-stack's ``convertClassicHistogramsToNHCB``):
the ``_bucket``, ``_sum`` and ``_count`` series are then not stored at all. And it stores a classic
bucket's ``le="1024"`` as ``le="1024.0"``, so a range reaching back before an upgrade holds both.

* promtool of both Prometheus 3 pins runs server-rules.yml on the native form of API server series
  (the notation ``{{schema:-53 ... custom_values:[...]}}``): the records, quantiles and both stall
  alerts, expected values worked out by hand below; the classic form is server-rules.test.yml,
  which every pin runs (test_rule_tests_on_every_pin.py);
* a real Prometheus 3 (the newest pin) scraping the endpoint the API server worker serves (its
  ``ServerMetrics`` on the OpenTelemetry backend's Prometheus exporter,
  no Airflow needed for those bytes) with the conversion on: every rule records and every query
  of the dashboard's API server row returns data, in the proportions the observations make;
* the bar panels on recorded buckets spelled ``le="1024"`` and then ``le="1024.0"`` over one range:
  one bar per bound, on promtool 3 and 2.42.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from store_metrics.api_server import ServerMetrics
from store_metrics.counting.runtime import create_emitter
from store_metrics.shipped.templating import go_float
from support.dashboard import evaluate_queries, panel_exprs
from support.e2e import interpolate
from support.prometheus import PrometheusServer
from support.promtool import promtool
from testbed.ports import free_port
from testbed.repository import ROOT

pytestmark = pytest.mark.peers

COLLECTOR = ROOT / "collector"
STALL = catalogue.LOOP_STALL.prometheus_name()
DURATION = catalogue.SERVER_DURATION.prometheus_name()
REQUEST_SIZE = catalogue.SERVER_REQUEST_SIZE.prometheus_name()


def nhcb(metric: catalogue.Metric, per_bucket: Mapping[float, int], total: float, minutes: int = 40) -> str:
    """promtool's values of a native histogram with ``metric``'s buckets (schema -53) growing each
    minute by ``per_bucket`` observations (upper bound -> count; ``inf`` for the overflow bucket)
    whose values add up to ``total``."""
    bounds = [float(b) for b in metric.buckets]
    counts = [0] * (len(bounds) + 1)
    for bound, n in per_bucket.items():
        counts[len(bounds) if bound == float("inf") else bounds.index(bound)] = n
    values = " ".join(go_float(b) for b in bounds)

    def histogram(total: float, counts: Sequence[int]) -> str:
        buckets = " ".join(str(c) for c in counts)
        fields = f"schema:-53 sum:{total:g} count:{sum(counts)} custom_values:[{values}] buckets:[{buckets}]"
        return "{{" + fields + "}}"

    return f"{histogram(0, [0] * len(counts))}+{histogram(total, counts)}x{minutes}"


#: The job of server-rules.test.yml's series, whose alert tests are run here on the native form.
API_JOB = "api"


def _series(name: str, **labels: str) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in {"job": API_JOB, **labels}.items()) + "}"


#: The classic test file's workers, as native histograms (per minute):
#: w1 120 stalls, 6,000 ms: 100 in (50, 100], 20 in (100, 250] (20 long ones); w2 30 within 2.5 ms,
#: 60 ms; w3 40 stalls, 1,200 ms: 38 in (25, 50], 2 in (100, 250]. Task gets: w1 60 in (2.5, 5] and 6
#: in (5, 10], w2 30 and 4. Sets: 6 bodies in (256, 1024] and 3 in (262144, 1048576] bytes.
ROUTE = {"store": "task", "status_class": "2xx"}
NATIVE_INPUT = [
    (_series(STALL, worker="w1"), nhcb(catalogue.LOOP_STALL, {100: 100, 250: 20}, 6000)),
    (_series(STALL, worker="w2"), nhcb(catalogue.LOOP_STALL, {2.5: 30}, 60)),
    (_series(STALL, worker="w3"), nhcb(catalogue.LOOP_STALL, {50: 38, 250: 2}, 1200)),
    (
        _series(DURATION, **ROUTE, operation="get", value_size="le_1KiB", worker="w1"),
        nhcb(catalogue.SERVER_DURATION, {5: 60, 10: 6}, 300),
    ),
    (
        _series(DURATION, **ROUTE, operation="get", value_size="le_1KiB", worker="w2"),
        nhcb(catalogue.SERVER_DURATION, {5: 30, 10: 4}, 150),
    ),
    (
        _series(REQUEST_SIZE, **ROUTE, operation="set", worker="w1"),
        nhcb(catalogue.SERVER_REQUEST_SIZE, {1024: 6, 1048576: 3}, 2_103_000),
    ),
]


def _record(base: str) -> str:
    return base.replace(":store_metrics_", ":airflow_store_metrics_", 1)


def _samples(expr: str, expected: Mapping[str, float]) -> dict[str, Any]:
    return {
        "expr": expr,
        "eval_time": "10m",
        "exp_samples": [{"labels": labels, "value": value} for labels, value in expected.items()],
    }


def native_expectations() -> list[dict[str, Any]]:
    """At 10m, rates over 5m of counts growing n a minute: n/60 per second."""
    stalled = _record("worker:store_metrics_api_loop_stalled:ratio_rate5m")
    long_stalls = _record("worker:store_metrics_api_loop_long_stalls:rate5m")
    lengths = _record("le:store_metrics_api_loop_stall_ms_bucket:rate5m")
    sizes = _record("operation_le:store_metrics_api_request_size_bytes_bucket:rate5m")
    durations = _record("store_operation_value_size_le:store_metrics_api_request_duration_ms_bucket:rate5m")
    quantile = "histogram_quantile({q}, sum by (le, store, operation) (" + durations + "))"
    return [
        # Share of time stalled: histogram_sum's ms per second / 1000: w1 6000/60/1000 = 0.1, w2
        # 0.001, w3 0.02.
        _samples(
            stalled,
            {
                f'{stalled}{{job="{API_JOB}",worker="{w}"}}': v
                for w, v in (("w1", 0.1), ("w2", 0.001), ("w3", 0.02))
            },
        ),
        # Long stalls per second: the count's rate times the fraction above 100 ms: w1 2 * 20/120 =
        # 1/3, w2 0, w3 (40/60) * 2/40 = 1/30 (in floats, as the classic form's subtraction gives).
        _samples(
            long_stalls,
            {
                f'{long_stalls}{{job="{API_JOB}",worker="w1"}}': 0.33333333333333326,
                f'{long_stalls}{{job="{API_JOB}",worker="w2"}}': 0,
                f'{long_stalls}{{job="{API_JOB}",worker="w3"}}': 0.033333333333333326,
            },
        ),
        # Stalls by length, every worker, cumulative: <= 2.5 ms w2's 30 a minute = 0.5/s; <= 100 ms
        # 100 + 30 + 38 = 168 a minute = 2.8/s; all 190 a minute.
        _samples(
            f'{lengths}{{le=~"2.5|100|\\\\+Inf"}}',
            {
                f'{lengths}{{job="{API_JOB}",le="2.5"}}': 0.5,
                f'{lengths}{{job="{API_JOB}",le="100"}}': 2.8,
                f'{lengths}{{job="{API_JOB}",le="+Inf"}}': 3.1666666666666665,
            },
        ),
        # Set bodies, cumulative: none up to 256 B, 6 a minute (0.1/s) up to 1 KiB and on to 256 KiB,
        # 9 a minute (0.15/s) from 1 MiB on: one series per catalogue bound, le as Go writes it.
        _samples(
            f'{sizes}{{le=~"256|1024|262144|1.048576e\\\\+06|\\\\+Inf"}}',
            {
                f'{sizes}{{job="{API_JOB}",operation="set",le="{le}"}}': v
                for le, v in (
                    ("256", 0),
                    ("1024", 0.1),
                    ("262144", 0.1),
                    ("1.048576e+06", 0.15),
                    ("+Inf", 0.15),
                )
            },
        ),
        # Task gets, both workers: 90 a minute (1.5/s) in (2.5, 5], 10 (0.1667/s) in (5, 10]. p50:
        # rank 0.8333 in (2.5, 5]: 2.5 + 2.5 * 0.8333 / 1.5 = 3.8889 ms; p99: rank 1.65 in (5, 10]:
        # 5 + 5 * (1.65 - 1.5) / 0.16667 = 9.5 ms (as the classic form's 9.5).
        _samples(quantile.format(q=0.5), {'{store="task",operation="get"}': 3.888888888888889}),
        _samples(quantile.format(q=0.99), {'{store="task",operation="get"}': 9.500000000000002}),
    ]


_CLASSIC = re.compile(r"^(?P<name>\w+?)_(?P<part>sum|count|bucket)\{(?P<labels>[^}]*)\}$")
_GROWTH = re.compile(r"^0\+(?P<step>[\d.]+)x(?P<steps>\d+)$")


def as_native(input_series: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """The classic stall series of server-rules.test.yml's alert test (``_sum``, ``_count`` and the
    long-stall bound's ``_bucket`` per worker, each growing a fixed amount a step) as the native
    histogram Prometheus 3 stores for them: the bucket's observations at its bound, the rest above."""
    workers: dict[str, dict[str, Any]] = {}
    for item in input_series:
        classic = _CLASSIC.match(item["series"])
        growth = _GROWTH.match(item["values"])
        assert classic and growth and classic["name"] == STALL, item
        labels = dict(re.findall(r'(\w+)="([^"]*)"', classic["labels"]))
        bound = labels.pop("le", None)
        worker = workers.setdefault(_series(STALL, **labels), {"steps": int(growth["steps"])})
        worker[classic["part"]] = float(growth["step"])
        if bound is not None:
            worker["bound"] = float(bound)
    native = []
    for series, w in workers.items():
        below = int(w["bucket"])
        per_bucket = {w["bound"]: below, float("inf"): int(w["count"]) - below}
        native.append(
            {"series": series, "values": nhcb(catalogue.LOOP_STALL, per_bucket, w["sum"], w["steps"])}
        )
    return native


@pytest.mark.prometheus
@pytest.mark.parametrize("role", ["newest", "lts"])
def test_server_rules_record_and_alert_on_native_histograms(role: str, tmp_path: Path) -> None:
    (tmp_path / "server-rules.yml").write_text((COLLECTOR / "server-rules.yml").read_text())
    classic = yaml.safe_load((COLLECTOR / "server-rules.test.yml").read_text())
    assert f'job="{API_JOB}"' in classic["tests"][0]["input_series"][0]["series"]
    # The alerts fire as on the classic form (same workers, same shares): its alert tests, verbatim,
    # over its stall series made native.
    (alerting,) = [t for t in classic["tests"] if t.get("alert_rule_test")]
    alerts = alerting["alert_rule_test"]
    doc = {
        "rule_files": ["server-rules.yml"],
        "evaluation_interval": "1m",
        "group_eval_order": classic["group_eval_order"],
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in NATIVE_INPUT],
                "promql_expr_test": native_expectations(),
            },
            {
                "interval": alerting["interval"],
                "input_series": as_native(alerting["input_series"]),
                "alert_rule_test": alerts,
            },
        ],
    }
    (tmp_path / "native.test.yml").write_text(yaml.safe_dump(doc, width=100_000, sort_keys=False))
    assert any(a["exp_alerts"] for a in alerts if a["alertname"] == "StateStoreApiServerLongStalls")
    assert any(a["exp_alerts"] for a in alerts if a["alertname"] == "StateStoreApiServerLoopStalled")
    tested = promtool("test", "rules", "native.test.yml", cwd=tmp_path, role=role)
    assert tested.returncode == 0, tested.stdout[-6000:] + tested.stderr[-2000:]


# -- the bars across the le spelling ----------------------------------------------------------------


def server_row() -> dict[str, Any]:
    panels = json.loads((ROOT / "dashboards" / "store-metrics.json").read_text())["panels"]
    (row,) = [p for p in panels if p["type"] == "row" and p["title"].startswith("API server")]
    return dict(row)


def _upgraded(name: str, labels: str, before: str, after: str, per_minute: float) -> list[tuple[str, str]]:
    """A recorded bucket spelled ``before`` for 20 minutes, then ``after`` for 20 (a Prometheus 2 ->
    3 upgrade at 20m); the same spelling both times when they are equal."""
    if before == after:
        return [(f'{name}{{{labels},le="{before}"}}', f"{per_minute}x39")]
    return [
        (f'{name}{{{labels},le="{before}"}}', f"{per_minute}x19"),
        (f'{name}{{{labels},le="{after}"}}', f"_x20 {per_minute}x19"),
    ]


@pytest.mark.prometheus
@pytest.mark.parametrize("role", ["newest", "minimum"])
def test_the_bars_stay_one_per_bound_across_the_le_spelling(role: str, tmp_path: Path) -> None:
    sizes = _record("operation_le:store_metrics_api_request_size_bytes_bucket:rate5m")
    lengths = _record("le:store_metrics_api_loop_stall_ms_bucket:rate5m")
    scope = 'job="airflow"'
    inputs = [
        # Recorded each minute (rule_interval 1m): 0.5 sets a second up to 1 KiB, 0.75 up to 1 MiB
        # (spelled the same by both versions), 1 in all; stalls 2 a second up to 2.5 ms (the same),
        # 3 up to 100 ms, 4 in all.
        *_upgraded(sizes, f'{scope},operation="set"', "1024", "1024.0", 0.5),
        *_upgraded(sizes, f'{scope},operation="set"', "1.048576e+06", "1.048576e+06", 0.75),
        *_upgraded(sizes, f'{scope},operation="set"', "+Inf", "+Inf", 1),
        *_upgraded(lengths, scope, "2.5", "2.5", 2),
        *_upgraded(lengths, scope, "100", "100.0", 3),
        *_upgraded(lengths, scope, "+Inf", "+Inf", 4),
    ]
    exprs = panel_exprs(server_row())
    # Over the hour to 39m: 40 recorded samples a series, each a minute's worth (x 60 s).
    cases = [
        (
            exprs[("Value sizes (selected range)", "A")],
            {},
            {'{bound="1024"}': 1200, '{bound="1.048576e+06"}': 1800, '{bound="+Inf"}': 2400},
        ),
        (
            exprs[("Event-loop stalls by length (selected range)", "A")],
            {},
            {'{bound="2.5"}': 4800, '{bound="100"}': 7200, '{bound="+Inf"}': 9600},
        ),
    ]
    evaluate_queries(tmp_path, "1m", inputs, cases, "39m", role=role)
    # Rewriting le in place instead makes two series with one label set: refused.
    in_place = cases[1][0].replace('"bound", "$1", "le"', '"le", "$1", "le"').replace("by (bound)", "by (le)")
    with pytest.raises(AssertionError, match=r"same label ?set|duplicate"):
        evaluate_queries(tmp_path, "1m", inputs, [(in_place, {}, {'{le="100"}': 7200})], "39m", role=role)


# -- a real Prometheus 3 converting the API server's histograms -------------------------------------

JOB = "store-metrics-api-server"


def _drive(metrics: ServerMetrics, batches: int) -> None:
    """``batches`` x (90 task gets of 4 ms and 10 of 8 ms, 500 B answers; 6 sets of 500 B and 3 of
    700,000 B; 100 stalls of 80 ms and 20 of 200 ms), through the worker's own recording paths."""
    for _ in range(batches):
        for ms in [4.0] * 90 + [8.0] * 10:
            metrics.record(("task", "get"), 200, 0, 500, ms)
        for size in [500] * 6 + [700_000] * 3:
            metrics.record(("task", "set"), 204, size, 0, 3.0)
        for late in [80.0] * 100 + [200.0] * 20:
            metrics.on_tick(late, time.monotonic())


@pytest.mark.prometheus
@pytest.mark.slow  # a real Prometheus for ~15 s
def test_prometheus_3_converting_the_api_server_histograms(tmp_path: Path, e2e_export: Path) -> None:
    port = free_port()
    emitter = create_emitter(
        "otel",
        exporter="prometheus",
        prometheus_host="127.0.0.1",
        prometheus_port=port,
        temporality="cumulative",
        instance_id="w1",
        flush_interval=60,
    )
    metrics = ServerMetrics(emitter, "w1", tick_ms=10, threshold_ms=100)
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
        "rule_files": [str(e2e_export / "collector" / "server-rules.yml")],
        "scrape_configs": [
            {
                "job_name": JOB,
                "convert_classic_histograms_to_nhcb": True,
                "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
            }
        ],
    }
    prom = PrometheusServer(tmp_path, config, role="newest")
    try:
        # One batch, scraped; then four more: the rates over 5m see those four alone.
        _drive(metrics, 1)
        assert emitter.flush(5)
        stalls = f"histogram_count({STALL})"
        prom.wait(lambda: prom.scalar(stalls) == 120, "the first stalls scraped")
        _drive(metrics, 4)
        assert emitter.flush(5)
        prom.wait(lambda: prom.scalar(stalls) == 600, "the batch scraped")
        seen = time.time()
        long_stalls = _record("worker:store_metrics_api_loop_long_stalls:rate5m")
        prom.wait(
            lambda: (prom.scalar(f"max(timestamp({long_stalls}))") or 0) > seen + 1, "a record after it"
        )
        at = seen + 1.5
        _check_converted(prom, at)
        _check_records(prom, at)
        _check_panels(prom, e2e_export, at, f"{max(1, round(at - prom.started)) + 60}s")
    finally:
        prom.stop()
        emitter.close(2)


def _check_converted(prom: PrometheusServer, at: float) -> None:
    """Prometheus stored the histograms as native ones: no classic series at all."""
    assert prom.query(f'{{__name__=~"{STALL}_(bucket|sum|count)"}}', at) == []
    (native,) = prom.query(STALL, at)
    assert "histogram" in native and native["metric"]["job"] == JOB


def _check_records(prom: PrometheusServer, at: float) -> None:
    """The records hold what the observations make, whatever rate the extrapolation gives."""

    def one(expr: str) -> float:
        value = prom.scalar(expr, at)
        assert value is not None and value > 0, expr
        return value

    stalled = _record("worker:store_metrics_api_loop_stalled:ratio_rate5m")
    long_stalls = _record("worker:store_metrics_api_loop_long_stalls:rate5m")
    lengths = _record("le:store_metrics_api_loop_stall_ms_bucket:rate5m")
    # Per batch: 12,000 ms stalled (/1000 = 12 s) against 20 long stalls of 120.
    assert one(stalled) / one(long_stalls) == pytest.approx(12 / 20, rel=1e-9)
    assert one(f'{lengths}{{le="100"}}') / one(f'{lengths}{{le="+Inf"}}') == pytest.approx(
        100 / 120, rel=1e-9
    )
    assert one(long_stalls) / one(f'{lengths}{{le="+Inf"}}') == pytest.approx(20 / 120, rel=1e-9)
    bounds = {r["metric"]["le"] for r in prom.query(lengths, at)}
    assert bounds == {go_float(b) for b in catalogue.STALL_BUCKETS_MS} | {"+Inf"}


def _check_panels(prom: PrometheusServer, exported: Path, at: float, rng: str) -> None:
    """Every query of the API server row returns data; the latency and size panels, the values the
    observations make (p50 of 90 gets in (2.5, 5] and 10 in (5, 10]: 2.5 + 2.5 * 50/90 ms, p99:
    5 + 5 * 9/10 ms)."""
    board = json.loads((exported / "dashboards" / "store-metrics.json").read_text())
    (row,) = [p for p in board["panels"] if p["type"] == "row" and p["title"].startswith("API server")]
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for (title, ref), expr in panel_exprs(row).items():
        results[(title, ref)] = prom.query(interpolate(expr, {}, rng=rng, interval="1s", job=JOB), at)
    assert [key for key, result in results.items() if not result] == []

    def by(key: tuple[str, str], *labels: str) -> dict[str, float]:
        return {" ".join(r["metric"].get(n, "") for n in labels): float(r["value"][1]) for r in results[key]}

    # Sets took 3 ms each: their p50 and p99 lie in (2.5, 5] at 50% and 99% of its width.
    for q in (50, 99):
        assert by((f"Request latency p{q} by operation and value size", "A"), "operation", "value_size") == {
            "get le_1KiB": pytest.approx(2.5 + 2.5 * q / 90 if q < 90 else 5 + 5 * (q - 90) / 10, rel=1e-9),
            "set le_1KiB": pytest.approx(2.5 + 2.5 * q / 100, rel=1e-9),
            "set le_1MiB": pytest.approx(2.5 + 2.5 * q / 100, rel=1e-9),
        }
    bars = by(("Value sizes (selected range)", "A"), "bound")  # request bodies of sets
    assert set(bars) == {go_float(b) for b in catalogue.SIZE_BUCKETS_BYTES} | {"+Inf"}
    assert bars["1024"] / bars["+Inf"] == pytest.approx(6 / 9, rel=1e-9)
    assert bars["256"] == 0 and bars["262144"] == bars["1024"]
