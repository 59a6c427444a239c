"""End to end: a real Prometheus scrapes a real endpoint fed by the plugin; every dashboard query
and every rule expression is evaluated through Prometheus's HTTP API and checked against the calls
the scenarios made.

Two sources:

* ``store-metrics demo --serve --runs 2``: the upstream proposal's four scenarios as real DAGs
  under ``dag.test()`` through the plugin (OpenTelemetry backend, Prometheus exporter). Every
  series first appears during the demo, so over a range that covers the whole demo the "calls in
  range" queries must return exactly the totals the scenarios made.
* a feeder subprocess (``python tests/test_prometheus_e2e.py --feeder PORT``) driving the
  instrumented wrappers over in-memory stores in controlled passes, so the test knows which
  samples Prometheus holds: per-second rates, ratios over a window, and recording rules (which
  need a series to exist before it grows) are checked against the calls of exactly one pass.

The expected values are computed here, in Python, from a model of the scenarios and from the
dashboard generator's declarative query specs, never from PromQL. Rates over the demo depend on
when Prometheus scraped which run, so there the expected values are computed from the raw samples
Prometheus holds (whose last values must be the model's totals), with Prometheus's own
extrapolation rule (``prometheus_rate``), and compared exactly.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.ports import free_port
from support.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
COLLECTOR = ROOT / "collector"
DASHBOARDS = ROOT / "dashboards"


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- the scenarios' calls (the model) -----------------------------------------------------------

PY_OPERATOR = "_PythonDecoratedOperator"
ERRORS_DAG = "state_store_metrics_errors"
ERRORS_TEAM = "data-platform"

#: (dag_id, task_id, operator) of each scenario
TASKS = {
    "state_store_metrics_01": ("touch_store", PY_OPERATOR),
    "state_store_metrics_02": ("touch_asset_store", PY_OPERATOR),
    "state_store_metrics_03": ("delete_and_clear", PY_OPERATOR),
    "example_resumable_job": ("run_batch_job", "MockBatchOperator"),
    ERRORS_DAG: ("flaky", PY_OPERATOR),
}

SeriesKey = tuple[str, frozenset[tuple[str, str]]]


def _series_name(store: str, outcome: str) -> str:
    from store_metrics import catalogue

    return catalogue.get(f"{store}_state_store.{outcome}").prometheus_name()


@dataclass
class Model:
    """What the scenarios called: series name + labels -> number of calls."""

    counts: dict[SeriesKey, float] = field(default_factory=lambda: defaultdict(float))
    asset_watermark: bool = False

    def add(self, dag: str, store: str, outcome: str, n: int = 1, **extra: str) -> None:
        task, operator = TASKS[dag]
        labels = {"dag_id": dag, "task_id": task, "run_type": "manual", "operator": operator, **extra}
        if dag == ERRORS_DAG:
            labels["team_name"] = ERRORS_TEAM
        self.counts[(_series_name(store, outcome), frozenset(labels.items()))] += n

    def run(self, dag: str) -> None:
        """One DAG run of a scenario, as the proposal's DAG code makes its calls."""
        if dag == "state_store_metrics_01":  # get (absent), set, get (found)
            self.add(dag, "task", "read_absent")
            self.add(dag, "task", "write")
            self.add(dag, "task", "read_found")
        elif dag == "state_store_metrics_02":  # asset get, asset set, task get
            self.add(dag, "asset", "read_found" if self.asset_watermark else "read_absent")
            self.asset_watermark = True
            self.add(dag, "asset", "write")
            self.add(dag, "task", "read_absent")
        elif dag == "state_store_metrics_03":  # set a, set b, delete a, clear; asset set w, delete w
            self.add(dag, "task", "write", 2)
            self.add(dag, "task", "delete")
            self.add(dag, "task", "clear")
            self.add(dag, "asset", "write")
            self.add(dag, "asset", "delete")
        elif dag == "example_resumable_job":  # ResumableJobMixin: read job id (absent), save it
            self.add(dag, "task", "read_absent")
            self.add(dag, "task", "write")
        elif dag == ERRORS_DAG:  # task get raises, task set works, asset set raises
            self.add(dag, "task", "error", operation="get")
            self.add(dag, "task", "write")
            self.add(dag, "asset", "error", operation="set")
        else:  # pragma: no cover
            raise AssertionError(dag)

    def scaled(self, factor: float) -> Model:
        out = Model()
        for key, value in self.counts.items():
            out.counts[key] = value * factor
        return out


def demo_model(runs: int) -> Model:
    from store_metrics.demo import PROPOSAL_RUNS

    model = Model()
    for _ in range(runs):
        for dag in PROPOSAL_RUNS:
            model.run(dag)
    return model


#: One feeder pass: the proposal's runs (02 twice, so its asset store finds on the second) plus
#: a DAG of a team whose calls raise. The feeder empties its asset stores before each pass.
FEEDER_PASS = (
    "state_store_metrics_01",
    "state_store_metrics_02",
    "state_store_metrics_02",
    "state_store_metrics_03",
    "example_resumable_job",
    ERRORS_DAG,
)


def feeder_pass_model() -> Model:
    model = Model()
    for dag in FEEDER_PASS:
        model.run(dag)
    return model


# -- expected values of a dashboard query spec ---------------------------------------------------

Groups = dict[tuple[str, ...], float]


def _matches(labels: Mapping[str, str], filters: Mapping[str, str]) -> bool:
    return all(re.fullmatch(pattern, labels.get(label, "")) for label, pattern in filters.items())


def expected(spec: Any, model: Model, filters: Mapping[str, str], seconds: float | None = None) -> Groups:
    """What ``spec`` must return for ``model``'s calls: counts, or counts / ``seconds`` for rates."""
    kind = type(spec).__name__
    if kind == "Measure":
        out: Groups = defaultdict(float)
        for (name, labelset), value in model.counts.items():
            labels = dict(labelset)
            if name in spec.series and _matches(labels, filters):
                out[tuple(labels.get(label, "") for label in spec.by)] += value
        if spec.kind == "rate":
            assert seconds
            return {k: v / seconds for k, v in out.items()}
        return dict(out)
    if kind == "Ratio":
        num = expected(spec.num, model, filters, seconds)
        den = expected(spec.den, model, filters, seconds)
        return {k: num.get(k, 0.0) / d for k, d in den.items() if d > 0}
    if kind == "TopK":
        values = expected(spec.measure, model, filters, seconds)
        return dict(sorted(values.items(), key=lambda kv: -kv[1])[: spec.k])
    raise AssertionError(kind)


def as_groups(result: list[dict[str, Any]], labels: tuple[str, ...]) -> Groups:
    out: Groups = {}
    for sample in result:
        key = tuple(sample["metric"].get(label, "") for label in labels)
        assert key not in out, f"two results for group {key}: {result}"
        out[key] = float(sample["value"][1])
    return out


def assert_groups(actual: Groups, wanted: Groups, rel: float, what: str) -> None:
    actual = {k: v for k, v in actual.items() if v != 0}
    wanted = {k: v for k, v in wanted.items() if v != 0}
    assert set(actual) == set(wanted), f"{what}: groups {sorted(actual)} != expected {sorted(wanted)}"
    for key, value in wanted.items():
        assert actual[key] == pytest.approx(value, rel=rel), (
            f"{what}: {key} = {actual[key]}, expected {value}"
        )


def assert_exact_groups(actual: Groups, wanted: Groups, what: str) -> None:
    """The same groups, zero-valued ones included, with the same values (to float rounding)."""
    assert set(actual) == set(wanted), f"{what}: groups {sorted(actual)} != expected {sorted(wanted)}"
    for key, value in wanted.items():
        assert actual[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (
            f"{what}: {key} = {actual[key]}, expected {value}"
        )


# -- rates from raw samples ----------------------------------------------------------------------------

Sample = tuple[float, float]  # (timestamp in seconds, value)
#: Labels Prometheus or the exporter add, which the model does not know.
_TARGET_LABELS = ("__name__", "job", "instance")


def prometheus_rate(samples: list[Sample], at: float, range_seconds: float) -> float | None:
    """``rate(x[range])`` evaluated at ``at`` over ``samples`` (those in the range), as Prometheus
    computes it (promql/functions.go ``extrapolatedRate``): the increase between the first and last
    sample, extrapolated towards the range's ends (at most half an average interval unless an end
    is closer, never below zero at the start), per second. None with fewer than two samples."""
    if len(samples) < 2:
        return None
    times = [round(t * 1000) for t, _ in samples]
    values = [v for _, v in samples]
    range_end = round(at * 1000)
    range_start = range_end - round(range_seconds * 1000)
    increase = values[-1] - values[0]
    last = 0.0
    for value in values:  # counter resets
        if value < last:
            increase += last
        last = value
    to_start = (times[0] - range_start) / 1000
    to_end = (range_end - times[-1]) / 1000
    sampled = (times[-1] - times[0]) / 1000
    average = sampled / (len(samples) - 1)
    if increase > 0 and values[0] >= 0:
        to_start = min(to_start, sampled * (values[0] / increase))
    threshold = average * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    return increase * (interval / sampled) / range_seconds


def observed_rates(
    prom: Prometheus,
    model: Model,
    range_seconds: int,
    at: float,
    *,
    unseen_after: float | None = None,
) -> Model:
    """Per-series ``rate(series[range])`` at ``at``, computed here from Prometheus's raw samples.

    Prometheus must hold exactly the model's series, each ending at the model's total. With
    ``unseen_after``, a last sample later than that is left out (one a rule evaluation at ``at``
    may not have seen yet: the scrape was still being written).
    """
    selector = '{__name__=~"' + "|".join(sorted({n for n, _ in model.counts})) + '"}'
    data = prom.api("query", query=f"{selector}[{range_seconds}s]", time=f"{at:.3f}")
    assert data["resultType"] == "matrix", data
    rates = Model()
    seen = []
    for series in data["result"]:
        labels = {
            k: v
            for k, v in series["metric"].items()
            if v and k not in _TARGET_LABELS and not k.startswith("otel_scope_")
        }
        key = (series["metric"]["__name__"], frozenset(labels.items()))
        assert key in model.counts, f"a series the scenarios did not make: {key}"
        seen.append(key)
        samples = [(float(t), float(v)) for t, v in series["values"]]
        assert samples and samples[-1][1] == model.counts[key], (key, samples[-3:], model.counts[key])
        if unseen_after is not None and samples[-1][0] > unseen_after:
            samples = samples[:-1]
        rate = prometheus_rate(samples, at, range_seconds)
        if rate is not None:
            rates.counts[key] = rate
    assert len(seen) == len(set(seen)) and set(seen) == set(model.counts)
    return rates


def range_seconds(rng: str) -> int:
    assert rng.endswith("s") and rng[:-1].isdigit(), rng
    return int(rng[:-1])


# -- a real Prometheus -----------------------------------------------------------------------------


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed (Debian: apt-get install -y prometheus)")
    return path


class Prometheus:
    """``prometheus`` on a free port, with a config generated from collector/prometheus.yml."""

    def __init__(self, tmp: Path, target: str, job: str = "store-metrics-demo") -> None:
        base = yaml.safe_load((COLLECTOR / "prometheus.yml").read_text())
        jobs = [j for j in base["scrape_configs"] if j["job_name"] == job]
        assert jobs, f"collector/prometheus.yml has no job {job}"
        scrape = dict(jobs[0])
        scrape["static_configs"] = [{"targets": [target]}]
        config = {
            "global": {
                **base.get("global", {}),
                "scrape_interval": "1s",
                "scrape_timeout": "900ms",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(COLLECTOR / "rules.yml")],
            "scrape_configs": [scrape],
        }
        self.config = tmp / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (tmp / "prometheus.log").open("w")
        self.started = time.time()
        self.proc = subprocess.Popen(
            [
                require_binary("prometheus"),
                f"--config.file={self.config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._ready, 30, "Prometheus /-/ready")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.proc.returncode}; see {self.log.name}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: Any) -> Any:
        encoded = urllib.parse.urlencode(params, doseq=True)
        # Queries go by POST (dashboard expressions are long, as Grafana sends them); the other
        # endpoints only answer GET.
        request = (
            urllib.request.Request(f"{self.url}/api/v1/{path}", data=encoded.encode())
            if path == "query"
            else urllib.request.Request(f"{self.url}/api/v1/{path}?{encoded}")
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{path} {params}: HTTP {exc.code} {exc.read().decode()}") from None
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", **params)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def scalar(self, expr: str, at: float | None = None) -> float | None:
        result = self.query(expr, at)
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


# -- the dashboard and rules under test -------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    return json.loads((DASHBOARDS / "store-metrics.json").read_text())


def dashboard_targets() -> list[tuple[str, dict[str, Any], Any]]:
    """(panel title, committed JSON target, generator spec) for every dashboard query."""
    generate = _load("store_metrics_dashboards_generate", DASHBOARDS / "generate.py")
    specs = {(title, ref): target for title, ref, target in generate.specs()}
    out = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            spec_target = specs[(panel["title"], target["refId"])]
            assert spec_target.spec.expr() == target["expr"], "dashboards/store-metrics.json is out of date"
            out.append((panel["title"], target, spec_target.spec))
    assert out
    return out


def grafana_value(values: list[str] | None) -> str:
    """A variable's value as Grafana's Prometheus data source writes it into a regex matcher."""
    if values is None:
        return ".*"  # All, with the dashboard's allValue
    escaped = [re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def interpolate(expr: str, variables: Mapping[str, list[str] | None], rng: str, rate_interval: str) -> str:
    for name in ("team_name", "dag_id", "task_id", "operator", "run_type"):
        expr = expr.replace(f"${name}", grafana_value(variables.get(name)))
    expr = expr.replace("$__rate_interval", rate_interval).replace("$__range", rng)
    assert "$" not in expr, expr
    return expr


def filters_of(variables: Mapping[str, list[str] | None]) -> dict[str, str]:
    return {name: grafana_value(values) for name, values in variables.items() if values is not None}


def recording_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((COLLECTOR / "rules.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "record" in r]


def alerting_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((COLLECTOR / "rules.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


# -- expected values of the rules, from the model ------------------------------------------------------

OUTCOMES = ("read_found", "read_absent", "write", "delete", "clear", "error")


def per_dag(model: Model) -> dict[tuple[str, str, str, str], float]:
    """(dag_id, team_name, store, outcome) -> calls."""
    out: dict[tuple[str, str, str, str], float] = defaultdict(float)
    for (name, labelset), value in model.counts.items():
        labels = dict(labelset)
        store = "task" if "_task_state_store_" in name else "asset"
        outcome = next(o for o in OUTCOMES if name.endswith(f"_state_store_{o}_total"))
        out[(labels["dag_id"], labels.get("team_name", ""), store, outcome)] += value
    return out


def rule_ratios(model: Model) -> dict[str, Groups]:
    """Recorded ratio -> {(dag_id, team_name, store): value} where the denominator is positive."""
    return ratios_of(per_dag(model))


def ratios_of(calls: Mapping[tuple[str, str, str, str], float]) -> dict[str, Groups]:
    """The ratio rules over per-(dag_id, team_name, store, outcome) counts or rates."""
    keys = {(d, t, s) for d, t, s, _ in calls}

    def total(key: tuple[str, str, str], outcomes: tuple[str, ...]) -> float:
        return sum(calls.get((*key, o), 0.0) for o in outcomes)

    def ratio(num: tuple[str, ...], den: tuple[str, ...]) -> Groups:
        return {k: total(k, num) / total(k, den) for k in keys if total(k, den) > 0}

    return {
        "dag_id:store_metrics_reads_per_write:ratio_rate5m": ratio(("read_found", "read_absent"), ("write",)),
        "dag_id:store_metrics_found:ratio_rate5m": ratio(("read_found",), ("read_found", "read_absent")),
        "dag_id:store_metrics_errors:ratio_rate5m": ratio(("error",), OUTCOMES),
    }


def never_read_tasks(model: Model) -> set[tuple[str, str, str]]:
    writes: dict[tuple[str, str, str], float] = defaultdict(float)
    reads: dict[tuple[str, str, str], float] = defaultdict(float)
    for (name, labelset), value in model.counts.items():
        labels = dict(labelset)
        key = (labels["dag_id"], labels["task_id"], labels.get("team_name", ""))
        if name == _series_name("task", "write"):
            writes[key] += value
        elif name in (_series_name("task", "read_found"), _series_name("task", "read_absent")):
            reads[key] += value
    return {k for k, v in writes.items() if v > 0 and reads.get(k, 0) == 0}


# -- source 1: the real demo ---------------------------------------------------------------------------


DEMO_RUNS = 2


@dataclass
class DemoSource:
    prom: Prometheus
    model: Model
    end: float


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoSource]:
    tmp = tmp_path_factory.mktemp("demo")
    port = free_port()
    prom = Prometheus(tmp, f"127.0.0.1:{port}")
    command = Path(sys.executable).with_name("store-metrics")
    log = (tmp / "demo.out").open("w+")
    proc = subprocess.Popen(
        [str(command), "demo", "--serve", "--port", str(port), "--runs", str(DEMO_RUNS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp,
    )
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            log.write(line)
            log.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: (
                any(line.startswith("serving http://") and "/metrics" in line for line in lines)
                or proc.poll() is not None
            ),
            120,
            "the demo to serve its endpoint",
        )
        assert proc.poll() is None, "store-metrics demo exited:\n" + "".join(lines)
        model = demo_model(DEMO_RUNS)
        total = sum(model.counts.values())
        names = sorted({n for n, _ in model.counts})
        every = " + ".join(f"sum({n})" for n in names)
        wait_for(lambda: prom.scalar(every) == total, 30, f"Prometheus to hold all {total} demo calls")
        scraped = f"max(timestamp({names[0]}))"
        evaluated = "min(timestamp(dag_id:store_metrics_calls:rate5m))"
        holding = prom.scalar(scraped)
        assert holding is not None
        # The rules evaluate on their own schedule: wait (bounded) for an evaluation late enough
        # that the scrape holding the totals was written before it (scrape_timeout is 900 ms).
        wait_for(lambda: (prom.scalar(evaluated) or 0) > holding + 1.5, 30, "a rule evaluation on the totals")
        end = time.time()
        # Everything up to `end` is written once a later scrape and a later evaluation are.
        wait_for(
            lambda: min(prom.scalar(scraped) or 0, prom.scalar(evaluated) or 0) > end,
            30,
            "a scrape and a rule evaluation after the end",
        )
        yield DemoSource(prom, model, end)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        reader.join(5)
        log.close()
        prom.stop()


DEMO_VARIABLES = [
    pytest.param({}, id="all"),
    pytest.param({"dag_id": ["state_store_metrics_02"]}, id="dag-02"),
    pytest.param({"dag_id": ["state_store_metrics_03"], "task_id": ["delete_and_clear"]}, id="dag-03-task"),
]


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
@pytest.mark.parametrize("variables", DEMO_VARIABLES)
def test_demo_every_dashboard_query(demo: DemoSource, variables: dict[str, list[str]]) -> None:
    """Range queries over the whole demo return exactly the scenarios' totals; rate queries exactly
    the rates of the raw samples, in exactly the groups the scenarios made."""
    rng = f"{math.ceil(demo.end - demo.prom.started) + 60}s"  # reaches back before the first sample
    filters = filters_of(variables)
    rates = observed_rates(demo.prom, demo.model, range_seconds(rng), demo.end)
    rate_groups = 0
    for title, target, spec in dashboard_targets():
        expr = interpolate(target["expr"], variables, rng=rng, rate_interval=rng)
        actual = as_groups(demo.prom.query(expr, demo.end), spec.by)
        what = f"{title} [{target['refId']}] with {variables or 'All'}"
        if spec.kind == "count":
            assert_groups(actual, expected(spec, demo.model, filters), rel=1e-9, what=what)
        else:
            # Per-series rates over the whole demo, from the raw samples, summed as the spec says.
            wanted = expected(spec, rates, filters, seconds=1.0)
            assert_exact_groups(actual, wanted, what)  # no group expected: none returned
            rate_groups += len(wanted)
    assert rate_groups > 0


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_headline_numbers(demo: DemoSource) -> None:
    """The proposal's numbers, read back through the dashboard's own queries."""
    rng = f"{math.ceil(demo.end - demo.prom.started) + 60}s"
    targets = {(title, t["refId"]): (t, spec) for title, t, spec in dashboard_targets()}

    def value(title: str, ref: str, variables: dict[str, list[str]], key: tuple[str, ...] = ()) -> float:
        target, spec = targets[(title, ref)]
        expr = interpolate(target["expr"], variables, rng=rng, rate_interval=rng)
        return as_groups(demo.prom.query(expr, demo.end), spec.by)[key]

    dag02 = {"dag_id": ["state_store_metrics_02"]}
    # 02 ran 2 x 2 times: the asset store's first read was absent, the three later ones found it.
    assert value("Asset store found ratio", "A", dag02) == pytest.approx(3 / 4)
    assert value("Task store found ratio", "A", dag02) == 0
    found = "Found ratio by DAG (selected range)"
    assert value(found, "B", {}, ("state_store_metrics_02",)) == pytest.approx(3 / 4)
    assert value(found, "A", {}, ("state_store_metrics_01",)) == pytest.approx(1 / 2)
    # 03: two set() per run, one delete and one clear; asset set + delete.
    dag03 = {"dag_id": ["state_store_metrics_03"]}
    assert value("Deletes and clears", "A", dag03) == 3 * DEMO_RUNS  # task delete + task clear + asset delete
    assert value("State store calls", "A", {}) == sum(demo.model.counts.values())
    assert value("Calls by operator", "A", {}, ("MockBatchOperator",)) == 2 * DEMO_RUNS


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_variables(demo: DemoSource) -> None:
    """The template variables' label_values() queries, as Grafana sends them to Prometheus."""
    variables = {v["name"]: v for v in dashboard()["templating"]["list"] if v["type"] == "query"}
    dags = {dict(ls)["dag_id"] for _, ls in demo.model.counts}
    assert label_values(demo.prom, variables["dag_id"]["query"], {}) == dags
    assert label_values(demo.prom, variables["team_name"]["query"], {}) == set()
    assert label_values(demo.prom, variables["task_id"]["query"], {"dag_id": ["state_store_metrics_02"]}) == {
        "touch_asset_store"
    }
    assert label_values(demo.prom, variables["operator"]["query"], {}) == {PY_OPERATOR, "MockBatchOperator"}
    assert label_values(demo.prom, variables["run_type"]["query"], {}) == {"manual"}


def label_values(prom: Prometheus, query: str, variables: Mapping[str, list[str] | None]) -> set[str]:
    """Grafana's ``label_values(selector, label)``: /api/v1/label/<label>/values?match[]=selector."""
    m = re.fullmatch(r"label_values\((\{.*\}), (\w+)\)", query)
    assert m, query
    selector = interpolate(m.group(1), variables, rng="1h", rate_interval="1m")
    now = time.time()
    data = prom.api(f"label/{m.group(2)}/values", **{"match[]": selector, "start": now - 3600, "end": now})
    return set(data)


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_rules(demo: DemoSource) -> None:
    """Every recording rule expression gives exactly the demo's groups and values; alert expressions
    pick the right DAGs."""
    # The rate rules, evaluated here at the end: per-series rates over 5m from the raw samples.
    rates = observed_rates(demo.prom, demo.model, 300, demo.end)
    # The ratio rules read the rate rules' recorded series: their last evaluation before the end.
    recorded = {
        (
            s["metric"]["dag_id"],
            s["metric"].get("team_name", ""),
            s["metric"]["store"],
            s["metric"]["outcome"],
        ): (float(s["value"][1]))
        for s in demo.prom.query("dag_id:store_metrics_calls:rate5m", demo.end)
    }
    seen = set()
    for rule in recording_rules():
        record, labels = rule["record"], rule.get("labels", {})
        result = demo.prom.query(rule["expr"], demo.end)
        what = f"{record} {labels}"
        if record == "dag_id:store_metrics_calls:rate5m":
            name = _series_name(labels["store"], labels["outcome"])
            wanted = {
                (d, t): v
                for (d, t, s, o), v in per_dag(rates).items()
                if (s, o) == (labels["store"], labels["outcome"])
            }
            assert wanted or not any(n == name for n, _ in demo.model.counts), what
            assert_exact_groups(as_groups(result, ("dag_id", "team_name")), wanted, what)
        elif record == "dag_id_operation:store_metrics_errors:rate5m":
            name = _series_name(labels["store"], "error")
            wanted = defaultdict(float)
            for (series_name, labelset), value in rates.counts.items():
                if series_name == name:
                    ls = dict(labelset)
                    wanted[(ls["dag_id"], ls.get("team_name", ""), ls["operation"])] += value
            assert_exact_groups(as_groups(result, ("dag_id", "team_name", "operation")), dict(wanted), what)
        else:
            # Exactly the groups whose denominator rate is above zero. Which rates are is the scrape
            # timing's doing (a series' first sample already holds its counts, and rate() sees only
            # growth between samples), so on a busy machine there may be none: then the rule must
            # give none. test_feeder_recording_rules checks every ratio with known, non-empty groups.
            wanted = ratios_of(recorded)[record]
            assert_exact_groups(as_groups(result, ("dag_id", "team_name", "store")), wanted, what)
        seen.add(record)
    assert seen == {r["record"] for r in recording_rules()}
    # What was recorded is what the rate rules give at their evaluation time: every (dag, store,
    # outcome) the scenarios made, valued from the raw samples that evaluation could see (the
    # newest scrape may still have been being written).
    stamps = demo.prom.query("timestamp(dag_id:store_metrics_calls:rate5m)", demo.end)
    (evaluated,) = {float(s["value"][1]) for s in stamps}
    assert set(recorded) == set(per_dag(demo.model))
    candidates = [
        per_dag(observed_rates(demo.prom, demo.model, 300, evaluated)),
        per_dag(observed_rates(demo.prom, demo.model, 300, evaluated, unseen_after=evaluated - 1.0)),
    ]
    assert any(
        set(c) == set(recorded)
        and all(recorded[k] == pytest.approx(v, rel=1e-9, abs=1e-12) for k, v in c.items())
        for c in candidates
    ), (recorded, candidates)
    alerts = {r["alert"]: r for r in alerting_rules()}
    fired = {
        (s["metric"]["dag_id"], s["metric"]["task_id"], s["metric"].get("team_name", ""))
        for s in demo.prom.query(alerts["StateStoreTaskStateNeverRead"]["expr"], demo.end)
    }
    assert fired == never_read_tasks(demo.model) == {("state_store_metrics_03", "delete_and_clear", "")}
    assert demo.prom.query(alerts["StateStoreErrorRateHigh"]["expr"], demo.end) == []
    assert demo.prom.query(alerts["StateStoreFailingAcrossDags"]["expr"], demo.end) == []
    # Prometheus itself loaded and evaluates every rule without error.
    groups = demo.prom.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == len(recording_rules()) + len(alerting_rules())
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]

    def pending() -> set[tuple[str, str]]:
        return {(a["labels"]["alertname"], a["labels"]["dag_id"]) for a in demo.prom.api("alerts")["alerts"]}

    # The rule group evaluates every second on its own schedule: wait (bounded) for its verdict.
    wait_until(lambda: ("StateStoreTaskStateNeverRead", "state_store_metrics_03") in pending(), 30)
    assert {dag for name, dag in pending() if name == "StateStoreTaskStateNeverRead"} == {
        "state_store_metrics_03"
    }


# -- source 2: the feeder, in controlled passes ------------------------------------------------------


@dataclass
class FeederSource:
    prom: Prometheus
    pass_model: Model
    window_start: float  # just before a sample holding pass A's totals
    at: float  # just after the sample holding pass B's totals

    @property
    def window(self) -> str:
        return f"{round((self.at - self.window_start) * 1000)}ms"

    @property
    def seconds(self) -> float:
        return round((self.at - self.window_start) * 1000) / 1000


class Feeder:
    def __init__(self, port: int, tmp: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", __file__, "--feeder", str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(tmp / "feeder.err").open("w"),
            text=True,
        )
        assert self.read() == "ready"

    def read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def command(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.read()

    def stop(self) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.command("quit")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def feeder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FeederSource]:
    tmp = tmp_path_factory.mktemp("feeder")
    port = free_port()
    feeder = Feeder(port, tmp)
    prom = Prometheus(tmp, f"127.0.0.1:{port}")
    try:
        model = feeder_pass_model()
        total = sum(model.counts.values())
        names = sorted({n for n, _ in model.counts})
        every = " + ".join(f"sum({n})" for n in names)
        stamp = f"max(timestamp({names[0]}))"

        def sample_with(value: float) -> float:
            wait_for(lambda: prom.scalar(every) == value, 30, f"Prometheus to hold {value} calls")
            first = prom.scalar(stamp)
            assert first is not None
            # One more scrape at the same totals, so a sample exists before the window starts.
            return float(
                wait_for(
                    lambda: (s := prom.scalar(stamp)) is not None and s > first and s, 10, "another scrape"
                )
            )

        assert feeder.command("pass") == "done"
        t_a = sample_with(total)
        assert feeder.command("pass") == "done"
        t_b = sample_with(2 * total)
        # Let the rules evaluate on pass B's samples.
        wait_for(
            lambda: (prom.scalar("max(timestamp(dag_id:store_metrics_calls:rate5m))") or 0) > t_b,
            10,
            "rule evaluation",
        )
        yield FeederSource(prom, model, window_start=t_a - 0.001, at=t_b + 0.001)
    finally:
        feeder.stop()
        prom.stop()


FEEDER_VARIABLES = [
    pytest.param({}, id="all"),
    pytest.param({"dag_id": ["state_store_metrics_02"]}, id="dag-02"),
    pytest.param({"team_name": [ERRORS_TEAM]}, id="team"),
    pytest.param(
        {"dag_id": ["state_store_metrics_01", "state_store_metrics_03"], "operator": [PY_OPERATOR]},
        id="two-dags",
    ),
]


@pytest.mark.prometheus
@pytest.mark.parametrize("variables", FEEDER_VARIABLES)
def test_feeder_every_dashboard_query_over_one_pass(
    feeder: FeederSource, variables: dict[str, list[str]]
) -> None:
    """Over a window holding exactly pass B, every query returns pass B's calls (rates: per second)."""
    filters = filters_of(variables)
    for title, target, spec in dashboard_targets():
        expr = interpolate(target["expr"], variables, rng=feeder.window, rate_interval=feeder.window)
        actual = as_groups(feeder.prom.query(expr, feeder.at), spec.by)
        wanted = expected(spec, feeder.pass_model, filters, seconds=feeder.seconds)
        assert_groups(actual, wanted, rel=0.01, what=f"{title} [{target['refId']}] with {variables or 'All'}")


@pytest.mark.prometheus
@pytest.mark.parametrize("variables", FEEDER_VARIABLES)
def test_feeder_range_queries_count_new_series_in_full(
    feeder: FeederSource, variables: dict[str, list[str]]
) -> None:
    """Over a range reaching back before the first sample, every series is new: both passes count exactly."""
    rng = f"{math.ceil(feeder.at - feeder.prom.started) + 60}s"
    filters = filters_of(variables)
    both = feeder.pass_model.scaled(2)
    for title, target, spec in dashboard_targets():
        if spec.kind != "count":
            continue
        expr = interpolate(target["expr"], variables, rng=rng, rate_interval=rng)
        actual = as_groups(feeder.prom.query(expr, feeder.at), spec.by)
        assert_groups(
            actual,
            expected(spec, both, filters),
            rel=1e-9,
            what=f"{title} [{target['refId']}] with {variables or 'All'}",
        )


@pytest.mark.prometheus
def test_feeder_headline_numbers(feeder: FeederSource) -> None:
    targets = {(title, t["refId"]): (t, spec) for title, t, spec in dashboard_targets()}

    def value(title: str, ref: str, variables: dict[str, list[str]], key: tuple[str, ...] = ()) -> float:
        target, spec = targets[(title, ref)]
        expr = interpolate(target["expr"], variables, rng=feeder.window, rate_interval=feeder.window)
        return as_groups(feeder.prom.query(expr, feeder.at), spec.by)[key]

    dag02 = {"dag_id": ["state_store_metrics_02"]}
    # The proposal's scenario 2 run twice: asset read absent, then found -> 0.5.
    assert value("Asset store found ratio", "A", dag02) == pytest.approx(0.5, rel=1e-3)
    assert value("Found ratio by DAG", "B", {}, ("state_store_metrics_02",)) == pytest.approx(0.5, rel=1e-3)
    # The team's DAG: task get raised, task set worked, asset set raised -> 2 of 3 calls failed.
    team = {"team_name": [ERRORS_TEAM]}
    assert value("Error ratio", "A", team) == pytest.approx(2 / 3, rel=1e-3)
    assert value(
        "Errors per second by store and method", "A", {}, ("get",)
    ) * feeder.seconds == pytest.approx(1, rel=0.01)


@pytest.mark.prometheus
def test_feeder_recording_rules(feeder: FeederSource) -> None:
    """Each recording rule expression, as written in rules.yml, against pass B's calls."""
    calls = per_dag(feeder.pass_model)
    ratios = rule_ratios(feeder.pass_model)
    seen = set()
    for rule in recording_rules():
        record, labels = rule["record"], rule.get("labels", {})
        result = feeder.prom.query(rule["expr"], feeder.at)
        if record == "dag_id:store_metrics_calls:rate5m":
            got = as_groups(result, ("dag_id", "team_name"))
            wanted = {
                (d, t): v
                for (d, t, s, o), v in calls.items()
                if s == labels["store"] and o == labels["outcome"]
            }
            # rate() over 5m extrapolates half a scrape interval beyond the first sample: per-second
            # values times 300 s are the pass's calls, slightly more.
            assert set(got) == set(wanted), (labels, got, wanted)
            for key, value in wanted.items():
                assert value <= got[key] * 300 <= value * 1.4, (labels, key, got[key] * 300, value)
        elif record == "dag_id_operation:store_metrics_errors:rate5m":
            got = as_groups(result, ("dag_id", "team_name", "operation"))
            store = labels["store"]
            wanted_keys = {
                (dict(ls)["dag_id"], dict(ls).get("team_name", ""), dict(ls)["operation"])
                for name, ls in feeder.pass_model.counts
                if name == _series_name(store, "error")
            }
            assert set(got) == wanted_keys
        else:
            got = as_groups(result, ("dag_id", "team_name", "store"))
            assert_groups(got, ratios[record], rel=0.02, what=record)
        seen.add(record)
    assert seen == {r["record"] for r in recording_rules()}


@pytest.mark.prometheus
def test_feeder_alert_rules(feeder: FeederSource) -> None:
    alerts = {r["alert"]: r for r in alerting_rules()}
    never_read = {
        (s["metric"]["dag_id"], s["metric"]["task_id"], s["metric"].get("team_name", ""))
        for s in feeder.prom.query(alerts["StateStoreTaskStateNeverRead"]["expr"], feeder.at)
    }
    assert (
        never_read
        == never_read_tasks(feeder.pass_model)
        == {("state_store_metrics_03", "delete_and_clear", ""), (ERRORS_DAG, "flaky", ERRORS_TEAM)}
    )
    high = {
        (s["metric"]["dag_id"], s["metric"]["store"])
        for s in feeder.prom.query(alerts["StateStoreErrorRateHigh"]["expr"], feeder.at)
    }
    assert high == {(ERRORS_DAG, "task"), (ERRORS_DAG, "asset")}
    assert feeder.prom.query(alerts["StateStoreFailingAcrossDags"]["expr"], feeder.at) == []
    rules = [r for g in feeder.prom.api("rules")["groups"] for r in g["rules"]]
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]


# -- the feeder process ----------------------------------------------------------------------------------


def feeder_main(port: int) -> None:
    """Serve a Prometheus endpoint; on "pass", make one pass of FEEDER_PASS's calls through the wrappers."""
    import store_metrics
    from store_metrics import catalogue

    class Store:
        def __init__(self) -> None:
            self.data: dict[str, Any] = {}

        def get(self, key: str, default: Any = None) -> Any:
            return self.data.get(key, default)

        def set(self, key: str, value: Any, **_: Any) -> None:
            self.data[key] = value

        def delete(self, key: str) -> None:
            self.data.pop(key, None)

        def clear(self) -> None:
            self.data.clear()

    class Flaky(Store):
        def __init__(self, fail: str) -> None:
            super().__init__()
            self.fail = fail

        def get(self, key: str, default: Any = None) -> Any:
            if self.fail == "get":
                raise RuntimeError("store down")
            return super().get(key, default)

        def set(self, key: str, value: Any, **kw: Any) -> None:
            if self.fail == "set":
                raise RuntimeError("store down")
            super().set(key, value, **kw)

    emitter = store_metrics.configure(
        "otel", exporter="prometheus", prometheus_port=port, prometheus_host="127.0.0.1"
    )

    def tags(dag: str) -> dict[str, str]:
        task, operator = TASKS[dag]
        return catalogue.task_tags(
            dag_id=dag,
            task_id=task,
            run_type="manual",
            operator=operator,
            team_name=ERRORS_TEAM if dag == ERRORS_DAG else None,
        )

    def one_pass() -> None:
        asset = store_metrics.instrument_asset_store(Store(), emitter, tags("state_store_metrics_02"))
        for dag in FEEDER_PASS:
            task_store = store_metrics.instrument_task_store(Store(), emitter, tags(dag))
            if dag == "state_store_metrics_01":
                task_store.get("counter")
                task_store.set("counter", 1)
                task_store.get("counter")
            elif dag == "state_store_metrics_02":
                asset.get("watermark")
                asset.set("watermark", "2026-01-01")
                task_store.get("counter")
            elif dag == "state_store_metrics_03":
                asset3 = store_metrics.instrument_asset_store(Store(), emitter, tags(dag))
                task_store.set("a", 1)
                task_store.set("b", 2)
                task_store.delete("a")
                task_store.clear()
                asset3.set("w", "x")
                asset3.delete("w")
            elif dag == "example_resumable_job":
                if task_store.get("job_id") is None:
                    task_store.set("job_id", "batch-1")
            elif dag == ERRORS_DAG:
                flaky = store_metrics.instrument_task_store(Flaky("get"), emitter, tags(dag))
                flaky_asset = store_metrics.instrument_asset_store(Flaky("set"), emitter, tags(dag))
                try:
                    flaky.get("cursor")
                except RuntimeError:
                    flaky.set("cursor", 0)
                with contextlib.suppress(RuntimeError):
                    flaky_asset.set("watermark", 1)

    print("ready", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "pass":
            one_pass()
            print("done", flush=True)
        elif command == "quit":
            break
    store_metrics.shutdown(timeout=2)
    print("bye", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--feeder":
        feeder_main(int(sys.argv[2]))
