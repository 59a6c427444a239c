"""The pinned peers (testbed/peers.py), each at its pinned version, read the files store-metrics ships.

Every binary is the one ``scripts/setup dev`` built from its Go module; a pin that is not built makes
its tests fail (``PeerMissing`` says how to build it), never skip. Checked here:

* each program reports exactly its pinned version (``--version``; Prometheus also through
  ``/api/v1/status/buildinfo``);
* statsd_exporter, at the chart's version and at the minimum, starts with each exported mapping
  file, answers ``/metrics``, and turns a line for the file's first counter and first histogram
  into the mapped name, HELP and buckets;
* the OpenTelemetry Collector at both releases validates collector/otel-collector.yaml and the
  scaled-out tier's two files (otel-collector-front.yaml with each loadbalancing resolver, and
  otel-collector-backend.yaml), holds exactly the component types the files name, and refuses an
  unknown key (so a pass means every key, ``ignore_host`` among them, is known);
* promtool of each Prometheus pin (3.x newest and LTS built from their modules, the 2.42 minimum
  from Debian's package) checks collector/prometheus.yml and every rule file, and each Prometheus
  server loads every rule group;
* amtool checks collector/alertmanager-inhibit.yml merged into a minimal config (the file is a
  snippet of ``inhibit_rules``), and Alertmanager serves it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import subprocess
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed import peers
from testbed.ports import free_port
from testbed.repository import ROOT
from testbed.waiting import poll, wait_until

pytestmark = pytest.mark.peers

COLLECTOR = ROOT / "collector"
MAPPINGS = sorted(COLLECTOR.glob("statsd-mapping*.yml"))
RULE_FILES = sorted(COLLECTOR.glob("*rules.yml"))
OTEL_CONFIG = COLLECTOR / "otel-collector.yaml"
#: Every Collector config shipped: the single Collector's and the scaled-out tier's.
OTEL_CONFIGS = [
    OTEL_CONFIG,
    COLLECTOR / "otel-collector-front.yaml",
    COLLECTOR / "otel-collector-backend.yaml",
]

VERSIONED = [
    pytest.param(pin, program, id=f"{program}-{pin.version}")
    for pin in peers.PINS
    for program in pin.program_names
]
STATSD_PINS = [pytest.param(pin, id=pin.version) for pin in peers.pins_for("statsd_exporter")]
OTELCOL_PINS = [pytest.param(pin, id=pin.version) for pin in peers.pins_for("otelcol")]
#: The Collector pins built with the scaled-out tier's loadbalancing exporter (testbed/peers.py says
#: why a pin is built without it).
TIER_PINS = [
    pytest.param(pin, id=pin.version)
    for pin in peers.pins_for("otelcol")
    if peers.LOADBALANCING not in peers.omitted(pin)
]
PROMETHEUS_PINS = [pytest.param(pin, id=pin.version) for pin in peers.pins_for("prometheus")]


def program(pin: peers.Pin, name: str) -> Path:
    """The built ``name`` of ``pin`` (through the locator, by the pin's first role)."""
    return peers.binary(name, pin.roles[0])


def run(*cmd: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, check=False)


def get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            body: bytes = response.read()
            return body if response.status == 200 else None
    except OSError:
        return None


@contextlib.contextmanager
def serving(command: Sequence[str | Path], log: Path, ready_url: str, timeout: float = 60) -> Iterator[None]:
    """``command`` running until the block ends; waits (bounded) until ``ready_url`` answers 200."""
    with log.open("w") as out:
        proc = subprocess.Popen([str(c) for c in command], stdout=out, stderr=subprocess.STDOUT)
        try:

            def ready() -> bool:
                if proc.poll() is not None:
                    raise AssertionError(
                        f"{command[0]} exited with {proc.returncode}: {log.read_text()[-2000:]}"
                    )
                return get(ready_url) is not None

            wait_until(ready, timeout=timeout, interval=0.1)
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


# --- versions -------------------------------------------------------------------------------


@pytest.mark.parametrize(("pin", "name"), VERSIONED)
def test_every_pinned_binary_reports_exactly_its_version(pin: peers.Pin, name: str) -> None:
    text = peers.reported_version(program(pin, name), pin.version_args)
    assert peers.reports_version(text, pin.version, pin.version_prefix), text


def test_a_missing_pin_fails_naming_the_setup_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(peers.ENV_CACHE, str(tmp_path))
    with pytest.raises(peers.PeerMissing, match=r"scripts/setup dev.*build prometheus:lts"):
        peers.binary("promtool", "lts")


def test_building_without_go_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setattr(peers, "GO_INSTALL", "/nonexistent/go")
    with pytest.raises(peers.PeerBuildError, match=r"install Go 1\.26"):
        peers.find_go()


def test_a_failed_build_names_its_command_and_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(peers.ENV_CACHE, str(tmp_path))
    pin = peers.pin_for("statsd_exporter", "chart")
    unknown = dataclasses.replace(pin, version="0.0.1", module_version="v0.0.1")
    with pytest.raises(
        peers.PeerBuildError, match=r"go mod download -json .*statsd_exporter@v0\.0\.1.*log: "
    ):
        peers.ensure(unknown)
    assert not peers.cached(unknown)
    assert not list(tmp_path.glob(".staging-*"))


def test_the_version_check_is_exact() -> None:
    assert peers.reports_version("prometheus, version 3.16.0 (branch: module)", "3.16.0")
    assert not peers.reports_version("prometheus, version 3.16.0-rc.1 (branch: module)", "3.16.0")
    assert not peers.reports_version("prometheus, version 3.16.0.1 (branch: module)", "3.16.0")
    assert not peers.reports_version("otelcol-store-metrics version 0.161.0", "0.16.0")
    # build metadata is not part of the version: Debian's package of 2.42.0
    assert peers.reports_version("prometheus, version 2.42.0+ds (branch: debian/sid)", "2.42.0")
    # kube-score's way
    assert peers.reports_version("kube-score version: 1.20.0, commit: N/A, built: N/A", "1.20.0")
    assert not peers.reports_version("kube-score version: development, commit: N/A", "1.20.0")
    # Jaeger's: its tags carry the "v"
    assert peers.reports_version("jaeger version v2.12.0", "2.12.0")
    assert not peers.reports_version("jaeger version v2.12.0-rc.1", "2.12.0")
    assert not peers.reports_version("jaeger version v1.75.0", "2.12.0")
    # VictoriaMetrics' lib/buildinfo.Version: <app>-<date>-tags-v<version>-<count>-g<commit>
    vm = peers.pin_for("victoriametrics", "current").version_prefix
    assert peers.reports_version("store-metrics-peers-tags-v1.151.0-0-gmodule", "1.151.0", vm)
    assert not peers.reports_version("victoria-metrics-20260101-tags-v1.151.0-cluster-0-gab", "1.151.0", vm)
    assert not peers.reports_version("victoria-metrics-20260101-tags-v1.151.01-0-gab", "1.151.0", vm)


# --- statsd_exporter ------------------------------------------------------------------------


def _first(mappings: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    """The first mapping of ``kind`` (``counter``, ``gauge``, ``observer``) with a glob-free match."""
    return next((m for m in mappings if m.get("match_metric_type") == kind and "*" not in m["match"]), None)


def _expected_lines(mappings: list[dict[str, Any]]) -> tuple[bytes, list[str]]:
    """The StatsD lines to send for a file's first counter, gauge and histogram, and the lines
    /metrics must then show (HELP, value, every configured bucket)."""
    lines, expected = [], []
    for kind, line in (("counter", "3|c"), ("gauge", "42|g")):
        mapping = _first(mappings, kind)
        if mapping:
            lines.append(f"{mapping['match']}:{line}")
            expected += [
                f"# HELP {mapping['name']} {mapping['help']}",
                f"{mapping['name']} {line.split('|')[0]}",
            ]
    observer = _first(mappings, "observer")
    if observer and observer.get("observer_type") == "histogram":
        # `|h`, as store-metrics sends histograms (statsd_exporter scales only `|ms` timers, to
        # seconds): 7 lands in every bucket from 7 up, unscaled.
        lines.append(f"{observer['match']}:7|h")
        name = observer["name"]
        for bucket in observer["histogram_options"]["buckets"]:
            # le as client_golang prints a float64 (1.0 -> "1", 2.5 -> "2.5")
            expected.append(f'{name}_bucket{{le="{float(bucket):g}"}} {1 if bucket >= 7 else 0}')
        expected += [f"{name}_sum 7", f"{name}_count 1"]
    return "\n".join(lines).encode(), expected


@pytest.mark.parametrize("pin", STATSD_PINS)
@pytest.mark.parametrize("mapping", MAPPINGS, ids=lambda p: p.name)
def test_statsd_exporter_serves_the_exported_mappings(pin: peers.Pin, mapping: Path, tmp_path: Path) -> None:
    mappings = yaml.safe_load(mapping.read_text())["mappings"]
    payload, expected = _expected_lines(mappings)
    assert expected, f"{mapping.name} has no counter, gauge or histogram mapping to check"
    udp, web = free_port(socket.SOCK_DGRAM), free_port()
    command: list[str | Path] = [
        program(pin, "statsd_exporter"),
        f"--statsd.mapping-config={mapping}",
        f"--statsd.listen-udp=127.0.0.1:{udp}",
        "--statsd.listen-tcp=",
        f"--web.listen-address=127.0.0.1:{web}",
    ]
    url = f"http://127.0.0.1:{web}/metrics"
    with serving(command, tmp_path / "statsd_exporter.log", url):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(payload, ("127.0.0.1", udp))

        def shown() -> list[str]:
            text = (get(url) or b"").decode()
            return [line for line in expected if line not in text.splitlines()]

        missing = poll(lambda: not shown(), timeout=10, interval=0.1)
        assert missing, f"{mapping.name} on statsd_exporter {pin.version}: not in /metrics: {shown()}"


# --- OpenTelemetry Collector ----------------------------------------------------------------


def _config_types(pin: peers.Pin) -> dict[str, set[str]]:
    """The component types the shipped Collector configs ``pin`` runs name, by kind (``filter/x`` ->
    ``filter``): all three, or without the front where the pin has no loadbalancing exporter."""
    paths = OTEL_CONFIGS if peers.LOADBALANCING not in peers.omitted(pin) else [OTEL_CONFIG, OTEL_CONFIGS[2]]
    configs = [yaml.safe_load(path.read_text()) for path in paths]
    return {
        kind: {name.split("/")[0] for config in configs for name in config[kind]}
        for kind in ("receivers", "processors", "exporters")
    }


@pytest.mark.parametrize("pin", OTELCOL_PINS)
@pytest.mark.parametrize("config", [OTEL_CONFIG, OTEL_CONFIGS[2]], ids=lambda path: path.stem)
def test_the_collector_validates_the_shipped_config(pin: peers.Pin, config: Path) -> None:
    checked = run(program(pin, "otelcol"), "validate", f"--config={config}")
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("pin", TIER_PINS)
@pytest.mark.parametrize(
    ("resolver", "backends"),
    [
        ("static", "otel-collector-backend-0:4317,otel-collector-backend-1:4317"),
        ("dns", "otel-collector-backend.monitoring.svc.cluster.local"),
        ("k8s", "otel-collector-backend.monitoring:4317"),
    ],
)
def test_the_collector_validates_the_front_with_each_resolver(
    pin: peers.Pin, resolver: str, backends: str, tmp_path: Path
) -> None:
    """The front as shipped (static) and as ``--set collector_resolver`` writes it (dns, k8s). The
    k8s resolver builds its Kubernetes client when the pipeline is built, which validate does: it
    gets a kubeconfig naming a server nobody answers (it is never contacted)."""
    from store_metrics.shipped import export

    changes = {"collector_resolver": resolver, "collector_backends": backends}
    config = tmp_path / "otel-collector-front.yaml"
    config.write_text(export.render_all(changes=changes, tests=False)[export.COLLECTOR / config.name])
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:1"}}],
                "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
                "current-context": "none",
                "users": [{"name": "none", "user": {}}],
            }
        )
    )
    checked = subprocess.run(
        [str(program(pin, "otelcol")), "validate", f"--config={config}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig)},
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("pin", TIER_PINS)
def test_the_collector_refuses_an_unknown_resolver_key(pin: peers.Pin, tmp_path: Path) -> None:
    config = tmp_path / "otel-collector-front.yaml"
    config.write_text((COLLECTOR / config.name).read_text().replace("hostnames:", "hostname_list:"))
    checked = run(program(pin, "otelcol"), "validate", f"--config={config}")
    assert checked.returncode != 0
    assert "hostname_list" in checked.stdout + checked.stderr


@pytest.mark.parametrize("pin", OTELCOL_PINS)
def test_the_collector_holds_exactly_the_components_of_the_config(pin: peers.Pin) -> None:
    listed = run(program(pin, "otelcol"), "components")
    assert listed.returncode == 0, listed.stderr
    components = yaml.safe_load(listed.stdout)
    assert components["buildinfo"]["version"] == pin.version
    # Types may have been renamed with the old name kept as an alias (deltatocumulative became
    # delta_to_cumulative in 0.16x): validate proves each type resolves, counts prove nothing extra.
    for kind, types in _config_types(pin).items():
        assert len(components[kind]) == len(types), (kind, components[kind], types)
    assert not components.get("extensions") and not components.get("connectors")


@pytest.mark.parametrize("pin", OTELCOL_PINS)
def test_the_collector_refuses_an_unknown_statsd_key(pin: peers.Pin, tmp_path: Path) -> None:
    config = tmp_path / "otel-collector.yaml"
    config.write_text(OTEL_CONFIG.read_text().replace("ignore_host: true", "ignore_host_typo: true"))
    checked = run(program(pin, "otelcol"), "validate", f"--config={config}")
    assert checked.returncode != 0
    assert "ignore_host_typo" in checked.stdout + checked.stderr


# --- Prometheus -----------------------------------------------------------------------------


@pytest.mark.parametrize("pin", PROMETHEUS_PINS)
def test_promtool_checks_the_config_and_every_rule_file(pin: peers.Pin) -> None:
    promtool = program(pin, "promtool")
    checked = run(promtool, "check", "config", COLLECTOR / "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    checked = run(promtool, "check", "rules", *RULE_FILES)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.prometheus
@pytest.mark.parametrize("pin", PROMETHEUS_PINS)
def test_prometheus_reports_its_build_and_loads_every_rule_group(pin: peers.Pin, tmp_path: Path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"rule_files": [str(path) for path in RULE_FILES]}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command: list[str | Path] = [
        program(pin, "prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with serving(command, tmp_path / "prometheus.log", f"{url}/-/ready"):
        build = json.loads(get(f"{url}/api/v1/status/buildinfo") or b"{}")
        # exactly the pinned release (Debian's build metadata, 2.42.0+ds, aside)
        assert peers.reports_version(f"version {build['data']['version']}", pin.version), build
        groups = json.loads(get(f"{url}/api/v1/rules") or b"{}")["data"]["groups"]
    shipped = [g["name"] for path in RULE_FILES for g in yaml.safe_load(path.read_text())["groups"]]
    assert sorted(g["name"] for g in groups) == sorted(shipped)
    assert all(rule["health"] != "err" for g in groups for rule in g["rules"])


# --- Alertmanager ---------------------------------------------------------------------------


INHIBIT = yaml.safe_load((COLLECTOR / "alertmanager-inhibit.yml").read_text())


def _alertmanager_config(tmp_path: Path) -> Path:
    """collector/alertmanager-inhibit.yml (only ``inhibit_rules``) merged into a minimal config."""
    document = {"route": {"receiver": "nowhere"}, "receivers": [{"name": "nowhere"}], **INHIBIT}
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.prometheus
def test_alertmanager_serves_the_inhibit_rules(tmp_path: Path) -> None:
    config = _alertmanager_config(tmp_path)
    pin = peers.pin_for("alertmanager", "current")
    checked = run(program(pin, "amtool"), "check-config", config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f" - {len(INHIBIT['inhibit_rules'])} inhibit rules" in checked.stdout, checked.stdout
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/v2/status"
    command: list[str | Path] = [
        program(pin, "alertmanager"),
        f"--config.file={config}",
        f"--storage.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    with serving(command, tmp_path / "alertmanager.log", url):
        status = json.loads(get(url) or b"{}")
    assert status["versionInfo"]["version"] == pin.version
    assert yaml.safe_load(status["config"]["original"])["inhibit_rules"] == INHIBIT["inhibit_rules"]
