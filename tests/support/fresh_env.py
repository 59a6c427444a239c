"""Fresh virtualenvs that install store-metrics as a user does, with no package index for it.

* ``wheelhouse``: a folder of wheels (the build backend, the extras' dependencies, ``build`` and
  ``twine``) downloaded once with this environment's pip and kept under
  ``~/.cache/store-metrics/wheelhouse/`` (or ``$STORE_METRICS_WHEELHOUSE``), keyed by the
  requirements and the Python version. It never holds airflow-store-metrics: pip, run with
  ``offline_pip_env``, finds no release of the package (none exists yet), as on a fresh machine.
* ``airflow_overlay``: this environment's site-packages less store-metrics (symlinks), so a fresh
  virtualenv that points at it (``see=``) has Airflow, the way the official image or a user's
  Airflow virtualenv has it, without installing Airflow's 150 distributions again; store-metrics
  comes only from what the test installs.
* ``build_wheel``: the wheel of a copy of what the wheel is made of (pyproject.toml, README.md,
  LICENSE, src/), so a build leaves nothing in the work tree.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from testbed.repository import ROOT

#: What a clone of the repository holds that building and installing it reads.
CLONE_FILES = ("pyproject.toml", "README.md", "LICENSE")
#: The distribution, as pip and importlib.metadata name its files.
DIST = "airflow_store_metrics"


def _pyproject() -> dict[str, object]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def extra_requirements(*extras: str) -> list[str]:
    """The requirements of ``extras`` of the package (pyproject.toml), self-references expanded."""
    declared: dict[str, list[str]] = _pyproject()["project"]["optional-dependencies"]  # type: ignore[index]
    found: list[str] = []
    for extra in extras:
        for requirement in declared[extra]:
            if requirement.startswith("airflow-store-metrics["):
                found += extra_requirements(*requirement.split("[", 1)[1].rstrip("]").split(","))
            else:
                found.append(requirement)
    return found


def build_requirements() -> list[str]:
    """What pip installs to build the package from a clone (``[build-system] requires``)."""
    return list(_pyproject()["build-system"]["requires"])  # type: ignore[index]


def _pip(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def wheelhouse(requirements: list[str]) -> Path:
    """A folder with wheels of ``requirements`` and everything they need, downloaded once."""
    key = hashlib.sha256("\n".join([sys.version, *sorted(requirements)]).encode()).hexdigest()[:16]
    base = Path(os.environ.get("STORE_METRICS_WHEELHOUSE", Path.home() / ".cache/store-metrics/wheelhouse"))
    folder = base / key
    if (folder / ".complete").is_file():
        return folder
    partial = base / f"{key}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    _pip("download", "--only-binary", ":all:", "-d", str(partial), *requirements)
    assert not list(partial.glob(f"{DIST}-*")), "the wheelhouse must not hold the package itself"
    (partial / ".complete").write_text("\n".join(requirements) + "\n")
    try:
        partial.rename(folder)
    except OSError:  # another session finished first: use its folder
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def tools_wheelhouse(*extras: str) -> Path:
    """The wheelhouse the tests share: what building the package needs, the ``otel`` extra's (and
    ``extras``') dependencies, and ``build`` and ``twine`` (the release's tools)."""
    names = sorted({"otel", *extras})
    return wheelhouse(sorted({*build_requirements(), *extra_requirements(*names), "build", "twine"}))


def offline_pip_env(links: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """An environment in which pip reads no index and no configuration: only the wheels in ``links``."""
    env = {k: v for k, v in (environ or os.environ).items() if not k.startswith("PIP_")}
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    return {
        **env,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(links),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    }


def copy_clone(destination: Path) -> Path:
    """What building the package reads of the repository, copied to ``destination``."""
    destination.mkdir(parents=True)
    for name in CLONE_FILES:
        shutil.copy(ROOT / name, destination / name)
    shutil.copytree(
        ROOT / "src",
        destination / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
    )
    return destination


def build_wheel(destination: Path, links: Path, scratch: Path) -> Path:
    """This version's wheel, built from a copy of the clone with only ``links`` to build it with."""
    source = copy_clone(scratch / "clone-for-wheel")
    _pip("wheel", "--no-deps", "-w", str(destination), str(source), env=offline_pip_env(links))
    (wheel,) = destination.glob(f"{DIST}-*.whl")
    return wheel


def airflow_overlay(folder: Path) -> Path:
    """This environment's site-packages (Airflow and the rest) as symlinks, store-metrics left out."""
    site = Path(sysconfig.get_paths()["purelib"])
    folder.mkdir(parents=True)
    for entry in site.iterdir():
        name = entry.name
        if name.startswith((f"{DIST}-", f"__editable__.{DIST}", "store_metrics")) or name.endswith(".pth"):
            continue
        (folder / name).symlink_to(entry)
    return folder


def fresh_venv(folder: Path, *, with_pip: bool = True, see: Path | None = None) -> Path:
    """A new virtualenv in ``folder``; with ``see``, that folder is on its path after its own
    site-packages (a ``.pth`` line), as a base installation's packages would be. Returns its bin/."""
    venv.EnvBuilder(with_pip=with_pip, symlinks=True).create(folder)
    if see is not None:
        python = folder / "bin" / "python"
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
        (Path(purelib) / "_store_metrics_tests_base.pth").write_text(f"{see}\n")
    return folder / "bin"
