"""The one command: run every benchmark, print the tables, write ``docs/performance.md``.

    /work/venv/bin/python -m benchmarks            # full run, a few minutes, writes the page
    /work/venv/bin/python -m benchmarks --quick    # smoke run, seconds, prints only
    /work/venv/bin/python -m benchmarks --only percall,stalls --output /tmp/perf.md

Run it from the repository root (child processes are started with ``-m benchmarks.<module>``).
Progress goes to stderr; the page (Markdown) goes to stdout and, unless ``--no-write``, to
``--output`` (default ``docs/performance.md`` in full mode; nothing in quick mode).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .common import REPO_ROOT, log, prepare_airflow_home

SECTIONS: tuple[str, ...] = (
    "roundtrip",
    "percall",
    "callgrind",
    "stalls",
    "memory",
    "flush",
    "histogram_export",
    "exitdelay",
    "server",
    "load",
)
#: Sections a plain ``--quick`` leaves out: their quick form alone takes about a minute and a half
#: (``--quick --only load`` runs it; tests/test_load_bench.py does).
NOT_IN_PLAIN_QUICK: tuple[str, ...] = ("load",)
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


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total() -> str:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def environment(command: str, quick: bool) -> dict[str, str]:
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--", "src")
    cpus = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = cpus
    valgrind = "not installed"
    if shutil.which("valgrind"):
        valgrind = _git_free_version(["valgrind", "--version"])
    return {
        "command": command,
        "mode": "quick" if quick else "full",
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.system()} {platform.release()} {platform.machine()}",
        "CPU": f"{_cpu_model()}, {cpus} logical CPUs ({usable} usable)",
        "memory": _mem_total(),
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "Python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "libraries": ", ".join(versions),
        "valgrind": valgrind,
        "code": f"git {commit}" + (" with uncommitted changes in src/" if dirty else ""),
    }


def _git_free_version(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _runner(name: str) -> Callable[[bool], dict[str, Any]]:
    module = __import__(f"benchmarks.{name}", fromlist=["run"])
    run: Callable[[bool], dict[str, Any]] = module.run
    return run


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes, few repetitions")
    parser.add_argument("--output", type=Path, help="where to write the page")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(SECTIONS)}")
    args = parser.parse_args(argv)

    os.chdir(REPO_ROOT)
    prepare_airflow_home()
    sections = SECTIONS if not args.only else tuple(s.strip() for s in args.only.split(",") if s.strip())
    if args.quick and not args.only:
        sections = tuple(s for s in sections if s not in NOT_IN_PLAIN_QUICK)
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    command = "python -m benchmarks" + (" --quick" if args.quick else "")
    if args.only:
        command += f" --only {','.join(sections)}"
    results: dict[str, Any] = {"environment": environment(command, args.quick)}
    started = time.monotonic()
    # stdout carries the page alone: whatever the measured code prints there (Airflow's structlog
    # writes its warnings to the stdout it found at import, child processes inherit fd 1) goes to
    # stderr until the page is printed.
    with _stdout_to_stderr():
        for name in sections:
            t0 = time.monotonic()
            log(f"[{name}]")
            results[name] = _runner(name)(args.quick)
            log(f"[{name}] {time.monotonic() - t0:.1f} s")
    elapsed = time.monotonic() - started
    results["environment"]["duration"] = f"{elapsed / 60:.1f} min" if elapsed >= 90 else f"{elapsed:.0f} s"
    results["environment"]["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())

    from .report import render

    page = render(results)
    print(page)
    output = args.output
    if output is None and not args.quick:
        output = REPO_ROOT / "docs" / "performance.md"
    if output is not None and not args.no_write:
        output.parent.mkdir(parents=True, exist_ok=True)
        from .inventory import keep_section  # blocks other commands write there stay

        output.write_text(keep_section(output, page), encoding="utf-8")
        log(f"wrote {output}")
