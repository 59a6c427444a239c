"""The release, as docs/releasing.md and .github/workflows/release.yml make it, short of the upload.

* ``python -m build`` (sdist, then the wheel built from the sdist) from a copy of the clone, with only
  a local wheelhouse to build with; ``twine check --strict`` passes both;
* the wheel holds what the package reads at run time: the templates ``export`` fills in, the example
  DAGs, provider_info.json, the UI's static files and the ``py.typed`` marker, file for file as
  they are under src/; its metadata has this version, the license, the README as description and
  the entry points Airflow loads (the plugin and the provider);
* that wheel, installed into a fresh virtualenv that has Airflow (this environment's, less
  store-metrics), is found by ``airflow plugins`` and ``airflow config get-value store_metrics
  backend``, and ``store-metrics --version`` prints this version, from the virtualenv's copy;
* the workflow publishes from a tag, with trusted publishing (an OIDC token, no stored secret),
  only a tag naming this version, and builds as the page says.

About 90 s (the wheelhouse is shared with tests/docs/test_install_commands.py and kept between runs).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml

import store_metrics
from support.fresh_env import airflow_overlay, copy_clone, fresh_venv, offline_pip_env, tools_wheelhouse
from testbed.repository import ROOT

PACKAGE = ROOT / "src" / "store_metrics"
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"

#: The package data the code reads at run time (pyproject.toml's package-data), by folder or file.
PACKAGE_DATA = (
    "shipped/templates",
    "example_dags",
    "ui/static",
    "integration/provider_info.json",
    "py.typed",
)


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(sdist, wheel, wheelhouse), built as the release page builds them."""
    root = tmp_path_factory.mktemp("release")
    wheels = tools_wheelhouse()
    tools = fresh_venv(root / "tools")
    env = offline_pip_env(wheels)
    _run([str(tools / "pip"), "install", "build", "twine"], env=env)
    clone = copy_clone(root / "clone")
    _run([str(tools / "python"), "-m", "build", "--outdir", "dist", "."], cwd=clone, env=env)
    (sdist,) = (clone / "dist").glob("airflow_store_metrics-*.tar.gz")
    (wheel,) = (clone / "dist").glob("airflow_store_metrics-*.whl")
    checked = _run([str(tools / "twine"), "check", "--strict", str(sdist), str(wheel)], env=env)
    assert checked.stdout.count("PASSED") == 2, checked.stdout
    return sdist, wheel, wheels


def _package_files() -> set[str]:
    files = set()
    for entry in PACKAGE_DATA:
        path = PACKAGE / entry
        found = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        files |= {
            f"store_metrics/{p.relative_to(PACKAGE).as_posix()}"
            for p in found
            if "__pycache__" not in p.parts
        }
    return files


@pytest.mark.slow
def test_the_sdist_and_wheel_carry_this_version_and_everything_the_package_reads(
    release: tuple[Path, Path, Path],
) -> None:
    sdist, wheel, _ = release
    version = store_metrics.__version__
    assert sdist.name == f"airflow_store_metrics-{version}.tar.gz"
    assert wheel.name == f"airflow_store_metrics-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = f"airflow_store_metrics-{version}.dist-info"
        metadata = Parser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
    expected = _package_files()
    assert (
        len(expected) > 30
        and {"store_metrics/py.typed", "store_metrics/integration/provider_info.json"} <= expected
    )
    assert expected - names == set()
    assert any(n.startswith("store_metrics/example_dags/") and n.endswith(".py") for n in names)
    assert metadata["Version"] == version and metadata["Name"] == "airflow-store-metrics"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload() == (ROOT / "README.md").read_text()
    assert "store_metrics = store_metrics.integration.plugin:StoreMetricsPlugin" in entry_points
    assert "provider_info = store_metrics.integration.provider_info:get_provider_info" in entry_points
    # The sdist builds that wheel (build made the wheel from it): it has the sources and the data.
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "LICENSE"} <= members
    assert {f"src/{n}" for n in expected} - members == set()


@pytest.mark.slow
def test_the_built_wheel_installed_beside_airflow_is_a_plugin_and_a_command(
    release: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, wheel, wheels = release
    bin_dir = fresh_venv(tmp_path / "venv", see=airflow_overlay(tmp_path / "airflow"))
    env = offline_pip_env(wheels)
    env["AIRFLOW_HOME"] = str(tmp_path / "airflow-home")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    _run([str(bin_dir / "pip"), "install", f"{wheel}[otel]"], env=env)

    where = _run(
        [str(bin_dir / "python"), "-c", "import store_metrics; print(store_metrics.__file__)"], env=env
    )
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv"), where.stdout
    version = _run([str(bin_dir / "store-metrics"), "--version"], env=env)
    assert version.stdout.strip() == f"store-metrics {store_metrics.__version__}"

    plugins = json.loads(
        _run([str(bin_dir / "python"), "-m", "airflow", "plugins", "-o", "json"], env=env).stdout
    )
    (ours,) = [p for p in plugins if p["name"] == "store_metrics"]
    assert ours["source"].startswith(f"airflow-store-metrics=={store_metrics.__version__}: ")
    assert ours["listeners"] == ["store_metrics.integration.task_listener.StateStoreListener"]
    # The provider info the wheel ships: Airflow knows the [store_metrics] section.
    backend = _run(
        [str(bin_dir / "python"), "-m", "airflow", "config", "get-value", "store_metrics", "backend"], env=env
    )
    assert backend.stdout.strip() == "auto"


def test_the_workflow_publishes_this_version_from_its_tag_with_trusted_publishing() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert triggers == {"push": {"tags": ["v*"]}}
    jobs = workflow["jobs"]
    build, publish = jobs["build"], jobs["publish"]
    steps = " ".join(json.dumps(s) for s in build["steps"])
    assert "python -m build" in steps and "twine check --strict dist/*" in steps
    # The tag names the version the package says (store_metrics.__version__, its one place).
    assert "store_metrics.__version__" in steps and "GITHUB_REF_NAME" in steps
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    (upload,) = [s for s in publish["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert upload["uses"] == "pypa/gh-action-pypi-publish@release/v1"
    assert "password" not in upload.get("with", {})  # no stored token: trusted publishing
    # The other jobs get no token to publish with.
    assert "id-token" not in json.dumps(build.get("permissions", {}))
    assert workflow["permissions"] == {"contents": "read"}


def test_the_release_page_names_the_steps_the_tests_check() -> None:
    page = (ROOT / "docs" / "releasing.md").read_text()
    for step in (
        "src/store_metrics/__init__.py",
        "python -m build",
        "twine check --strict",
        "CHANGELOG.md",
        ".github/workflows/release.yml",
        "id-token: write",
        "git tag",
    ):
        assert step in page, step
    assert "releasing.md" in (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^__version__ = \"[\d.]+\"$", (PACKAGE / "__init__.py").read_text(), re.M)
    assert os.path.isfile(WORKFLOW)
