"""The `store-metrics` command as a user runs it: check, catalogue, demo arguments."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import store_metrics
from store_metrics import catalogue
from support.cli import run_cli
from testbed.ports import free_port
from testbed.repository import ROOT
from testbed.udp import UdpReceiver


def test_check_sends_one_increment_to_statsd(udp_receiver: UdpReceiver) -> None:
    proc = run_cli(
        "check",
        AIRFLOW__STORE_METRICS__BACKEND="statsd",
        AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
        AIRFLOW__STORE_METRICS__PORT=str(udp_receiver.port),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"backend: statsd udp://127.0.0.1:{udp_receiver.port}" in proc.stdout
    # The option column fits the longest option name.
    from store_metrics.config.options import CONFIG_OPTIONS

    width = max(len(option.name) for option in CONFIG_OPTIONS)
    assert f"\n  {'port':<{width}} = " in proc.stdout and "([store_metrics] port)" in proc.stdout
    assert f"\n  {'flush_timeout':<{width}} = 2.0 " in proc.stdout
    assert udp_receiver.wait_for_lines(1) == ["airflow.store_metrics.check:1|c"]


def test_check_sends_one_increment_to_dogstatsd(udp_receiver: UdpReceiver) -> None:
    proc = run_cli(
        "check",
        AIRFLOW__STORE_METRICS__BACKEND="dogstatsd",
        AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
        AIRFLOW__STORE_METRICS__PORT=str(udp_receiver.port),
        AIRFLOW__STORE_METRICS__PREFIX="platform.airflow",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert udp_receiver.wait_for_lines(1) == ["platform.airflow.store_metrics.check:1|c"]


def test_check_reports_bad_configuration_with_the_plugins_message() -> None:
    proc = run_cli("check", AIRFLOW__STORE_METRICS__BACKEND="influx")
    assert proc.returncode == 1
    assert (
        "error: [store_metrics] backend = 'influx' is not valid: accepted values are "
        "auto, airflow, otel, dogstatsd, statsd, none" in proc.stdout
    )


def test_check_reports_an_otlp_endpoint_that_refuses() -> None:
    closed = free_port()  # nothing listens here
    proc = run_cli(
        "check",
        AIRFLOW__STORE_METRICS__BACKEND="otel",
        AIRFLOW__STORE_METRICS__FLUSH_TIMEOUT="15",
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=f"http://127.0.0.1:{closed}/v1/metrics",
        OTEL_EXPORTER_OTLP_METRICS_TIMEOUT="2",
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "error: the backend failed" in proc.stdout


def test_check_reports_a_missing_extra() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None; "
        "from store_metrics.commands.cli import main; sys.exit(main(['check']))"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "AIRFLOW__STORE_METRICS__BACKEND": "otel"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pip install 'airflow-store-metrics[otel]'" in proc.stdout


def test_check_with_enabled_false_sends_nothing(udp_receiver: UdpReceiver) -> None:
    # Enabled, this configuration sends its check increment to the receiver (the test above).
    proc = run_cli(
        "check",
        AIRFLOW__STORE_METRICS__ENABLED="false",
        AIRFLOW__STORE_METRICS__BACKEND="statsd",
        AIRFLOW__STORE_METRICS__HOST="127.0.0.1",
        AIRFLOW__STORE_METRICS__PORT=str(udp_receiver.port),
    )
    assert proc.returncode == 0
    assert "disabled" in proc.stdout
    # The command has exited: anything it sent is ahead of a marker sent now.
    assert udp_receiver.lines_before_marker() == []


def test_catalogue_command_lists_every_metric() -> None:
    proc = run_cli("catalogue")
    assert proc.returncode == 0
    for metric in catalogue.METRICS:
        assert f"| `{metric.full_name()}` | `{metric.prometheus_name()}` |" in proc.stdout


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["demo", "--runs", "0"], "--runs must be at least 1"),
        (["demo", "--serve", "--again", "-1"], "--again must be 0 (never) or more seconds"),
    ],
)
def test_demo_rejects_bad_arguments(args: list[str], error: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert error in proc.stderr


def test_the_docs_catalogue_is_the_catalogue() -> None:

    page = (ROOT / "docs" / "metrics.md").read_text()
    block = page.split("<!-- catalogue:start -->\n", 1)[1].split("<!-- catalogue:end -->", 1)[0]
    assert block == run_cli("catalogue").stdout


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"AIRFLOW__STORE_METRICS__BACKEND": "none"}, "backend: none"),
        (
            {"AIRFLOW__STORE_METRICS__BACKEND": "airflow", "AIRFLOW__METRICS__STATSD_ON": "False"},
            "[metrics] enables no backend",
        ),
    ],
)
def test_check_says_plainly_when_the_counts_go_nowhere(env: dict[str, str], why: str) -> None:
    proc = run_cli("check", **env)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert why in proc.stdout
    assert "warning: this configuration sends the counts nowhere" in proc.stdout
    assert ": ok" not in proc.stdout


def test_version_prints_the_packages_version() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"store-metrics {store_metrics.__version__}"


@pytest.mark.parametrize("command", ["demo", "check", "catalogue", "export", "inventory"])
def test_each_commands_help_has_a_description_its_exit_codes_and_an_example(command: str) -> None:
    proc = run_cli(command, "--help")
    assert proc.returncode == 0
    usage, description, *_ = proc.stdout.split("\n\n")
    assert usage.startswith(f"usage: store-metrics {command}") and len(description.split()) > 8
    codes = proc.stdout.split("exit codes:\n", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^  (\d)  ", codes, re.M)[0] == "0"
    assert "  2  " in codes and "command line could not be parsed" in codes
    assert f"store-metrics {command}" in proc.stdout.split("examples:\n", 1)[1]


def test_check_help_names_every_exit_code_check_returns() -> None:
    from store_metrics.commands import check

    returned = {
        value
        for name, value in vars(check).items()
        if re.fullmatch(r"EXIT_[A-Z_]+", name) and name != "EXIT_CODES"
    }
    assert returned == set(check.EXIT_CODES)
    text = " ".join(run_cli("check", "--help").stdout.split())
    for code, meaning in check.EXIT_CODES.items():
        assert f" {code} {meaning}" in text, code


def test_export_help_lists_every_folder_it_writes() -> None:
    from store_metrics.shipped.export import FOLDERS

    text = " ".join(run_cli("export", "--help").stdout.split())
    for folder in FOLDERS:
        assert f"{folder}/" in text


def test_check_shows_the_options_of_the_process_it_checks(udp_receiver: UdpReceiver) -> None:
    env = {
        "AIRFLOW__STORE_METRICS__BACKEND": "statsd",
        "AIRFLOW__STORE_METRICS__HOST": "127.0.0.1",
        "AIRFLOW__STORE_METRICS__PORT": str(udp_receiver.port),
    }
    task = run_cli("check", **env).stdout
    server = run_cli("check", "--process", "api-server", **env).stdout
    inventory = run_cli("check", "--process", "inventory", **env).stdout
    assert "  backend " in task and "  stall_tick_ms " not in task and "  inventory_top " not in task
    assert "  stall_tick_ms " in server and "  inventory_top " not in server
    assert "  inventory_top " in inventory and "  backend " not in inventory  # inventory_export = prometheus
    for out in (task, server, inventory):
        assert "series cap: 160,000 series per process" in out and "'<overflow>'" in out
        assert "native counting: none in this Airflow" in out
    assert "sent means handed to the kernel as a UDP datagram: not proof that a receiver got it" in task


def test_inventory_help_names_the_exit_codes_inventory_returns() -> None:
    from store_metrics.commands.cli import INVENTORY_EXIT_CODES
    from store_metrics.inventory import command

    assert {
        command.EXIT_OK,
        command.EXIT_CONFIG,
        command.EXIT_MISSING,
        command.EXIT_DATABASE,
        command.EXIT_LISTEN,
    } == set(INVENTORY_EXIT_CODES)
    assert INVENTORY_EXIT_CODES[command.EXIT_DATABASE] == "the database could not be read"
    assert INVENTORY_EXIT_CODES[command.EXIT_MISSING].startswith("Airflow or prometheus_client")


def test_inventory_serve_on_a_port_in_use_exits_4_naming_the_address(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = run_cli(
            "inventory",
            "--serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            AIRFLOW_HOME=str(tmp_path),
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{tmp_path / 'airflow.db'}",
        )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert f"error: cannot serve on 127.0.0.1:{port}" in proc.stderr
