"""A metric added to the catalogue, and nothing else: every shipped file follows.

The recipe of docs/contributing.md ("Adding a counter"), done to a copy of ``src/``: three metrics
are added to the copy's ``catalogue.py`` and to no other file -- a task-side counter recorded
with the calls (``task_state_store.read_stale``), an API server counter
(``api_server.state_store.retries``) and an inventory gauge
(``asset_state_store.footprint.largest_value``). ``store-metrics export`` and the docs' table
generator then run from the copy, in fresh processes, beside the same from the unchanged tree.
Each shipped file must hold the new metrics exactly where the catalogue says, and otherwise be
unchanged:

* the three statsd_exporter mappings: one more entry each, with the catalogue's name, series and
  help text, and the Helm values' ``statsd.extraMappings`` with them; the chart's pinned
  statsd_exporter, given them, serves the lines the StatsD backend sends for the new metrics under
  their catalogue series and help;
* rules.yml: the new counter's recording rule (recorded with the calls, its ``store`` and
  ``outcome``) and its place in the series count of the "counts stopped arriving" alert; its
  promtool tests (rules.test.yml) count its calls exactly, run by promtool; the PrometheusRule of
  ``kubernetes/`` holds the same rules;
* the Collector's filter (the single and the scaled-out tier) keeps all three under any prefix;
* another prefix and the VictoriaMetrics target map and record the new counter under their names;
* the docs' metric tables list them;
* the Grafana and Datadog dashboards count the new call counter wherever they name every call
  counter: their "every call" selections name the catalogue's counters recorded with the calls.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics.backends import statsd_lines
from support.peer_servers import StatsdExporter, scrape, send_lines
from support.promtool import promtool
from testbed.repository import ROOT
from testbed.waiting import poll

pytestmark = pytest.mark.slow

PREFIX = "airflow"
#: The new metrics, as catalogue.py's text gets them: (anchor in catalogue.py, text put before it).
_TASK = """
READ_STALE = Metric(
    name="task_state_store.read_stale",
    kind=Kind.COUNTER,
    description="Task state store get/aget calls that found a value past its expires_at.",
    tags=BASE_TAGS,
    recording=Recording(CALLS_RECORDING, ((STORE, Store.TASK.tag), (OUTCOME, "read_stale"))),
)
"""
_SERVER = """
SERVER_RETRIES = Metric(
    name="api_server.state_store.retries",
    kind=Kind.COUNTER,
    description="State store requests a task sent again: the same call, retried by the client.",
    tags=(STORE, OPERATION, WORKER),
    optional_tags=(),
    unit="{request}",
)
"""
_GAUGE = """
LARGEST_VALUE = Metric(
    name="asset_state_store.footprint.largest_value",
    kind=Kind.GAUGE,
    description="Bytes of the largest value the asset state store holds, per asset name.",
    tags=(ASSET,),
    optional_tags=(),
    unit="By",
)
"""
#: The hand edits, as (old text, new text) of catalogue.py: each old text occurs exactly once.
EDITS: tuple[tuple[str, str], ...] = (
    (
        "#: Every metric a task process (or ``store-metrics check``) emits.\n"
        "METRICS: tuple[Metric, ...] = (*STATE_STORE_METRICS, *RETRY_METRICS, CHECK)",
        _TASK + "\nMETRICS: tuple[Metric, ...] = (*STATE_STORE_METRICS, *RETRY_METRICS, READ_STALE, CHECK)",
    ),
    ("    LONG_STALLS,\n)\n", "    LONG_STALLS,\n    SERVER_RETRIES,\n)\n"),
    ("INVENTORY_UP = Metric(", _GAUGE + "\nINVENTORY_UP = Metric("),
    ("    INVENTORY_FOOTPRINT_AGE,\n)\n", "    INVENTORY_FOOTPRINT_AGE,\n    LARGEST_VALUE,\n)\n"),
    (
        "\n#: Every metric an API server worker emits.",
        _SERVER + "\n#: Every metric an API server worker emits.",
    ),
)

TASK_COUNTER = {
    "match": "airflow.task_state_store.read_stale",
    "match_metric_type": "counter",
    "name": "airflow_task_state_store_read_stale_total",
    "help": "Task state store get/aget calls that found a value past its expires_at.",
    "ttl": "25h",
}
SERVER_COUNTER = {
    "match": "airflow.api_server.state_store.retries",
    "match_metric_type": "counter",
    "name": "airflow_api_server_state_store_retries_total",
    "help": "State store requests a task sent again: the same call, retried by the client.",
    "ttl": "25h",
}
GAUGE = {
    "match": "airflow.asset_state_store.footprint.largest_value",
    "match_metric_type": "gauge",
    "name": "airflow_asset_state_store_footprint_largest_value_bytes",
    "help": "Bytes of the largest value the asset state store holds, per asset name.",
    "ttl": "10m",
}
#: Each statsd_exporter mapping file and the one entry the new catalogue adds to it (at its place
#: in the catalogue's order).
MAPPINGS = {
    "statsd-mapping.yml": TASK_COUNTER,
    "statsd-mapping-server.yml": SERVER_COUNTER,
    "statsd-mapping-inventory.yml": GAUGE,
}
CALLS_RECORD = "task:airflow_store_metrics_calls:increase"
SERIES_COUNT_RECORD = "instance:airflow_store_metrics_series:count"
#: Every call counter's series before the new one (the dashboards' "every call" selections).
CALL_COUNTERS = [
    f"{store}_state_store.{outcome}"
    for store in ("task", "asset")
    for outcome in ("read_found", "read_absent", "write", "delete", "clear", "error")
]


def grow_catalogue(text: str, edits: tuple[tuple[str, str], ...] = EDITS) -> str:
    """catalogue.py's ``text`` with the new metrics: each edit's old text must occur once."""
    for old, new in edits:
        assert text.count(old) == 1, f"catalogue.py changed shape: the recipe's anchor {old!r}"
        text = text.replace(old, new)
    return text


def _copy_src(to: Path) -> Path:
    shutil.copytree(ROOT / "src", to, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return to


def _environment(src: Path) -> dict[str, str]:
    """This process's environment, the package imported from ``src`` (the generators from the clone)."""
    return {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}


def _export(src: Path, out: Path, *args: str) -> Path:
    """``store-metrics export --out OUT ARGS`` run from ``src``, in a fresh interpreter."""
    out.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "store_metrics.commands.cli", "export", "--out", str(out), *args],
        cwd=out.parent,
        env=_environment(src),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def _docs_tables(src: Path) -> dict[str, str]:
    """The docs' metric tables (the ``catalogue`` and ``server-metrics`` blocks) as the generator
    writes them from ``src``."""
    probe = (
        "import json\n"
        "import store_metrics\n"
        "from generators.docs import BLOCKS\n"
        "print(json.dumps({'file': store_metrics.__file__, "
        "**{name: BLOCKS[name]() for name in ('catalogue', 'server-metrics')}}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=_environment(src),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    tables: dict[str, str] = json.loads(done.stdout)
    assert Path(tables.pop("file")).is_relative_to(src)
    return tables


class Tree:
    """What a source tree exports and what the docs' generator writes from it."""

    def __init__(self, src: Path, out: Path) -> None:
        self.src = src
        self.out = _export(src, out)
        self.docs = _docs_tables(src)

    def text(self, relative: str) -> str:
        return (self.out / relative).read_text(encoding="utf-8")

    def yaml(self, relative: str) -> Any:
        return yaml.safe_load(self.text(relative))


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tree, Tree]:
    """(the unchanged tree, the tree whose catalogue gained the three metrics), each exported."""
    base = tmp_path_factory.mktemp("catalogue")
    plain = _copy_src(base / "plain" / "src")
    grown = _copy_src(base / "grown" / "src")
    catalogue_py = grown / "store_metrics" / "catalogue.py"
    catalogue_py.write_text(grow_catalogue(catalogue_py.read_text(encoding="utf-8")), encoding="utf-8")
    return Tree(plain, base / "plain" / "out"), Tree(grown, base / "grown" / "out")


@pytest.fixture(scope="module")
def plain(trees: tuple[Tree, Tree]) -> Tree:
    return trees[0]


@pytest.fixture(scope="module")
def grown(trees: tuple[Tree, Tree]) -> Tree:
    return trees[1]


def test_the_recipe_edits_only_the_catalogue(plain: Tree, grown: Tree) -> None:
    changed = sorted(
        p.relative_to(grown.src).as_posix()
        for p in grown.src.rglob("*")
        if p.is_file() and (plain.src / p.relative_to(grown.src)).read_bytes() != p.read_bytes()
    )
    assert changed == ["store_metrics/catalogue.py"]


@pytest.mark.parametrize("name", MAPPINGS)
def test_each_statsd_mapping_gains_the_new_metric_and_nothing_else(
    plain: Tree, grown: Tree, name: str
) -> None:
    before = plain.yaml(f"collector/{name}")["mappings"]
    after = grown.yaml(f"collector/{name}")["mappings"]
    assert MAPPINGS[name] in after and [entry for entry in after if entry != MAPPINGS[name]] == before
    # Only the list changed: the file's prose is the template's.
    new_entry = "\n".join(
        line
        for line in grown.text(f"collector/{name}").splitlines()
        if line not in {*plain.text(f"collector/{name}").splitlines()}
    )
    assert MAPPINGS[name]["match"] in new_entry and "#" not in new_entry


def test_the_helm_values_map_the_new_counters_as_the_chart_loads_them(plain: Tree, grown: Tree) -> None:
    before = plain.yaml("helm/values-store-metrics.yaml")["statsd"]["extraMappings"]
    after = grown.yaml("helm/values-store-metrics.yaml")["statsd"]["extraMappings"]
    assert TASK_COUNTER in after and SERVER_COUNTER in after
    assert [entry for entry in after if entry not in (TASK_COUNTER, SERVER_COUNTER)] == before
    task_side, server_side = (grown.yaml(f"collector/{name}")["mappings"] for name in list(MAPPINGS)[:2])
    assert after == [*task_side, *server_side]


@pytest.mark.peers
def test_statsd_exporter_serves_the_new_metrics_from_the_exported_mappings(
    grown: Tree, tmp_path: Path
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    mappings = [entry for name in MAPPINGS for entry in grown.yaml(f"collector/{name}")["mappings"]]
    exporter = StatsdExporter(tmp_path, "chart", mappings)
    try:
        task = [
            ("dag_id", "etl"),
            ("task_id", "load"),
            ("run_type", "manual"),
            ("operator", "PythonOperator"),
        ]
        send_lines(
            exporter.udp_port,
            [
                statsd_lines.influx_counter_line(PREFIX, "task_state_store.read_stale", task, 2),
                statsd_lines.influx_counter_line(
                    PREFIX,
                    "api_server.state_store.retries",
                    [("store", "task"), ("operation", "get"), ("worker", "host-1")],
                    1,
                ),
                statsd_lines.influx_gauge_line(
                    PREFIX, "asset_state_store.footprint.largest_value", [("asset", "orders")], 4096.0
                ),
            ],
        )
        wanted = {str(m["name"]).removesuffix("_total"): m for m in (TASK_COUNTER, SERVER_COUNTER, GAUGE)}

        def families() -> dict[str, Any] | None:
            found = {
                f.name: f for f in text_string_to_metric_families(scrape(exporter.url)) if f.name in wanted
            }
            return found if len(found) == len(wanted) else None

        served = poll(families, 10, 0.1)
        assert served, scrape(exporter.url)
        for name, mapping in wanted.items():
            assert served[name].documentation == mapping["help"]
            assert served[name].type == mapping["match_metric_type"]
        values = {s.name: (s.labels, s.value) for f in served.values() for s in f.samples}
        assert values[str(TASK_COUNTER["name"])] == (dict(task), 2.0)
        assert values[str(GAUGE["name"])] == ({"asset": "orders"}, 4096.0)
    finally:
        exporter.stop()


def _rules(tree: Tree) -> list[dict[str, Any]]:
    return [rule for group in tree.yaml("collector/rules.yml")["groups"] for rule in group["rules"]]


def test_the_rules_record_the_new_counter_with_the_calls(plain: Tree, grown: Tree) -> None:
    before, after = _rules(plain), _rules(grown)
    added = [rule for rule in after if rule not in before]
    assert [rule.get("record") for rule in added] == [CALLS_RECORD, SERIES_COUNT_RECORD]
    record, count = added
    assert record["labels"] == {"store": "task", "outcome": "read_stale"}
    assert set(re.findall(r"airflow_\w+_total", record["expr"])) == {TASK_COUNTER["name"]}
    assert re.search(
        r"sum by \(cluster, job, dag_id, task_id, run_type, operator, team_name\)", record["expr"]
    )
    # The series count of StateStoreMetricsMissing: the old one's counters and the new counter.
    old_count = next(rule for rule in before if rule.get("record") == SERIES_COUNT_RECORD)
    assert [rule for rule in after if rule not in added] == [r for r in before if r is not old_count]
    assert set(re.findall(r"airflow_\w+_total", count["expr"])) == {
        *re.findall(r"airflow_\w+_total", old_count["expr"]),
        TASK_COUNTER["name"],
    }


def test_the_promtool_tests_count_the_new_counters_calls_exactly(grown: Tree) -> None:
    tests = grown.yaml("collector/rules.test.yml")
    inputs = [series["series"] for group in tests["tests"] for series in group["input_series"]]
    assert any(series.startswith(TASK_COUNTER["name"] + "{") for series in inputs)
    result = promtool("test", "rules", "rules.test.yml", cwd=grown.out / "collector", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_prometheus_rule_object_holds_the_new_rules(grown: Tree) -> None:
    wrapped = grown.yaml("kubernetes/base/prometheusrule-rules.yaml")
    assert wrapped["spec"] == grown.yaml("collector/rules.yml")


@pytest.mark.parametrize("name", ["otel-collector.yaml", "otel-collector-front.yaml"])
@pytest.mark.parametrize("prefix", ["airflow", "my.corp", ""])
def test_the_collector_keeps_the_new_metrics_under_any_prefix(
    grown: Tree, plain: Tree, name: str, prefix: str
) -> None:
    def keeps(tree: Tree, metric: str) -> bool:
        conditions = tree.yaml(f"collector/{name}")["processors"]["filter/store_metrics"]["metrics"]["metric"]
        (condition,) = conditions
        ottl = re.fullmatch(r'not IsMatch\(name, "(.*)"\)', condition)
        assert ottl, condition
        # The OTTL string's escapes undone: the RE2 expression the Collector matches names with.
        pattern = ottl[1].replace("\\\\", "\\")
        return re.match(pattern, f"{prefix}.{metric}" if prefix else metric) is not None

    for metric in (TASK_COUNTER, SERVER_COUNTER, GAUGE):
        unprefixed = str(metric["match"]).removeprefix("airflow.")
        assert keeps(grown, unprefixed) and not keeps(plain, unprefixed)
    assert keeps(grown, "task_state_store.write") and not keeps(grown, "task_state_store.writes")


@pytest.mark.parametrize(
    ("args", "series"),
    [
        (("--prefix", "my.corp"), "task:my_corp_store_metrics_calls:increase"),
        (("--target", "victoriametrics"), CALLS_RECORD),
    ],
    ids=["prefix", "victoriametrics"],
)
def test_another_prefix_or_rule_engine_follows_too(grown: Tree, args: tuple[str, ...], series: str) -> None:
    out = _export(grown.src, grown.out.parent / "-".join(args).strip("-"), *args)
    prefix = args[1] if args[0] == "--prefix" else PREFIX
    spelled = prefix.replace(".", "_")
    mapped = yaml.safe_load((out / "collector/statsd-mapping.yml").read_text())["mappings"]
    assert {
        **TASK_COUNTER,
        "match": f"{prefix}.task_state_store.read_stale",
        "name": f"{spelled}_task_state_store_read_stale_total",
    } in mapped
    rules = [
        r for g in yaml.safe_load((out / "collector/rules.yml").read_text())["groups"] for r in g["rules"]
    ]
    recorded = [
        r for r in rules if r.get("record") == series and r.get("labels", {}).get("outcome") == "read_stale"
    ]
    assert len(recorded) == 1 and f"{spelled}_task_state_store_read_stale_total" in recorded[0]["expr"]


def test_the_docs_metric_tables_list_the_new_metrics(plain: Tree, grown: Tree) -> None:
    def added(block: str) -> list[str]:
        return [line for line in grown.docs[block].splitlines() if line not in plain.docs[block].splitlines()]

    (task, gauge) = added("catalogue")
    assert (
        task.startswith(f"| `{TASK_COUNTER['match']}` | `{TASK_COUNTER['name']}` | ")
        and str(TASK_COUNTER["help"]) in task
    )
    assert gauge.startswith(f"| `{GAUGE['match']}` | `{GAUGE['name']}` | ") and str(GAUGE["help"]) in gauge
    (server,) = added("server-metrics")
    assert f"`{SERVER_COUNTER['match']}`" in server and str(SERVER_COUNTER["help"]) in server


# -- the dashboards: rendered at export time, the call counters named by Outcome ---------------------


def _alternations(text: str) -> list[set[str]]:
    return [set(found.split("|")) for found in re.findall(r'__name__=~\\"([^\\"]*)\\"', text)]


def test_the_grafana_dashboard_counts_the_new_counter_with_every_call(grown: Tree) -> None:
    every_call = {f"airflow_{name.replace('.', '_')}_total" for name in CALL_COUNTERS}
    selections = [
        names for names in _alternations(grown.text("dashboards/store-metrics.json")) if every_call <= names
    ]
    assert selections, "no panel selects every call counter by name"
    assert all(TASK_COUNTER["name"] in names for names in selections)


def test_the_datadog_dashboard_counts_the_new_counter_with_every_call(grown: Tree) -> None:
    every_call = {f"airflow.{name}" for name in CALL_COUNTERS}
    requests: list[set[str]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("queries"), list):
                requests.append(
                    {re.sub(r"^\w+:([\w.]+)\{.*", r"\1", q.get("query", "")) for q in node["queries"]}
                )
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(grown.text("datadog/dashboard.json")))
    every = [names for names in requests if every_call <= names]
    assert every, "no widget queries every call counter"
    assert all(TASK_COUNTER["match"] in names for names in every)
