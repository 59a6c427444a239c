"""The saved results the page is rendered from: ``benchmarks/results.json``.

One JSON file: the machine a run measured on (``environment``) and, per section of the page, what
its measuring module returned (``data``, plain JSON) with when and how that section was measured
(``run``). ``python -m benchmarks --only X`` measures X again and keeps every other section's
saved results, so the page is always rendered from all of them; ``--render`` renders the page from
the file alone, without measuring.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

from .common import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results.json"
#: Libraries whose versions the page names.
PACKAGES: tuple[str, ...] = (
    "airflow-store-metrics",
    "apache-airflow",
    "apache-airflow-core",
    "apache-airflow-task-sdk",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-http",
    "datadog",
    "statsd",
)


class RunInfo(TypedDict):
    """When and how one section was measured."""

    date: str
    mode: str  # "full" or "quick"
    seconds: float | None  # None: not timed on its own (results transcribed from an older page)
    load_start: str  # load averages (1, 5, 15 min)
    load_end: str
    code: str  # git commit of the code measured


class SectionResult(TypedDict):
    run: RunInfo
    data: dict[str, Any]  # what the section's measuring module returned, as JSON


class Results(TypedDict):
    environment: dict[str, str]
    sections: dict[str, SectionResult]


def as_json(data: object) -> dict[str, Any]:
    """``data`` as it reads back from the results file (tuples become lists, keys strings), so the
    page rendered right after a run is the page rendered from the file."""
    loaded: dict[str, Any] = json.loads(json.dumps(data))
    return loaded


def load(path: Path = RESULTS) -> Results:
    results: Results = json.loads(path.read_text(encoding="utf-8"))
    return results


def load_or_empty(path: Path) -> Results:
    return load(path) if path.exists() else Results(environment={}, sections={})


def save(results: Results, path: Path = RESULTS) -> None:
    path.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def merged(old: Results, new: Results, order: list[str]) -> Results:
    """``old`` with the sections of ``new`` replaced or added, in ``order`` (the page's; names it does
    not know last); the environment is the newest run's."""
    sections = {**old["sections"], **new["sections"]}
    ranked = sorted(sections, key=lambda name: order.index(name) if name in order else len(order))
    return Results(environment=new["environment"], sections={name: sections[name] for name in ranked})


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _output(cmd: list[str]) -> str:
    try:
        return subprocess.run(
            cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def code_version() -> str:
    commit = _output(["git", "rev-parse", "--short", "HEAD"])
    dirty = _output(["git", "status", "--porcelain", "--", "src"])
    return f"git {commit}" + (" with uncommitted changes in src/" if dirty else "")


def _proc_field(path: str, name: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith(name):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def environment() -> dict[str, str]:
    """The machine, Python and libraries of this run."""
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    cpus = os.cpu_count() or 0
    memory = _proc_field("/proc/meminfo", "MemTotal")
    valgrind = _output(["valgrind", "--version"]) if shutil.which("valgrind") else "not installed"
    return {
        "machine": f"{platform.system()} {platform.release()} {platform.machine()}",
        "CPU": f"{_proc_field('/proc/cpuinfo', 'model name') or platform.processor() or 'unknown'}, "
        f"{cpus} logical CPUs ({len(os.sched_getaffinity(0))} usable)",
        "memory": f"{int(memory.split()[0]) / 1024 / 1024:.1f} GiB" if memory else "unknown",
        "Python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "libraries": ", ".join(versions),
        "valgrind": valgrind,
    }


def data_of(results: Results, name: str) -> Any:
    """The saved data of section ``name`` (its measuring module's type), or ``None`` if not measured."""
    section = results["sections"].get(name)
    return section["data"] if section else None
