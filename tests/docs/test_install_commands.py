"""Every install command the pages give works today, on a fresh machine, with no release on the index.

A new user follows the README, then getting-started.md, then a deploy page. No release of
airflow-store-metrics is on the package index yet, so each ``pip`` line of a ```` ```bash ```` block
of README.md and docs/**/*.md is run as written, by bash, in a fresh virtualenv, in a copy of the
clone, with pip reading no index and no configuration: only a local folder of wheels
(``support.fresh_env.wheelhouse``: the build backend and the extras' dependencies, never the package
itself). The lines of one block run in order in one virtualenv (a block that builds the wheel then
installs it); a block that installs ``dist/...whl`` without building it finds the wheel built from
the clone in ``dist/``, as the page says to copy it. Afterwards the package is installed, at this
version, with the dependencies of the extras the lines name.

* A command naming the package on the index (``pip install airflow-store-metrics...``), wherever a
  page says it (blocks or prose), is marked as waiting for a release ("once released") and is not
  run; that such a command cannot succeed here is checked once (the wheelhouse, the only index pip
  has here, has no release of the package, as the package index has none yet). A block with other
  pip lines (the release page's ``pip install build twine``) runs too.
* The exported helm/Dockerfile's ``COPY`` and ``RUN pip install`` run as the image would run them:
  the wheel built into the build context by the Helm page's ``pip wheel`` line is the file the
  ``COPY`` names, and the ``RUN`` line installs it into a virtualenv that has Airflow (this
  environment's, as the official image has its own) at the image's ``AIRFLOW_VERSION``.

How long: the wheelhouse is downloaded once (about 20 MB, kept between runs: about 30 s), then 10 to
30 s a block (a fresh virtualenv, an offline install, a build where the block builds) and about 55 s
for the Dockerfile; the whole file took 3.0 minutes on this 2-core machine with its load average at
14 to 19.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import store_metrics
from store_metrics.shipped import helm
from support.fresh_env import (
    airflow_overlay,
    build_wheel,
    copy_clone,
    extra_requirements,
    fresh_venv,
    offline_pip_env,
    tools_wheelhouse,
)
from testbed.repository import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: A fenced bash block, indented or not (a block inside a list item).
FENCE = re.compile(r"^(?P<indent>[ \t]*)```bash\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
#: How a page marks a command that needs a release on the index.
RELEASE_MARK = re.compile(r"once\s+released", re.I)
#: A pip command naming the package by its name on the index (not a path to a wheel or a clone).
#: A pip line that names this package: the clone (``.``), a wheel file of it, or its name.
OURS = re.compile(
    r"""(^|\s)["']?\.(\[[\w,]+\])?["']?(\s|$)|airflow_store_metrics-.*\.whl|airflow-store-metrics"""
)
FROM_INDEX = re.compile(r"pip\s+install\b[^`\n]*?(?<![\w/.-])airflow-store-metrics\b")


@dataclass(frozen=True)
class Block:
    """The pip lines of one bash block, in order, and the pages that give exactly these lines."""

    commands: tuple[str, ...]
    pages: tuple[str, ...]


def _commands(body: str, indent: str) -> list[str]:
    lines = [line[len(indent) :] if line.startswith(indent) else line for line in body.splitlines()]
    joined = "\n".join(lines).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip()]


def _pip_lines(commands: list[str]) -> list[str]:
    return [c for c in commands if re.match(r"(python3? -m )?pip3? ", c)]


def install_blocks() -> list[Block]:
    """Every bash block with a pip line to run today, the same lines on two pages counted once."""
    found: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
    for page in PAGES:
        for match in FENCE.finditer(page.read_text()):
            commands = _pip_lines(_commands(match["body"], match["indent"]))
            lines = [c for c in commands if not RELEASE_MARK.search(c)]
            if lines:
                # The same commands with other comments are the same commands.
                key = tuple(line.split(" #", 1)[0].strip() for line in lines)
                found.setdefault(key, (lines, []))[1].append(str(page.relative_to(ROOT)))
    return [Block(tuple(lines), tuple(pages)) for lines, pages in found.values()]


BLOCKS = install_blocks()


def _extras(commands: tuple[str, ...]) -> set[str]:
    """The extras the commands install (not those their comments mention)."""
    said = [c.split(" #", 1)[0] for c in commands]
    return {extra for c in said for group in re.findall(r"\[([\w,]+)\]", c) for extra in group.split(",")}


@pytest.fixture(scope="module")
def wheels() -> Path:
    return tools_wheelhouse(*sorted(set().union(*(_extras(b.commands) for b in BLOCKS))))


@pytest.fixture(scope="module")
def built_wheel(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    scratch = tmp_path_factory.mktemp("wheel")
    return build_wheel(scratch / "dist", wheels, scratch)


def _installed(bin_dir: Path, name: str) -> str | None:
    done = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            "import importlib.metadata as m\n"
            f"try: print(m.version({name!r}))\nexcept m.PackageNotFoundError: pass",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip() or None


def test_the_pages_give_install_commands_that_work_from_a_clone_or_its_wheel() -> None:
    pages = {page for block in BLOCKS for page in block.pages}
    assert {"README.md", "docs/getting-started.md", "docs/deploy/vm.md", "docs/deploy/helm.md"} <= pages
    everything = [c for block in BLOCKS for c in block.commands]
    assert any(re.fullmatch(r'pip install "\.\[otel\]".*', c) for c in everything)
    assert f'pip install "dist/{helm.wheel()}[otel]"' in everything


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b.pages[0]}:{b.commands[0][:40]}")
def test_each_install_block_runs_as_written_without_the_index(
    block: Block, wheels: Path, built_wheel: Path, tmp_path: Path
) -> None:
    clone = copy_clone(tmp_path / "clone")
    if not any(" wheel " in f" {c} " for c in block.commands):
        # The page says to build the wheel in the clone (getting-started.md) and copy dist/ here.
        (clone / "dist").mkdir()
        shutil.copy(built_wheel, clone / "dist" / built_wheel.name)
    bin_dir = fresh_venv(tmp_path / "venv")
    env = offline_pip_env(wheels)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(block.commands)],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{block.pages}: {block.commands}\n{done.stdout}\n{done.stderr}"
    # The lines that install this package (a clone, a wheel file), not a tool (build, twine).
    installs = [c for c in block.commands if re.match(r"(python3? -m )?pip3? install ", c) and OURS.search(c)]
    if installs:
        assert _installed(bin_dir, "airflow-store-metrics") == store_metrics.__version__
        for requirement in extra_requirements(*sorted(_extras(block.commands))):
            assert _installed(bin_dir, Requirement(requirement).name), requirement
    elif any(" wheel " in f" {c} " for c in block.commands):  # a block that builds the wheel: where it says
        wheel_lines = [c for c in block.commands if " wheel " in f" {c} "]
        for line in wheel_lines:
            folder = line.split("-w", 1)[1].split()[0]
            assert (clone / folder / helm.wheel()).is_file(), line


def test_every_wheel_the_pages_name_is_this_versions() -> None:
    """The file ``pip wheel`` writes from the clone: after a version bump the pages name the new one."""
    named = {
        f"{page.relative_to(ROOT)}: {name}"
        for page in PAGES
        for name in re.findall(r"airflow_store_metrics-[0-9][\w.+!]*-py3-none-any\.whl", page.read_text())
    }
    assert named
    assert {n for n in named if not n.endswith(f": {helm.wheel()}")} == set()


def test_commands_that_need_a_release_are_marked_so() -> None:
    unmarked = []
    for page in PAGES:
        text = page.read_text()
        for match in FROM_INDEX.finditer(text):
            before = " ".join(text[max(0, match.start() - 120) : match.end() + 80].split())
            if not RELEASE_MARK.search(before):
                unmarked.append(f"{page.relative_to(ROOT)}: {match[0]}")
    assert unmarked == []
    # And the run above would have caught one left unmarked in a block: every pip line it ran names
    # a clone (.), a wheel file or a wheel build, never the package on the index.
    assert not [c for b in BLOCKS for c in b.commands if FROM_INDEX.search(c)]


@pytest.mark.slow
def test_the_package_is_not_to_be_had_from_the_index_here(wheels: Path, tmp_path: Path) -> None:
    """What the run above relies on: the index and the wheelhouse have no release to install."""
    bin_dir = fresh_venv(tmp_path / "venv")
    done = subprocess.run(
        [str(bin_dir / "pip"), "download", "--no-deps", "-d", str(tmp_path / "d"), helm.requirement()],
        env=offline_pip_env(wheels),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0
    assert "No matching distribution found for airflow-store-metrics" in done.stderr


@pytest.mark.slow
def test_the_dockerfile_installs_the_wheel_the_helm_page_builds_beside_it(
    wheels: Path, tmp_path: Path
) -> None:
    """helm/Dockerfile's COPY and RUN, as the image runs them, on the wheel built as helm.md says."""
    context = tmp_path / "store-metrics" / "helm"
    shutil.copytree(ROOT / "helm", context)
    (helm_block,) = [b for b in BLOCKS if "docs/deploy/helm.md" in b.pages]
    (wheel_line,) = [c for c in helm_block.commands if c.startswith("pip wheel ")]
    clone = copy_clone(tmp_path / "clone")
    (clone / "store-metrics").symlink_to(tmp_path / "store-metrics")
    reader = offline_pip_env(wheels)
    reader["PATH"] = f"{fresh_venv(tmp_path / 'reader')}:{reader['PATH']}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", wheel_line],
        cwd=clone,
        env=reader,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    # The image: the official one has Airflow (here, this environment's) and its AIRFLOW_VERSION.
    bin_dir = fresh_venv(tmp_path / "image", see=airflow_overlay(tmp_path / "airflow"))
    image_root = tmp_path / "image-root"
    instructions = [
        line
        for line in (context / "Dockerfile").read_text().splitlines()
        if line.startswith(("COPY ", "RUN "))
    ]
    assert [line.split()[0] for line in instructions] == ["COPY", "RUN"]
    source, target = instructions[0].split()[1:]
    assert (context / source).is_file(), (
        f"the COPY names {source}; the page's pip wheel wrote {list(context.glob('*.whl'))}"
    )
    (image_root / target.lstrip("/")).parent.mkdir(parents=True)
    shutil.copy(context / source, image_root / target.lstrip("/"))
    run = instructions[1].removeprefix("RUN ").replace(target, str(image_root / target.lstrip("/")))
    env = offline_pip_env(wheels)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env["AIRFLOW_VERSION"] = importlib.metadata.version("apache-airflow")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", run],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, run + "\n" + done.stdout + done.stderr
    assert _installed(bin_dir, "airflow-store-metrics") == store_metrics.__version__
    assert _installed(bin_dir, "apache-airflow") == env["AIRFLOW_VERSION"]
    assert "Requirement already satisfied: apache-airflow==" in done.stdout  # Airflow left as it was
