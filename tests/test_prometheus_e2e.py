"""End to end: a real Prometheus scrapes a real endpoint fed by the plugin and evaluates the rules;
every dashboard query and every rule expression is evaluated through Prometheus's HTTP API and
checked against the calls the scenarios made.

The rules and the dashboard are exported for this test with ``E2E_SETTINGS`` (the rules recording
every second, as the 1 s scrapes arrive), through the same templates as the shipped files.

Two sources:

* ``store-metrics demo --serve --runs 2``: the upstream proposal's four scenarios as real DAGs
  under ``dag.test()`` through the plugin (OpenTelemetry backend, Prometheus exporter). Every
  series first appears during the demo, and the recorded calls count a new series in full, so
  over a range that covers the whole demo the "calls in range" queries must return exactly the
  totals the scenarios made.
* a feeder subprocess (``python tests/test_prometheus_e2e.py --feeder PORT``) driving the
  instrumented wrappers over in-memory stores in controlled passes, so the test knows which
  samples Prometheus holds: per-second rates, ratios over a window, and recording rules (which
  need a series to exist before it grows) are checked against the calls of exactly one pass.

The expected values are computed here, in Python, from a model of the scenarios and from the
dashboard generator's declarative query specs, never from PromQL. Calls per second depend on which
rule evaluation recorded which calls, so there the expected values are computed from the recorded
samples Prometheus holds (whose sums must be the model's totals) and compared exactly.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.prometheus import PrometheusServer
from testbed.ports import free_port
from testbed.waiting import wait_until

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
    from store_metrics.commands.demo import PROPOSAL_RUNS, WATCHER_RUNS

    model = Model()
    for _ in range(runs):
        for dag in PROPOSAL_RUNS:
            model.run(dag)
    # The demo's asset watcher, run the triggerer's way: its watermark is absent once, then found.
    watcher = {
        "dag_id": "none",
        "task_id": "example_queue",
        "run_type": "asset_watcher",
        "operator": "QueueWatermarkTrigger",
    }
    for outcome, n in (("read_absent", 1), ("read_found", WATCHER_RUNS - 1), ("write", WATCHER_RUNS)):
        model.counts[(_series_name("asset", outcome), frozenset(watcher.items()))] += n
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
            if (
                name in spec.series
                and _matches(labels, filters)
                and all(labels.get(k) == v for k, v in spec.only)
                and not any(labels.get(k) == v for k, v in spec.exclude)
            ):
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


# -- the rules and dashboard under test ----------------------------------------------------------------

#: Export settings of this test: the rules record every second, read 1 s behind (the scrapes come
#: every second); one call is enough for the error alerts (the scenarios make a few).
E2E_SETTINGS = {
    "rule_interval": "1s",
    "rule_offset": "1s",
    "hygiene_interval": "1s",
    "error_min_calls": "1",
    "failing_min_calls": "1",
}
#: The job prometheus-demo.yml scrapes the demo as; the dashboard's $job.
JOB = "store-metrics-demo"
CALLS = "task:store_metrics_calls:increase"


def export_for_e2e(out: Path) -> Path:
    """``store-metrics export`` with ``E2E_SETTINGS`` into ``out``: the shipped templates, with rules
    evaluated every second."""
    from store_metrics.pipeline import export

    for path, text in export.render_all("airflow", E2E_SETTINGS).items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(text)
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_for_e2e(tmp_path_factory.mktemp("exported"))


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


class Prometheus(PrometheusServer):
    """Prometheus with collector/prometheus-demo.yml's job aimed at ``target``, scraping every second,
    and the exported rules."""

    def __init__(self, tmp: Path, target: str, exported: Path) -> None:
        collector = exported / "collector"
        base = yaml.safe_load((collector / "prometheus-demo.yml").read_text())
        (scrape,) = [dict(j) for j in base["scrape_configs"] if j["job_name"] == JOB]
        scrape["static_configs"] = [{"targets": [target]}]
        config = {
            "global": {
                **base.get("global", {}),
                "scrape_interval": "1s",
                "scrape_timeout": "900ms",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(collector / name) for name in base["rule_files"]],
            "scrape_configs": [scrape],
        }
        super().__init__(tmp, config, "--storage.tsdb.retention.time=1h")

    def recorded_total(self) -> float:
        """Every call the rules have recorded so far."""
        return self.scalar(f"sum(sum_over_time({CALLS}[1h]))") or 0.0

    def last_evaluation(self) -> float:
        """When the call-recording rules last wrote."""
        return self.scalar(f"max(timestamp({CALLS}))") or 0.0


# -- the dashboard and rules under test -------------------------------------------------------------


def dashboard(exported: Path) -> dict[str, Any]:
    return json.loads((exported / "dashboards" / "store-metrics.json").read_text())


def dashboard_targets(exported: Path) -> list[tuple[str, dict[str, Any], Any]]:
    """(panel title, exported JSON target, generator spec) for every task-side dashboard query."""
    from generators.tokens import fill

    generate = _load("store_metrics_dashboards_generate", DASHBOARDS / "generate.py")
    specs = {(title, ref): target for title, ref, target in generate.specs()}
    out = []
    for panel in dashboard(exported)["panels"]:
        for target in panel.get("targets", []):
            spec_target = specs[(panel["title"], target["refId"])]
            assert fill(spec_target.spec.expr(), changes=E2E_SETTINGS) == target["expr"], panel["title"]
            out.append((panel["title"], target, spec_target.spec))
    assert out
    return out


def grafana_value(values: list[str] | None) -> str:
    """A variable's value as Grafana's Prometheus data source writes it into a regex matcher."""
    if values is None:
        return ".*"  # All, with the dashboard's allValue
    escaped = [re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def interpolate(
    expr: str, variables: Mapping[str, list[str] | None], rng: str, interval: str, job: str = JOB
) -> str:
    """``expr`` as Grafana sends it: the filters, no cluster label, the job (the demo's by default),
    the range, and ``interval`` per point."""
    for name in ("team_name", "dag_id", "task_id", "operator", "run_type"):
        expr = expr.replace(f"${name}", grafana_value(variables.get(name)))
    expr = expr.replace("$cluster", "").replace("$job", job)
    expr = expr.replace("$__interval", interval).replace("$__range", rng)
    assert "$" not in expr, expr
    return expr


def filters_of(variables: Mapping[str, list[str] | None]) -> dict[str, str]:
    return {name: grafana_value(values) for name, values in variables.items() if values is not None}


def alerting_rules(exported: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for name in ("rules.yml", "watcher-rules.yml"):
        doc = yaml.safe_load((exported / "collector" / name).read_text())
        found |= {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}
    return found


def range_seconds(rng: str) -> int:
    assert rng.endswith("s") and rng[:-1].isdigit(), rng
    return int(rng[:-1])


# -- what the rules recorded ------------------------------------------------------------------------------

#: Labels of the recorded calls that are not the scenarios' own tags.
_RECORD_LABELS = ("__name__", "job", "cluster", "store", "outcome")


def recorded(prom: Prometheus, at: float, window: str, how: Callable[[list[float]], float]) -> Model:
    """Per recorded series, ``how`` of its samples in ``window`` up to ``at``, keyed as the model is:
    by the counter's series name (from ``store`` and ``outcome``) and the scenario's tags."""
    data = prom.api("query", query=f"{CALLS}[{window}]", time=f"{at:.3f}")
    assert data["resultType"] == "matrix", data
    out = Model()
    for series in data["result"]:
        labels = series["metric"]
        tags = frozenset((k, v) for k, v in labels.items() if v and k not in _RECORD_LABELS)
        key = (_series_name(labels["store"], labels["outcome"]), tags)
        assert key not in out.counts, f"two recorded series for {key}"
        out.counts[key] = how([float(v) for _, v in series["values"]])
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


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
    exported: Path


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, exported: Path) -> Iterator[DemoSource]:
    tmp = tmp_path_factory.mktemp("demo")
    port = free_port()
    prom = Prometheus(tmp, f"127.0.0.1:{port}", exported)
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
        # Every call recorded by the rules (1 s behind the scrape that holds it).
        wait_for(lambda: prom.recorded_total() == total, 30, f"the rules to record all {total} demo calls")
        end = prom.last_evaluation() + 0.001
        yield DemoSource(prom, model, end, exported)
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


def demo_range(demo: DemoSource) -> str:
    return f"{math.ceil(demo.end - demo.prom.started) + 60}s"  # reaches back before the first sample


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
@pytest.mark.parametrize("variables", DEMO_VARIABLES)
def test_demo_every_dashboard_query(demo: DemoSource, variables: dict[str, list[str]]) -> None:
    """Range queries over the whole demo return exactly the scenarios' totals; per-second queries
    exactly the recorded calls' means, in exactly the groups the scenarios made."""
    rng = demo_range(demo)
    filters = filters_of(variables)
    means = recorded(demo.prom, demo.end, rng, mean)
    rate_groups = 0
    for title, target, spec in dashboard_targets(demo.exported):
        expr = interpolate(target["expr"], variables, rng=rng, interval=rng)
        actual = as_groups(demo.prom.query(expr, demo.end), spec.by)
        what = f"{title} [{target['refId']}] with {variables or 'All'}"
        if spec.kind == "count":
            assert_groups(actual, expected(spec, demo.model, filters), rel=1e-9, what=what)
        else:
            # Each recorded series' mean calls per evaluation (1 s), summed as the spec says.
            wanted = expected(spec, means, filters, seconds=1.0)
            assert_exact_groups(actual, wanted, what)  # no group expected: none returned
            rate_groups += len(wanted)
    assert rate_groups > 0


def dashboard_rows(exported: Path) -> dict[str, list[dict[str, Any]]]:
    """Row title -> its panels, collapsed rows (panels nested in the row) and open ones alike."""
    rows: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for panel in dashboard(exported)["panels"]:
        if panel["type"] == "row":
            current = rows.setdefault(panel["title"], list(panel.get("panels", [])))
        else:
            current.append(panel)
    return rows


#: The panels that have no data on the demo, and why.
NO_DATA_ON_THE_DEMO = {
    # It makes no failing call.
    "Errors per second by store and method",
    "Errors by DAG, task and method",
    "Asset watcher errors per second by trigger and method",
    # Nothing it writes expires within its runs.
    "Expired entries not cleaned up, by DAG",
    # Only a stall of 100 ms or more is a long one: the in-process API's loop may have none.
    "Long stalls per second by state store route in flight",
}


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_lights_every_row_of_the_dashboard(demo: DemoSource) -> None:
    """`store-metrics demo --serve` and Prometheus with the shipped rules: every row of the shipped
    dashboard has data, the footprint, triggers and API server rows included; so does every panel
    but those that show only failing calls (the demo makes none)."""
    rng = demo_range(demo)
    rows = dashboard_rows(demo.exported)

    def has_data(panel: dict[str, Any]) -> bool:
        return any(
            demo.prom.query(interpolate(t["expr"], {}, rng=rng, interval=rng), time.time())
            for t in panel.get("targets", [])
        )

    def empty() -> dict[str, list[str]]:
        return {
            row: missing
            for row, panels in rows.items()
            if (
                missing := [
                    p["title"] for p in panels if p["title"] not in NO_DATA_ON_THE_DEMO and not has_data(p)
                ]
            )
        }

    # The API server's stall gauge is pushed at the demo's flush interval (10 s): wait, bounded.
    try:
        wait_for(lambda: not empty(), 45, "data in every panel")
    except AssertionError:
        assert empty() == {}, "panels without data on the demo"
    lit = {row for row, panels in rows.items() if any(has_data(p) for p in panels)}
    assert lit == set(rows)


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_headline_numbers(demo: DemoSource) -> None:
    """The proposal's numbers, read back through the dashboard's own queries."""
    rng = demo_range(demo)
    targets = {(title, t["refId"]): (t, spec) for title, t, spec in dashboard_targets(demo.exported)}

    def value(title: str, ref: str, variables: dict[str, list[str]], key: tuple[str, ...] = ()) -> float:
        target, spec = targets[(title, ref)]
        expr = interpolate(target["expr"], variables, rng=rng, interval=rng)
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
    variables = {v["name"]: v for v in dashboard(demo.exported)["templating"]["list"] if v["type"] == "query"}
    dags = {dict(ls)["dag_id"] for _, ls in demo.model.counts}
    assert label_values(demo.prom, variables["cluster"]["query"], {}) == set()  # no cluster label here
    assert label_values(demo.prom, variables["job"]["query"], {}) == {JOB}
    assert label_values(demo.prom, variables["dag_id"]["query"], {}) == dags
    assert label_values(demo.prom, variables["team_name"]["query"], {}) == set()
    assert label_values(demo.prom, variables["task_id"]["query"], {"dag_id": ["state_store_metrics_02"]}) == {
        "touch_asset_store"
    }
    # Every value the calls carry, the demo's asset watcher (its trigger class, asset_watcher) included.
    operators = {dict(ls)["operator"] for _, ls in demo.model.counts}
    assert operators == {PY_OPERATOR, "MockBatchOperator", "QueueWatermarkTrigger"}
    assert label_values(demo.prom, variables["operator"]["query"], {}) == operators
    assert label_values(demo.prom, variables["run_type"]["query"], {}) == {"manual", "asset_watcher"}


def label_values(prom: Prometheus, query: str, variables: Mapping[str, list[str] | None]) -> set[str]:
    """Grafana's ``label_values(selector, label)``: /api/v1/label/<label>/values?match[]=selector."""
    m = re.fullmatch(r"label_values\(([\w:]+(?:\{.*\})?), (\w+)\)", query)
    assert m, query
    selector = interpolate(m.group(1), variables, rng="1h", interval="1m")
    now = time.time()
    data = prom.api(f"label/{m.group(2)}/values", **{"match[]": selector, "start": now - 3600, "end": now})
    return set(data)


@pytest.mark.prometheus
@pytest.mark.airflow
@pytest.mark.slow
def test_demo_rules(demo: DemoSource) -> None:
    """The recorded calls are exactly the scenarios' calls, per series; the alerts pick the right
    tasks; Prometheus evaluates every rule without error."""
    rng = demo_range(demo)
    totals = recorded(demo.prom, demo.end, rng, sum)
    assert set(totals.counts) == set(demo.model.counts)
    assert all(totals.counts[k] == v for k, v in demo.model.counts.items()), (
        totals.counts,
        demo.model.counts,
    )
    alerts = alerting_rules(demo.exported)
    fired = {
        (s["metric"]["dag_id"], s["metric"]["task_id"], s["metric"].get("team_name", ""))
        for s in demo.prom.query(alerts["StateStoreTaskStateNeverRead"]["expr"], demo.end)
    }
    assert fired == never_read_tasks(demo.model) == {("state_store_metrics_03", "delete_and_clear", "")}
    assert demo.prom.query(alerts["StateStoreErrorRateHigh"]["expr"], demo.end) == []
    assert demo.prom.query(alerts["StateStoreFailingAcrossDags"]["expr"], demo.end) == []
    demo.prom.rules_healthy()

    def pending() -> set[tuple[str, str]]:
        return {(a["labels"]["alertname"], a["labels"]["dag_id"]) for a in demo.prom.api("alerts")["alerts"]}

    # The hygiene group evaluates every second on its own schedule: wait (bounded) for its verdict.
    wait_until(lambda: ("StateStoreTaskStateNeverRead", "state_store_metrics_03") in pending(), 30)
    assert {dag for name, dag in pending() if name == "StateStoreTaskStateNeverRead"} == {
        "state_store_metrics_03"
    }


# -- source 2: the feeder, in controlled passes ------------------------------------------------------


@dataclass
class FeederSource:
    prom: Prometheus
    pass_model: Model
    window_start: float  # the evaluation that recorded pass A's calls (or a later one)
    at: float  # just after the evaluation that recorded pass B's calls
    exported: Path

    @property
    def window(self) -> str:
        return f"{round((self.at - self.window_start) * 1000) - 1}ms"

    @property
    def seconds(self) -> float:
        return (self.at - self.window_start) // 1.0  # whole rule intervals (1 s) in the window


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
def feeder(tmp_path_factory: pytest.TempPathFactory, exported: Path) -> Iterator[FeederSource]:
    """Prometheus and two feeder passes, each scraped twice, and a rule evaluation: about 10 s, so
    the tests that use it are marked slow."""
    tmp = tmp_path_factory.mktemp("feeder")
    port = free_port()
    feeder = Feeder(port, tmp)
    prom = Prometheus(tmp, f"127.0.0.1:{port}", exported)
    try:
        model = feeder_pass_model()
        total = sum(model.counts.values())

        def recorded_up_to(value: float) -> float:
            wait_for(lambda: prom.recorded_total() == value, 30, f"the rules to record {value} calls")
            return prom.last_evaluation()

        assert feeder.command("pass") == "done"
        t_a = recorded_up_to(total)
        assert feeder.command("pass") == "done"
        t_b = recorded_up_to(2 * total)
        yield FeederSource(prom, model, window_start=t_a, at=t_b + 0.001, exported=exported)
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
@pytest.mark.slow
@pytest.mark.parametrize("variables", FEEDER_VARIABLES)
def test_feeder_every_dashboard_query_over_one_pass(
    feeder: FeederSource, variables: dict[str, list[str]]
) -> None:
    """Over a window holding exactly pass B's recorded calls, every count is pass B's calls; every
    per-second query the recorded calls' means over it."""
    filters = filters_of(variables)
    means = recorded(feeder.prom, feeder.at, feeder.window, mean)
    for title, target, spec in dashboard_targets(feeder.exported):
        expr = interpolate(target["expr"], variables, rng=feeder.window, interval=feeder.window)
        actual = as_groups(feeder.prom.query(expr, feeder.at), spec.by)
        what = f"{title} [{target['refId']}] with {variables or 'All'}"
        if spec.kind == "count":
            assert_groups(actual, expected(spec, feeder.pass_model, filters), rel=1e-9, what=what)
        else:
            assert_groups(actual, expected(spec, means, filters, seconds=1.0), rel=1e-9, what=what)


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.parametrize("variables", FEEDER_VARIABLES)
def test_feeder_range_queries_count_new_series_in_full(
    feeder: FeederSource, variables: dict[str, list[str]]
) -> None:
    """Over a range reaching back before the first sample, every series is new: both passes count exactly."""
    rng = f"{math.ceil(feeder.at - feeder.prom.started) + 60}s"
    filters = filters_of(variables)
    both = feeder.pass_model.scaled(2)
    for title, target, spec in dashboard_targets(feeder.exported):
        if spec.kind != "count":
            continue
        expr = interpolate(target["expr"], variables, rng=rng, interval=rng)
        actual = as_groups(feeder.prom.query(expr, feeder.at), spec.by)
        assert_groups(
            actual,
            expected(spec, both, filters),
            rel=1e-9,
            what=f"{title} [{target['refId']}] with {variables or 'All'}",
        )


@pytest.mark.prometheus
@pytest.mark.slow
def test_feeder_headline_numbers(feeder: FeederSource) -> None:
    targets = {(title, t["refId"]): (t, spec) for title, t, spec in dashboard_targets(feeder.exported)}

    def value(title: str, ref: str, variables: dict[str, list[str]], key: tuple[str, ...] = ()) -> float:
        target, spec = targets[(title, ref)]
        expr = interpolate(target["expr"], variables, rng=feeder.window, interval=feeder.window)
        return as_groups(feeder.prom.query(expr, feeder.at), spec.by)[key]

    dag02 = {"dag_id": ["state_store_metrics_02"]}
    # The proposal's scenario 2 run twice: asset read absent, then found -> 0.5.
    assert value("Asset store found ratio", "A", dag02) == pytest.approx(0.5, rel=1e-9)
    assert value("Found ratio by DAG", "B", {}, ("state_store_metrics_02",)) == pytest.approx(0.5, rel=1e-9)
    # The team's DAG: task get raised, task set worked, asset set raised -> 2 of 3 calls failed.
    team = {"team_name": [ERRORS_TEAM]}
    assert value("Error ratio", "A", team) == pytest.approx(2 / 3, rel=1e-9)
    # One failed get() in the window, per second over the window's recorded intervals.
    assert value(
        "Errors per second by store and method", "A", {}, ("get",)
    ) * feeder.seconds == pytest.approx(1)


@pytest.mark.prometheus
@pytest.mark.slow
def test_feeder_recorded_calls_are_the_pass_s_calls(feeder: FeederSource) -> None:
    """What the rules recorded over pass B's window is, per series, exactly pass B's calls."""
    totals = recorded(feeder.prom, feeder.at, feeder.window, sum)
    wanted = feeder.pass_model.counts
    assert {k: v for k, v in totals.counts.items() if v} == dict(wanted)


@pytest.mark.prometheus
@pytest.mark.slow
def test_feeder_alert_rules(feeder: FeederSource) -> None:
    alerts = alerting_rules(feeder.exported)
    never_read = {
        (s["metric"]["dag_id"], s["metric"]["task_id"], s["metric"].get("team_name", ""))
        for s in feeder.prom.query(alerts["StateStoreTaskStateNeverRead"]["expr"], feeder.at)
    }
    assert (
        never_read
        == never_read_tasks(feeder.pass_model)
        == {("state_store_metrics_03", "delete_and_clear", ""), (ERRORS_DAG, "flaky", ERRORS_TEAM)}
    )
    # Per DAG, both stores: 4 of the errors DAG's 6 calls raised over the two passes.
    high = {
        (s["metric"]["dag_id"], s["metric"]["job"]): float(s["value"][1])
        for s in feeder.prom.query(alerts["StateStoreErrorRateHigh"]["expr"], feeder.at)
    }
    assert high == {(ERRORS_DAG, JOB): pytest.approx(4 / 6)}
    # 4 failed of every call of both passes: under the store-wide threshold.
    assert feeder.prom.query(alerts["StateStoreFailingAcrossDags"]["expr"], feeder.at) == []
    feeder.prom.rules_healthy()


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
