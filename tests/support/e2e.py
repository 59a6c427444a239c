"""The Prometheus end-to-end tests' model and checks (``tests/shipped/test_prometheus_*.py``).

A real Prometheus (``Prometheus``: ``collector/prometheus-demo.yml``'s job aimed at a target,
scraping every second, with the rules exported with ``E2E_SETTINGS``) scrapes a source that the
plugin feeds; every dashboard query and rule expression is evaluated through its HTTP API. The
expected values are computed here, in Python, from a model of the scenarios' calls (``Model``)
and from the dashboard generator's declarative query specs, never from PromQL. Calls per second
depend on which rule evaluation recorded which calls, so there the expected values are computed
from the recorded samples Prometheus holds (``recorded``, whose sums must be the model's
totals) and compared exactly.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from support.exported import export_files
from support.prometheus import PrometheusServer
from testbed.waiting import poll

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
    #: The retried attempts (not calls): (labels, ``retry_resumed`` / ``retry_not_resumed``) -> attempts.
    retries: dict[tuple[frozenset[tuple[str, str]], str], float] = field(
        default_factory=lambda: defaultdict(float)
    )

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


#: The demo's retried tasks (store_metrics/example_dags/example_retries.py), each run: per task, its
#: calls (store, outcome, n, extra tags) over both tries, and how its retry went.
DEMO_RETRIES = "example_retries"
DEMO_RETRIED_TASKS: dict[str, tuple[list[tuple[str, str, int, dict[str, str]]], str | None]] = {
    "resumes": (
        [("task", "read_absent", 1, {}), ("task", "write", 1, {}), ("task", "read_found", 1, {})],
        "retry_resumed",
    ),
    "starts_over": ([("task", "read_absent", 2, {}), ("task", "write", 1, {})], "retry_not_resumed"),
    "clears_a_cursor": ([("task", "error", 1, {"operation": "set"}), ("task", "delete", 1, {})], None),
}


def add_demo_retries(model: Model, runs: int = 1) -> None:
    """``runs`` runs of the demo's retried tasks and failing call."""
    for task, (calls, retry) in DEMO_RETRIED_TASKS.items():
        labels = {"dag_id": DEMO_RETRIES, "task_id": task, "run_type": "manual", "operator": PY_OPERATOR}
        for store, outcome, n, extra in calls:
            model.counts[(_series_name(store, outcome), frozenset({**labels, **extra}.items()))] += n * runs
        if retry is not None:
            model.retries[(frozenset(labels.items()), retry)] += runs


def demo_model(runs: int) -> Model:
    from store_metrics.commands.demo import PROPOSAL_RUNS, WATCHER_RUNS

    model = Model()
    for _ in range(runs):
        for dag in PROPOSAL_RUNS:
            model.run(dag)
    add_demo_retries(model)
    # The demo's asset watcher, run the triggerer's way: its watermark is absent once, then found.
    watcher = {
        "dag_id": catalogue.DAG_ID_NONE,
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


def feeder_passes(n: int) -> dict[Any, float]:
    """The calls ``n`` feeder passes make, per series keyed as the model is (none of zero)."""
    return {k: v for k, v in feeder_pass_model().scaled(n).counts.items() if v}


def model_key(
    labels: Mapping[str, str], left_out: tuple[str, ...] = ()
) -> tuple[str, frozenset[tuple[str, str]]]:
    """A recorded sample's labels keyed as the model is: the counter's series name (from ``store`` and
    ``outcome``) and its tags, empty ones and ``left_out`` dropped."""
    dropped = ("store", "outcome", *left_out)
    tags = frozenset((k, v) for k, v in labels.items() if v and k not in dropped)
    return (_series_name(labels["store"], labels["outcome"]), tags)


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
    if kind == "Retries":
        # Per DAG and task: the resumed attempts, those that started over, or the resume rate.
        attempts: dict[tuple[str, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for (labelset, outcome), value in model.retries.items():
            labels = dict(labelset)
            if _matches(labels, filters):
                attempts[tuple(labels.get(label, "") for label in spec.by)][outcome] += value
        if " / (" in spec.promql:  # the resume rate: resumed / all, 0 where none resumed
            return {
                k: v["retry_resumed"] / sum(v.values()) for k, v in attempts.items() if sum(v.values()) > 0
            }
        (outcome,) = [o for o in ("retry_resumed", "retry_not_resumed") if f'outcome="{o}"' in spec.promql]
        return {k: v[outcome] for k, v in attempts.items() if outcome in v}
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
#: ``E2E_SETTINGS``, and the error alerts firing one second after their condition holds: the
#: end-to-end tests that wait for an alert (through the peers, ``count_at = api_server`` scraped).
ALERTING_SETTINGS = {**E2E_SETTINGS, "error_for": "1s", "failing_for": "1s"}
#: The job prometheus-demo.yml scrapes the demo as; the dashboard's $job.
JOB = "store-metrics-demo"
CALLS = "task:airflow_store_metrics_calls:increase"
RETRIES = "task:airflow_store_metrics_retries:increase"


# -- a real Prometheus -----------------------------------------------------------------------------


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """``testbed.waiting.poll`` that says what it waited for when the time runs out."""
    value = poll(condition, timeout, interval)
    if not value:
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")
    return value


class Prometheus(PrometheusServer):
    """Prometheus with collector/prometheus-demo.yml's job aimed at ``target``, scraping every second,
    and the exported rules; ``role`` picks a pinned Prometheus (``testbed.peers``), Debian's 2.42
    when ``None``."""

    def __init__(self, tmp: Path, target: str, exported: Path, role: str | None = None) -> None:
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
        super().__init__(tmp, config, "--storage.tsdb.retention.time=1h", role=role)

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
    from store_metrics.shipped.grafana.dashboard import specs as dashboard_specs
    from store_metrics.shipped.render_context import RenderContext

    ctx = RenderContext.of(changes=E2E_SETTINGS)
    specs = {(title, ref): target for title, ref, target in dashboard_specs(ctx)}
    out = []
    for panel in dashboard(exported)["panels"]:
        for target in panel.get("targets", []):
            if target.get("exemplar"):
                continue  # the raw counters' exemplars: no line of the panel
            spec_target = specs[(panel["title"], target["refId"])]
            assert spec_target.spec.expr() == target["expr"], panel["title"]
            out.append((panel["title"], target, spec_target.spec))
    assert out
    return out


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


def grafana_value(values: list[str] | None) -> str:
    """A variable's value as Grafana's Prometheus data source writes it into a regex matcher."""
    if values is None:
        return ".*"  # All, with the dashboard's allValue
    escaped = [re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def interpolate(
    expr: str, variables: Mapping[str, list[str] | None], rng: str, interval: str, job: str = JOB
) -> str:
    """``expr`` as Grafana sends it: the filters, no cluster label, the job (the demo's by default)
    for the tasks, the watchers and the API server alike, the range, and ``interval`` per point."""
    for name in ("team_name", "dag_id", "task_id", "operator", "run_type"):
        expr = expr.replace(f"${name}", grafana_value(variables.get(name)))
    expr = expr.replace("$cluster", "").replace("$job", job)
    expr = expr.replace("$watcher_job", job).replace("$server_job", job)
    expr = expr.replace("$__interval", interval).replace("$__range", rng)
    # Left: no Grafana variable; "$1" is label_replace's reference (Grafana has no variable "1").
    assert not re.search(r"\$(?!\d)", expr), expr
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


#: The dashboard variables the queries are checked with on the demo's (and the API server's) calls.
DEMO_VARIABLES = [
    pytest.param({}, id="all"),
    pytest.param({"dag_id": ["state_store_metrics_02"]}, id="dag-02"),
    pytest.param({"dag_id": ["state_store_metrics_03"], "task_id": ["delete_and_clear"]}, id="dag-03-task"),
]


def export_for_e2e(out: Path) -> Path:
    """``store-metrics export`` with ``E2E_SETTINGS`` into ``out`` (outside a test session, where
    the ``e2e_export`` fixture is not at hand)."""
    return export_files(out, **E2E_SETTINGS)
