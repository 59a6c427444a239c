"""Airflow knows the package as a provider: `airflow providers list` lists it, and `airflow config`
shows the [store_metrics] section with the option table's defaults, under real Airflow.

Each Airflow command runs in a fresh process with a throwaway AIRFLOW_HOME (no database is
needed: these commands read the configuration and the installed packages only).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from store_metrics import __version__
from store_metrics.config import options
from store_metrics.integration import provider_info
from testbed.airflow import AirflowHome

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def run(home: Path, command: list[str], **settings: str) -> str:
    proc = subprocess.run(
        command,
        env=AirflowHome(home).env(**settings),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def airflow(home: Path, *args: str, **settings: str) -> str:
    return run(home, [sys.executable, "-m", "airflow", *args], **settings)


def python(home: Path, code: str, **settings: str) -> str:
    """The last line ``code`` prints (Airflow may log before it)."""
    return run(home, [sys.executable, "-c", code], **settings).strip().splitlines()[-1]


def test_the_provider_info_passes_airflows_own_schema_and_holds_every_option() -> None:
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = provider_info.get_provider_info()
    jsonschema.validate(info, schema)
    section = info["config"]["store_metrics"]["options"]
    assert list(section) == [o.name for o in options.CONFIG_OPTIONS]
    for option in options.CONFIG_OPTIONS:
        entry = section[option.name]
        assert entry["type"] in ("boolean", "integer", "float", "string"), option.name
        assert entry["example"] and entry["description"].strip(), option.name
        if option.airflow:  # falls back to [metrics]: empty means "not set"
            assert entry["default"] == ""
        else:
            assert option.check(option.name, entry["default"]) == option.default, option.name
        assert "](" not in entry["description"], "Markdown links do not belong in Airflow's text"


def test_airflow_config_get_value_prints_the_option_tables_default(tmp_path: Path) -> None:
    out = airflow(tmp_path, "config", "get-value", "store_metrics", "backend")
    assert out.strip() == options.default("backend")
    out = airflow(tmp_path, "config", "get-value", "store_metrics", "flush_interval")
    assert float(out) == options.default("flush_interval")


def test_a_set_option_wins_over_the_declared_default(tmp_path: Path) -> None:
    out = airflow(
        tmp_path, "config", "get-value", "store_metrics", "backend", AIRFLOW__STORE_METRICS__BACKEND="none"
    )
    assert out.strip() == "none"


def test_airflow_config_list_shows_the_section_with_every_option(tmp_path: Path) -> None:
    out = airflow(tmp_path, "config", "list", "--section", "store_metrics", "--show-values")
    assert "[store_metrics]" in out
    for option in options.CONFIG_OPTIONS:
        assert f"\n{option.name} = " in out, option.name


def test_airflow_providers_list_lists_the_package_and_its_version(tmp_path: Path) -> None:
    rows = json.loads(airflow(tmp_path, "providers", "list", "--output", "json"))
    ours = [row for row in rows if row["package_name"] == provider_info.PACKAGE]
    assert len(ours) == 1 and ours[0]["version"] == __version__


def test_declared_defaults_still_read_as_defaults_and_metrics_fallbacks_still_apply(tmp_path: Path) -> None:
    # Airflow now answers every [store_metrics] option; the plugin must still tell a default from a
    # setting, and take host/port/prefix from [metrics] when they are not set.
    code = (
        "import json; from store_metrics.config.reader import read_options; s = read_options(); "
        "print(json.dumps({'sources': dict(s.sources), 'port': s.port}))"
    )
    seen = json.loads(
        python(
            tmp_path,
            code,
            AIRFLOW__METRICS__STATSD_PORT="9125",
            AIRFLOW__STORE_METRICS__FLUSH_TIMEOUT="5",
        )
    )
    assert seen["port"] == 9125
    assert seen["sources"]["port"] == "[metrics] statsd_port"
    assert seen["sources"]["flush_timeout"] == "[store_metrics] flush_timeout"
    assert seen["sources"]["backend"] == "default"


def test_the_plugin_loads_once_without_import_errors_when_providers_are_discovered_eagerly(
    tmp_path: Path,
) -> None:
    code = (
        "import json; from airflow import plugins_manager as p; p.ensure_plugins_loaded(); "
        "print(json.dumps({'plugins': [i['name'] for i in p.get_plugin_info()], "
        "'errors': p.get_import_errors()}))"
    )
    seen = json.loads(python(tmp_path, code, AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS="False"))
    assert seen["plugins"].count(provider_info.PLUGIN) == 1
    # A src/*.egg-info left by a plain `pip install -e .` shows up here too (scripts/setup removes it).
    assert seen["errors"] == {}, "the provider info must not declare the plugin a second time"
