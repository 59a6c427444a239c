"""The one command: measure the page's sections, keep their results, write ``docs/performance.md``.

    python -m benchmarks                       # every section, full sizes (about 25 min on 2 cores):
                                               # saves benchmarks/results.json, writes the page
    python -m benchmarks --only load,server    # measures those again; the others keep their results
    python -m benchmarks --quick               # smoke run (seconds), prints the page, saves nothing
    python -m benchmarks --render              # no measuring: the page from benchmarks/results.json

Run it from the repository root (child processes are started with ``-m benchmarks.<module>``).
Progress goes to stderr, the page (Markdown) to stdout. The page is only ever written here, whole,
from the results file (``benchmarks.report.page.render``), so its sections are in the order of
``benchmarks.sections.SECTIONS``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

from . import results as saved
from .common import REPO_ROOT, log, prepare_airflow_home
from .results import Results, SectionResult
from .sections import BY_NAME, SECTIONS, resolve

PAGE = REPO_ROOT / "docs" / "performance.md"


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """stdout carries the page alone: whatever the measured code prints there (Airflow's structlog
    writes its warnings to the stdout it found at import, child processes inherit fd 1) goes to
    stderr until the page is printed."""
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(kept, 1)
        os.close(kept)


def measure(
    names: tuple[str, ...], quick: bool, keep: Callable[[Results], None]
) -> tuple[Results, list[str]]:
    """Run the measuring function of each named section: their results, each with its run's record,
    and the sections that failed (logged; the others still run). ``keep`` gets the results so far
    after every section, so that a long run keeps what it has measured."""
    results = Results(environment=saved.environment(), sections={})
    failed = []
    with _stdout_to_stderr():
        for name in names:
            log(f"[{name}]")
            date, load_start, started = saved.now(), saved.load_average(), time.monotonic()
            try:
                data = saved.as_json(resolve(BY_NAME[name].measure)(quick))
            except Exception:
                log(f"[{name}] failed:\n{traceback.format_exc()}")
                failed.append(name)
                continue
            seconds = time.monotonic() - started
            log(f"[{name}] {seconds:.1f} s")
            run = saved.RunInfo(
                date=date,
                mode="quick" if quick else "full",
                seconds=round(seconds, 1),
                load_start=load_start,
                load_end=saved.load_average(),
                code=saved.code_version(),
            )
            results["sections"][name] = SectionResult(run=run, data=data)
            keep(results)
    return results, failed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes, few repetitions")
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(BY_NAME)}")
    parser.add_argument("--render", action="store_true", help="measure nothing: render the saved results")
    parser.add_argument(
        "--results",
        type=Path,
        help=f"results file (default {saved.RESULTS.relative_to(REPO_ROOT)}; none with --quick)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help=f"where to write the page (default {PAGE.relative_to(REPO_ROOT)}; none with --quick)",
    )
    parser.add_argument("--no-write", action="store_true", help="print the page only; save nothing")
    return parser


def _selected(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, ...]:
    if args.only:
        names = tuple(s.strip() for s in args.only.split(",") if s.strip())
        unknown = sorted(set(names) - set(BY_NAME))
        if unknown:
            parser.error(f"unknown sections: {', '.join(unknown)}")
        return tuple(s.name for s in SECTIONS if s.name in names)
    return tuple(s.name for s in SECTIONS if s.plain_quick or not args.quick)


def _measured(
    parser: argparse.ArgumentParser, args: argparse.Namespace, path: Path | None
) -> tuple[Results, list[str]]:
    """The selected sections measured; with a results file, merged into its saved results (and saved
    after every section, unless ``--no-write``)."""
    order = [s.name for s in SECTIONS]
    old = saved.load_or_empty(path) if path else None

    def keep(new: Results) -> None:
        if path is not None and old is not None and not args.no_write:
            saved.save(saved.merged(old, new, order), path)

    new, failed = measure(_selected(parser, args), args.quick, keep)
    if old is None:
        return new, failed
    log(f"saved {path}" if not args.no_write else "nothing saved (--no-write)")
    return saved.merged(old, new, order), failed


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    os.chdir(REPO_ROOT)
    prepare_airflow_home()
    path = args.results or (None if args.quick else saved.RESULTS)
    results, failed = (
        (saved.load(path or saved.RESULTS), []) if args.render else _measured(parser, args, path)
    )
    from .report.page import render

    page = render(results)
    print(page, end="")
    output = args.output or (None if args.quick else PAGE)
    if output is not None and not args.no_write:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(page, encoding="utf-8")
        log(f"wrote {output}")
    if failed:
        raise SystemExit(
            f"sections that failed (their saved results, if any, are the earlier ones): {', '.join(failed)}"
        )
