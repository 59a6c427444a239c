"""``count_at = api_server`` under a real ``airflow standalone``: the API server counts what tasks counted.

Two deployments, each a real ``airflow standalone`` (LocalExecutor: every task its own short-lived
process) running the same DAG runs: the upstream proposal's four scenarios (scenario 2 twice),
three mapped instances of one task, an async task on its asset's store, an async task on its task
store (``aget``/``aset``/``adelete``/``aclear`` on Airflow 3.4; the sync methods on 3.3, which has
no others), and six tasks using the task store at once (at least four in parallel):

* **Switching** (one deployment, one metadata database, one UDP socket, DogStatsD): the runs with
  ``count_at = tasks``, then the same deployment restarted with ``count_at = api_server`` and the
  runs again, then restarted with ``count_at = tasks`` for a few more. The API server and the task
  processes share the configuration and the socket, so a call counted on both sides would show up
  twice: each phase must add exactly its calls, once, with the task side's names and tags.
* **Scraped** (``count_at = api_server``, the OpenTelemetry backend with its Prometheus exporter,
  two API server workers each serving its own endpoint, a real Prometheus scraping both workers
  directly: no Collector, no StatsD): the series Prometheus holds, summed across workers, are
  exactly those the task side sent in the switching deployment's first phase; every dashboard
  query returns what the calls say; and calls made by a raw HTTP client with a task token minted
  by Airflow's own JWT generator are counted with that task instance's tags. A task cleared and
  re-run is counted as itself, and so are calls still made as its archived attempt (a write Airflow
  refuses with 410 Gone on 3.4: ``error``; a read answered 404: ``read_absent``).

Under ``dag.test()`` there is no API server: with ``count_at = api_server`` nothing is counted.
"""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import test_prometheus_e2e as e2e
from store_metrics import catalogue, example_dags
from support.airflow import Standalone
from support.prometheus import PrometheusServer, scraping_job
from support.totals import Key, totals
from testbed.airflow import AirflowHome, make_home
from testbed.ports import free_port
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

PYOP = "_PythonDecoratedOperator"
MOCK = "MockBatchOperator"
EXAMPLES = Path(example_dags.__file__).parent
JOB = "store-metrics-api-server"

#: dag_id -> (task_id, operator) of every DAG the runs use.
TASKS = {
    "state_store_metrics_01": ("touch_store", PYOP),
    "state_store_metrics_02": ("touch_asset_store", PYOP),
    "state_store_metrics_03": ("delete_and_clear", PYOP),
    "example_resumable_job": ("run_batch_job", MOCK),
    "store_metrics_mapped": ("resume_or_start", PYOP),
    "store_metrics_async_assets": ("async_watermark", PYOP),
    "store_metrics_async_task_store": ("async_task_store", PYOP),
}
CONCURRENT = "store_metrics_concurrent"
#: The DAG runs, in two waves: scenario 2's second run must find what its first one wrote.
FIRST_WAVE = ("state_store_metrics_02",)
SECOND_WAVE = (
    "state_store_metrics_01",
    "state_store_metrics_02",
    "state_store_metrics_03",
    "example_resumable_job",
    "store_metrics_mapped",
    "store_metrics_async_assets",
    "store_metrics_async_task_store",
    CONCURRENT,
)
DAG_IDS = sorted({*FIRST_WAVE, *SECOND_WAVE})
#: What testbed/dags/store_metrics_async_task_store.py calls, async or not.
ASYNC_TASK_STORE = {"read_absent": 2, "write": 1, "read_found": 1, "delete": 1, "clear": 1}


# -- what the runs call ------------------------------------------------------------------------------


def _series(dag_id: str, task_id: str, operator: str) -> tuple[tuple[str, str], ...]:
    return (("dag_id", dag_id), ("task_id", task_id), ("run_type", "manual"), ("operator", operator))


class Calls:
    """The calls the DAG runs make, as DogStatsD totals: (name, tags) -> calls. Tracks asset state."""

    def __init__(self) -> None:
        self.totals: Counter[Key] = Counter()
        self.watermark_02 = False  # scenario 2's asset key, which outlives its runs

    def add(self, dag_id: str, store: str, outcome: str, n: int = 1, task_id: str = "") -> None:
        task, operator = TASKS.get(dag_id, (task_id, PYOP))
        self.totals[
            (f"airflow.{store}_state_store.{outcome}", _series(dag_id, task_id or task, operator))
        ] += n

    def run(self, dag_id: str) -> None:
        if dag_id == "state_store_metrics_01":
            self.add(dag_id, "task", "read_absent")
            self.add(dag_id, "task", "write")
            self.add(dag_id, "task", "read_found")
        elif dag_id == "state_store_metrics_02":
            self.add(dag_id, "asset", "read_found" if self.watermark_02 else "read_absent")
            self.watermark_02 = True
            self.add(dag_id, "asset", "write")
            self.add(dag_id, "task", "read_absent")
        elif dag_id == "state_store_metrics_03":
            self.add(dag_id, "task", "write", 2)
            self.add(dag_id, "task", "delete")
            self.add(dag_id, "task", "clear")
            self.add(dag_id, "asset", "write")
            self.add(dag_id, "asset", "delete")
        elif dag_id == "example_resumable_job":
            self.add(dag_id, "task", "read_absent")
            self.add(dag_id, "task", "write")
        elif dag_id == "store_metrics_mapped":  # three mapped instances, one series
            self.add(dag_id, "task", "read_absent", 3)
            self.add(dag_id, "task", "write", 3)
        elif dag_id == "store_metrics_async_assets":
            for outcome in ("write", "read_found", "delete", "read_absent", "clear"):
                self.add(dag_id, "asset", outcome)
        elif dag_id == "store_metrics_async_task_store":
            for outcome, calls in {
                "read_absent": 2,
                "write": 1,
                "read_found": 1,
                "delete": 1,
                "clear": 1,
            }.items():
                self.add(dag_id, "task", outcome, calls)
        elif dag_id == CONCURRENT:
            for n in range(6):
                for outcome, calls in {
                    "write": 20,
                    "read_found": 20,
                    "read_absent": 5,
                    "delete": 3,
                    "clear": 1,
                }.items():
                    self.add(dag_id, "task", outcome, calls, task_id=f"worker_{n}")
        else:  # pragma: no cover
            raise AssertionError(dag_id)

    def runs(self, dag_ids: tuple[str, ...]) -> Counter[Key]:
        """The totals of these runs alone (the asset state carries on)."""
        before = Counter(self.totals)
        for dag_id in dag_ids:
            self.run(dag_id)
        return self.totals - before


# -- a deployment -----------------------------------------------------------------------------------


def deployment(root: Path, settings: dict[str, str]) -> Standalone:
    """``airflow standalone`` with the scenarios' DAGs, REST triggering and a known JWT secret."""
    barrier = root / "barrier"
    airflow = Standalone(
        root,
        free_port(),
        {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__API_AUTH__JWT_SECRET": "store-metrics-count-at-" + root.name,
            "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "1",
            "STORE_METRICS_TEST_BARRIER": str(barrier),
            **settings,
        },
    )
    for module in example_dags.SCENARIOS:
        shutil.copy(EXAMPLES / f"{module}.py", airflow.home.dags)
    return airflow


def restarted(previous: Standalone, settings: dict[str, str], phase: str) -> Standalone:
    """The same deployment (home, metadata database, DAGs, port) with other ``[store_metrics]`` settings."""
    again = copy.copy(previous)
    env = {k: v for k, v in previous.env.items() if not k.startswith("AIRFLOW__STORE_METRICS__")}
    again.env = {**env, "AIRFLOW__STORE_METRICS__FLUSH_INTERVAL": "1", **settings}
    again.log_path = previous.home.path / f"standalone-{phase}.log"
    again.proc = None
    return again


def api(airflow: Standalone, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{airflow.api_port}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise AssertionError(
            f"{method} {path}: {exc.code} {exc.read()[:2000]!r}\n{airflow.log_tail()}"
        ) from exc
    except urllib.error.URLError as exc:
        raise AssertionError(f"{method} {path}: {exc.reason}\n{airflow.log_tail()}") from exc


def run_dags(airflow: Standalone, dag_ids: tuple[str, ...], tag: str) -> None:
    """Trigger each run (through the REST API) and wait until all have succeeded."""
    barrier = Path(airflow.env["STORE_METRICS_TEST_BARRIER"])
    shutil.rmtree(barrier, ignore_errors=True)
    barrier.mkdir()
    run_ids = []
    for n, dag_id in enumerate(dag_ids):
        run_id = f"{tag}-{n}-{dag_id}"
        api(airflow, "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None})
        run_ids.append(run_id)

    def states() -> dict[str, str]:
        marks = ",".join("?" * len(run_ids))
        return dict(
            airflow.home.query(f"select run_id, state from dag_run where run_id in ({marks})", *run_ids)
        )  # type: ignore[arg-type]

    wait_until(
        lambda: (
            (all(s in ("success", "failed") for s in states().values()) and len(states()) == len(run_ids))
            or airflow._died()
        ),
        300,
        interval=0.5,
    )
    assert not airflow._died(), airflow.log_tail()
    assert set(states().values()) == {"success"}, (states(), airflow.log_tail())


def run_waves(airflow: Standalone, tag: str) -> None:
    run_dags(airflow, FIRST_WAVE, f"{tag}-a")
    run_dags(airflow, SECOND_WAVE, f"{tag}-b")


def ours(lines: list[str]) -> Counter[Key]:
    """The state store counters among the lines, by series."""
    return Counter(
        {
            k: v
            for k, v in totals(lines, "dogstatsd").items()
            if k[0].startswith(("airflow.task_state_store.", "airflow.asset_state_store."))
        }
    )


def task_logs(home: AirflowHome, phase: str) -> str:
    """The logs of the task instances of one phase's runs."""
    files = (home.path / "logs").rglob("*.log")
    return "\n".join(p.read_text(errors="replace") for p in files if f"run_id={phase}-" in str(p))


# -- the switching deployment ------------------------------------------------------------------------


@dataclass
class Switching:
    home: AirflowHome
    #: phase -> (what the phase's runs call, what the socket received during the phase)
    phases: dict[str, tuple[Counter[Key], Counter[Key]]]
    logs: dict[str, str]


PHASES = (
    ("tasks", {"AIRFLOW__STORE_METRICS__COUNT_AT": "tasks"}, SECOND_WAVE),
    ("api_server", {"AIRFLOW__STORE_METRICS__COUNT_AT": "api_server"}, SECOND_WAVE),
    (
        "tasks_again",
        {"AIRFLOW__STORE_METRICS__COUNT_AT": "tasks"},
        ("state_store_metrics_01", "store_metrics_mapped"),
    ),
)


def run_phase(
    airflow: Standalone, receiver: UdpReceiver, calls: Calls, phase: str, dag_ids: tuple[str, ...]
) -> tuple[tuple[Counter[Key], Counter[Key]], str]:
    """Start, run ``dag_ids``, stop: (what the runs call, what the socket received), and the logs."""
    airflow.start(DAG_IDS)
    start = len(receiver.lines_before_marker())
    if dag_ids is SECOND_WAVE:
        expected = calls.runs(FIRST_WAVE)
        run_dags(airflow, FIRST_WAVE, f"{phase}-a")
        expected += calls.runs(dag_ids)
        run_dags(airflow, dag_ids, f"{phase}-b")
    else:
        expected = calls.runs(dag_ids)
        run_dags(airflow, dag_ids, phase)
    # The API server flushes every second: wait for the expected number of calls. Then stop: stop()
    # returns once every process of the deployment has exited, each having sent what it counted
    # (task processes at task end, the API server at lifespan shutdown and at exit); the marker
    # behind them on the socket makes sure all of it is read, anything counted twice included.
    wanted = sum(expected.values())
    wait_until(lambda: sum(ours(receiver.lines()[start:]).values()) >= wanted, 30)
    airflow.stop()
    received = ours(receiver.lines_before_marker()[start:])
    return (expected, received), task_logs(airflow.home, phase) + airflow.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def switching(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Switching]:
    root = tmp_path_factory.mktemp("count-at-switching")
    receiver = UdpReceiver()
    dogstatsd = {
        "AIRFLOW__STORE_METRICS__BACKEND": "dogstatsd",
        "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
        "AIRFLOW__STORE_METRICS__PORT": str(receiver.port),
    }
    calls = Calls()
    phases: dict[str, tuple[Counter[Key], Counter[Key]]] = {}
    logs: dict[str, str] = {}
    airflow: Standalone | None = None
    try:
        for phase, count_at, dag_ids in PHASES:
            settings = {**dogstatsd, **count_at}
            airflow = deployment(root, settings) if airflow is None else restarted(airflow, settings, phase)
            phases[phase], logs[phase] = run_phase(airflow, receiver, calls, phase, dag_ids)
        yield Switching(airflow.home if airflow else AirflowHome(root), phases, logs)
    finally:
        if airflow is not None:
            airflow.stop()
        receiver.close()


def task_store_is_async() -> bool:
    """Whether this Task SDK's task store accessor has aget/aset/adelete/aclear (1.4, Airflow 3.4)."""
    from airflow.sdk.execution_time.context import TaskStateStoreAccessor

    return hasattr(TaskStateStoreAccessor, "aget")


def test_count_at_tasks_counts_each_call_once_on_the_task_side(switching: Switching) -> None:
    expected, received = switching.phases["tasks"]
    assert received == expected
    assert "count_at = api_server" not in switching.logs["tasks"]


@pytest.mark.parametrize("phase", ["tasks", "api_server"])
def test_the_async_task_used_the_async_task_store_methods_where_airflow_has_them(
    switching: Switching, phase: str
) -> None:
    """Its calls are in the exact totals above; here: on Airflow 3.4 they were aget/aset/..."""
    methods = "async" if task_store_is_async() else "sync"
    assert f"task store methods: {methods}" in switching.logs[phase]


def test_switching_to_api_server_counts_each_call_once_on_the_api_server(switching: Switching) -> None:
    expected, received = switching.phases["api_server"]
    # Scenario 2's asset key was written in the first phase: both its reads find it now.
    assert (
        expected[
            (
                "airflow.asset_state_store.read_found",
                _series("state_store_metrics_02", "touch_asset_store", PYOP),
            )
        ]
        == 2
    )
    assert received == expected
    log = switching.logs["api_server"]
    assert "count_at = api_server: this task's state store calls are counted by the API server" in log
    assert "count_at = api_server: API server worker" in log


def test_switching_back_to_tasks_counts_each_call_once_on_the_task_side(switching: Switching) -> None:
    expected, received = switching.phases["tasks_again"]
    assert received == expected


# -- the scraped deployment: OpenTelemetry's Prometheus exporter on each API server worker --------------

WORKERS = 2


Prometheus = PrometheusServer


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports that are free on 127.0.0.1 now."""
    for _ in range(50):
        first = free_port()
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise AssertionError("no free consecutive ports")


STATE_STORE_SERIES = '{__name__=~"airflow_(task|asset)_state_store_[a-z_]+_total"}'
#: Labels Prometheus or the exporter add: the target, and the instrumentation scope.
TARGET_LABELS = ("__name__", "job", "instance")


def series_key(metric: Mapping[str, str]) -> tuple[str, frozenset[tuple[str, str]]]:
    labels = frozenset(
        (k, v) for k, v in metric.items() if v and k not in TARGET_LABELS and not k.startswith("otel_scope_")
    )
    return metric["__name__"], labels


def as_prometheus(counts: Mapping[Key, float]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """DogStatsD totals as Prometheus series: ``airflow.task_state_store.write`` -> ``..._write_total``."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = defaultdict(float)
    for (name, tags), value in counts.items():
        metric = catalogue.get(name.removeprefix("airflow."))
        out[(metric.prometheus_name(), frozenset(tags))] += value
    return dict(out)


def held(prom: Prometheus, at: float | None = None) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """What Prometheus holds now, summed across the workers (instances) that hold each series."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = defaultdict(float)
    for sample in prom.query(STATE_STORE_SERIES, at):
        out[series_key(sample["metric"])] += float(sample["value"][1])
    return dict(out)


@dataclass
class Scraped:
    airflow: Standalone
    prom: Prometheus
    calls: e2e.Model
    end: float
    first_port: int
    exported: Path


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    root = tmp_path_factory.mktemp("count-at-scraped")
    exported = e2e.export_for_e2e(tmp_path_factory.mktemp("exported"))
    first = free_ports(WORKERS)
    airflow = deployment(
        root,
        {
            "AIRFLOW__STORE_METRICS__COUNT_AT": "api_server",
            "AIRFLOW__STORE_METRICS__BACKEND": "otel",
            "AIRFLOW__STORE_METRICS__OTEL_EXPORTER": "prometheus",
            "AIRFLOW__STORE_METRICS__PROMETHEUS_HOST": "127.0.0.1",
            "AIRFLOW__STORE_METRICS__PROMETHEUS_PORT": str(free_port()),
            "AIRFLOW__STORE_METRICS__SERVER_PROMETHEUS_PORT": str(first),
            "AIRFLOW__API__WORKERS": str(WORKERS),
        },
    )
    prom = scraping_job(root, exported, JOB, [f"127.0.0.1:{port}" for port in range(first, first + WORKERS)])
    try:
        airflow.start(DAG_IDS)
        calls = Calls()
        expected = calls.runs(FIRST_WAVE) + calls.runs(SECOND_WAVE)
        run_waves(airflow, "scraped")
        model = e2e.Model()
        for key, value in as_prometheus(expected).items():
            model.counts[key] = value
        total = sum(model.counts.values())
        every = f"sum({STATE_STORE_SERIES})"
        e2e.wait_for(lambda: prom.scalar(every) == total, 60, f"Prometheus to hold all {total} calls")
        scraped_at = "max(timestamp(airflow_task_state_store_write_total))"
        evaluated = f"min(timestamp({e2e.CALLS}))"
        holding = prom.scalar(scraped_at)
        assert holding is not None
        e2e.wait_for(
            lambda: (prom.scalar(evaluated) or 0) > holding + 1.5, 30, "a rule evaluation on the totals"
        )
        end = time.time()
        e2e.wait_for(
            lambda: min(prom.scalar(scraped_at) or 0, prom.scalar(evaluated) or 0) > end,
            30,
            "a scrape and a rule evaluation after the end",
        )
        yield Scraped(airflow, prom, model, end, first, exported)
    finally:
        airflow.stop()
        prom.stop()


def test_each_worker_serves_its_own_endpoint_and_prometheus_scrapes_them_directly(scraped: Scraped) -> None:
    up = {s["metric"]["instance"]: s["value"][1] for s in scraped.prom.query(f'up{{job="{JOB}"}}')}
    ports = range(scraped.first_port, scraped.first_port + WORKERS)
    assert up == {f"127.0.0.1:{port}": "1" for port in ports}
    log = scraped.airflow.log_path.read_text(errors="replace")
    workers = set(re.findall(r"count_at = api_server: API server worker (\S+) counts", log))
    assert len(workers) == WORKERS, workers


def test_the_api_server_gives_exactly_the_series_the_task_side_gave(
    scraped: Scraped, switching: Switching
) -> None:
    """The same runs: summed across workers, the series and values equal the task side's own totals."""
    task_side = as_prometheus(switching.phases["tasks"][1])
    assert held(scraped.prom, scraped.end) == task_side == scraped.calls.counts
    # Every call was attributed to its task instance: no unknown caller.
    assert scraped.prom.query('{__name__=~"airflow_.*_state_store_.*", dag_id="unknown"}') == []


@pytest.mark.prometheus
@pytest.mark.parametrize(
    "variables", [*e2e.DEMO_VARIABLES, pytest.param({"operator": [MOCK]}, id="operator")]
)
def test_every_dashboard_query_returns_the_calls(scraped: Scraped, variables: dict[str, list[str]]) -> None:
    """Counts over the whole run are the calls; per-second queries the recorded calls' means, summed
    over workers, in exactly the groups the runs made."""
    prom, model = scraped.prom, scraped.calls
    rng = f"{math.ceil(scraped.end - prom.started) + 60}s"
    filters = e2e.filters_of(variables)
    means = e2e.recorded(prom, scraped.end, rng, e2e.mean)
    rate_groups = 0
    for title, target, spec in e2e.dashboard_targets(scraped.exported):
        expr = e2e.interpolate(target["expr"], variables, rng=rng, interval=rng, job=JOB)
        actual = e2e.as_groups(prom.query(expr, scraped.end), spec.by)
        what = f"{title} [{target['refId']}] with {variables or 'All'}"
        if spec.kind == "count":
            e2e.assert_groups(actual, e2e.expected(spec, model, filters), rel=1e-9, what=what)
        else:
            wanted = e2e.expected(spec, means, filters, seconds=1.0)
            e2e.assert_exact_groups(actual, wanted, what)
            rate_groups += len(wanted)
    assert rate_groups > 0


# -- any Execution API client with a task token ----------------------------------------------------


def in_deployment(airflow: Standalone, code: str) -> str:
    """Run ``code`` in a fresh interpreter with the deployment's environment; its last line of output."""
    proc = subprocess.run(
        [sys.executable, "-c", code], env=airflow.env, capture_output=True, text=True, timeout=120, check=True
    )
    return proc.stdout.strip().splitlines()[-1]


def mint_token(airflow: Standalone, ti_id: str) -> str:
    """A task token for ``ti_id``, signed by Airflow's own generator with the deployment's secret."""
    return in_deployment(
        airflow,
        "from airflow.api_fastapi.execution_api.app import _jwt_generator\n"
        f"print(_jwt_generator().generate(extras={{'sub': {ti_id!r}}}))\n",
    )


def execution_client(airflow: Standalone, token: str) -> httpx.Client:
    """A raw HTTP client of the deployment's Execution API, with ``token`` as its bearer."""
    return httpx.Client(
        base_url=f"http://127.0.0.1:{airflow.api_port}/execution/",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


Series = tuple[str, frozenset[tuple[str, str]]]


def series_of(store: str, outcome: str, labels: Mapping[str, str]) -> Series:
    return catalogue.get(f"{store}_state_store.{outcome}").prometheus_name(), frozenset(labels.items())


def wait_for_delta(
    prom: Prometheus, before: Mapping[Series, float], wanted: Mapping[Series, float], marker: Series
) -> None:
    """Wait until Prometheus holds ``wanted``'s calls more than ``before`` and one ``marker`` call; then
    what it gained, the marker aside, must be exactly ``wanted``.

    The marker is a raw client's last request: on the same connection (so the same API server worker),
    as the same task instance (so counted after its other requests, even those waiting for its
    metadata query), on a series of its own. A worker's counters are scraped whole: once a scrape
    holds the marker, it holds every count that worker made before it, anything counted twice too.
    """

    def delta() -> dict[Series, float]:
        now = held(prom)
        return {k: v - before.get(k, 0.0) for k, v in now.items() if v != before.get(k, 0.0)}

    def arrived() -> bool:
        got = delta()
        return got.get(marker) == 1 and sum(got.values()) - 1 >= sum(wanted.values())

    e2e.wait_for(arrived, 60, "the calls, up to the marker, in Prometheus")
    got = delta()
    del got[marker]
    assert got == wanted


def test_a_raw_http_client_with_a_task_token_is_counted_as_that_task(scraped: Scraped) -> None:
    airflow, prom = scraped.airflow, scraped.prom
    rows = airflow.home.query(
        "select id, task_id from task_instance where dag_id = 'state_store_metrics_01' and state = 'success'"
    )
    assert rows, "no task instance of state_store_metrics_01"
    ti_id = str(uuid_of(rows[0][0]))
    other = airflow.home.query("select id from task_instance where dag_id = 'state_store_metrics_03'")[0][0]
    token = mint_token(airflow, ti_id)
    before = held(prom)
    asset = {"name": "state_store_metrics/asset"}
    with execution_client(airflow, token) as client:
        answers = [
            client.put(f"store/ti/{ti_id}/raw", json={"value": {"n": 1}}).status_code,
            client.get(f"store/ti/{ti_id}/raw").status_code,
            client.get(f"store/ti/{ti_id}/raw-missing").status_code,
            client.delete(f"store/ti/{ti_id}/raw").status_code,
            client.delete(f"store/ti/{ti_id}").status_code,
            client.put(
                "store/asset/by-name/value", params={**asset, "key": "raw"}, json={"value": 1}
            ).status_code,
            client.get("store/asset/by-name/value", params={**asset, "key": "raw"}).status_code,
            client.delete("store/asset/by-name/value", params={**asset, "key": "raw"}).status_code,
            client.get("store/asset/by-name/value", params={"name": "no/such/asset", "key": "k"}).status_code,
            client.put(f"store/ti/{ti_id}/bad", json={"not_value": 1}).status_code,  # 422
            client.get(f"store/ti/{uuid_of(other)}/k").status_code,  # another task's path: 403
            client.get(f"store/ti/{ti_id}/k", headers={"Authorization": "Bearer nonsense"}).status_code,
        ]
        # A last request on the same connection (so the same API server worker), as the same task
        # instance (so counted after the others, even those waiting for its metadata query), on a
        # series of its own: clearing another task's store (403, an error of operation clear).
        marker = client.delete(f"store/ti/{uuid_of(other)}").status_code
    assert answers == [204, 200, 404, 204, 204, 204, 200, 204, 404, 422, 403, 403]
    assert marker == 403
    tags = dict(_series("state_store_metrics_01", "touch_store", PYOP))
    unknown = {"dag_id": "unknown", "task_id": "unknown", "run_type": "unknown", "operator": "unknown"}
    key = series_of
    wanted = {
        key("task", "write", tags): 1,
        key("task", "read_found", tags): 1,
        key("task", "read_absent", tags): 1,
        key("task", "delete", tags): 1,
        key("task", "clear", tags): 1,
        key("asset", "write", tags): 1,
        key("asset", "read_found", tags): 1,
        key("asset", "delete", tags): 1,
        key("asset", "read_absent", tags): 1,
        key("task", "error", {**tags, "operation": "set"}): 1,
        # The token is valid but names another task instance than the path: its own task's error.
        key("task", "error", {**tags, "operation": "get"}): 1,
        # No valid token: no task instance to name.
        key("task", "error", {**unknown, "operation": "get"}): 1,
    }
    wait_for_delta(prom, before, wanted, marker=key("task", "error", {**tags, "operation": "clear"}))


# -- a cleared task: its new attempt, and calls still made as the archived one ---------------------------


def test_a_cleared_task_reruns_as_itself_and_its_archived_attempt_counts_as_it(
    scraped: Scraped,
) -> None:
    """Clearing a finished task makes a new attempt with a new task instance id and archives the old
    one: Airflow 3.4 keeps it in ``task_instance`` outside the working set (hidden from ORM queries
    without ``include_all_attempts``), 3.3 moves it to ``task_instance_history``. The re-run counts as
    the task, and so do calls made with the old attempt's token: the write Airflow refuses (410 Gone
    on 3.4, 404 on 3.3) as ``error{operation=set}``, the read it answers 404 as ``read_absent``."""
    airflow, prom = scraped.airflow, scraped.prom
    dag_id, (task_id, operator) = "state_store_metrics_03", TASKS["state_store_metrics_03"]
    ((old, run_id),) = airflow.home.query(
        "select id, run_id from task_instance where dag_id = ? and task_id = ?", dag_id, task_id
    )
    before = held(prom)
    api(
        airflow,
        "POST",
        f"/api/v2/dags/{dag_id}/clearTaskInstances",
        {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False},
    )

    def rerun() -> bool:
        attempts = airflow.home.query(
            "select count(*) from task_instance where dag_id = ? and task_id = ? and id != ? and state = ?",
            dag_id, task_id, old, "success",
        )  # fmt: skip
        runs = airflow.home.query("select state from dag_run where run_id = ?", run_id)
        return attempts == [(1,)] and runs == [("success",)]

    wait_until(lambda: rerun() or airflow._died(), 120, interval=0.5)
    assert rerun(), airflow.log_tail()

    archived = str(uuid_of(old))
    token = mint_token(airflow, archived)
    other = airflow.home.query("select id from task_instance where dag_id = 'state_store_metrics_01'")[0][0]
    with execution_client(airflow, token) as client:
        answers = [
            client.put(f"store/ti/{archived}/late", json={"value": 1}).status_code,
            client.get(f"store/ti/{archived}/late").status_code,
        ]
        # The marker (wait_for_delta): clearing another task's store, refused (403, or 410 from 3.4's
        # live-attempt check), an error of operation clear under the archived attempt's own tags.
        assert client.delete(f"store/ti/{uuid_of(other)}").status_code in (403, 410)
    archives_in_place = airflow_version() >= (3, 4)
    assert answers == [410 if archives_in_place else 404, 404]

    tags = dict(_series(dag_id, task_id, operator))
    rerun_calls = Calls()
    rerun_calls.run(dag_id)
    wanted = {
        **as_prometheus(rerun_calls.totals),
        series_of("task", "error", {**tags, "operation": "set"}): 1,
        series_of("task", "read_absent", tags): 1,
    }
    wait_for_delta(prom, before, wanted, marker=series_of("task", "error", {**tags, "operation": "clear"}))

    # The query a cold API server worker makes finds the archived attempt, where a plain ORM query
    # on TaskInstance (working set only on 3.4; the row has moved on 3.3) finds nothing.
    found = json.loads(
        in_deployment(
            airflow,
            "import json, uuid\n"
            "from sqlalchemy import select\n"
            "from airflow.models.taskinstance import TaskInstance\n"
            "from airflow.utils.session import create_session\n"
            "from store_metrics.server.attribution import lookup_task_instance\n"
            f"ti = uuid.UUID({archived!r})\n"
            "with create_session() as session:\n"
            "    plain = session.scalar(select(TaskInstance.task_id).where(TaskInstance.id == ti))\n"
            "print(json.dumps({'plain': plain, 'tags': lookup_task_instance(ti)}))\n",
        )
    )
    assert found == {"plain": None, "tags": tags}


def airflow_version() -> tuple[int, int]:
    from importlib.metadata import version

    major, minor = version("apache-airflow-core").split(".")[:2]
    return int(major), int(minor)


def uuid_of(value: Any) -> Any:
    import uuid

    return uuid.UUID(str(value))


# -- under dag.test() there is no API server -------------------------------------------------------


def test_under_dag_test_count_at_api_server_counts_nothing(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    receiver = UdpReceiver()
    try:
        env = home.env(
            AIRFLOW__STORE_METRICS__COUNT_AT="api_server",
            AIRFLOW__STORE_METRICS__BACKEND="dogstatsd",
            AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
            AIRFLOW__STORE_METRICS__PORT=str(receiver.port),
        )
        result = home.run(tmp_path, ["state_store_metrics_01"], env)
        assert result["runs"] == [["state_store_metrics_01", "success"]]
        assert result["configured"] is False
        assert "the task process counts nothing" in result["log"]
        assert receiver.lines_before_marker() == []
    finally:
        receiver.close()
