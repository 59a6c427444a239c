"""The ``store-metrics`` command: ``demo``, ``check``, ``catalogue``, ``export`` and ``inventory``."""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence

from .. import __version__

#: argparse's own exit code for a command line it cannot parse.
EXIT_USAGE = 2


class _Formatter(argparse.HelpFormatter):
    """Wraps prose paragraphs; keeps lines that start with two spaces (lists, examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in textwrap.dedent(text).strip().split("\n\n"):
            if any(line.startswith("  ") for line in paragraph.splitlines()):
                paragraphs.append(textwrap.indent(paragraph, indent))
            else:
                paragraphs.append(
                    textwrap.fill(
                        " ".join(paragraph.split()), width, initial_indent=indent, subsequent_indent=indent
                    )
                )
        return "\n\n".join(paragraphs)


#: ``store-metrics inventory``'s exit codes (``inventory.command``'s, which a test holds equal: that
#: package imports SQLAlchemy, which ``--help`` and ``export`` must not need).
INVENTORY_EXIT_CODES: dict[int, str] = {
    0: "read (with --serve: stopped by SIGTERM or SIGINT)",
    1: "bad configuration",
    2: "Airflow or prometheus_client is not installed",
    3: "the database could not be read",
    4: "--serve could not listen on its address (a port in use)",
}


def epilog(exits: Mapping[int, str], examples: Sequence[str]) -> str:
    """The end of a subcommand's ``--help``: its exit codes and examples."""
    parse_error = "the command line could not be parsed"
    codes = dict(exits)
    codes[EXIT_USAGE] = f"{exits[EXIT_USAGE]}; or {parse_error}" if EXIT_USAGE in exits else parse_error
    lines = ["exit codes:"]
    lines += [f"  {code}  {meaning}" for code, meaning in sorted(codes.items())]
    lines += ["", "examples:"]
    lines += [f"  {example}" for example in examples]
    return "\n".join(lines)


def _catalogue(args: argparse.Namespace) -> int:
    from ..catalogue import markdown_table

    print(markdown_table(args.prefix), end="")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import AGAIN_EVERY, run_demo, serve_forever

    if args.runs < 1:
        print("error: --runs must be at least 1", file=sys.stderr)
        return 2
    again = AGAIN_EVERY if args.again is None else args.again
    if again < 0:
        print("error: --again must be 0 (never) or more seconds", file=sys.stderr)
        return 2
    result = run_demo(runs=args.runs, host=args.host, port=args.port)
    failed = [name for name, state, _ in result.runs if state != "success"]
    if failed:
        print(f"error: DAG runs did not succeed: {', '.join(failed)} (kept {result.home} for a look)")
        return 1
    if args.serve:
        serve_forever(result.endpoint, refresh=result.refresh_footprint, again=result.again, every=again)
    if args.keep:
        print(f"kept the demo's AIRFLOW_HOME: {result.home}")
    else:
        shutil.rmtree(result.home, ignore_errors=True)
    return 0


def _check(args: argparse.Namespace) -> int:
    from .check import run_check

    return run_check(process=args.process)


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..shipped.export import run

    return run(Path(args.out), args.prefix, check=args.check, assignments=args.set, target=args.target)


def _inventory(args: argparse.Namespace) -> int:
    from ..inventory.command import run

    return run(args)


_SET_HELP = (
    "change an export setting: a threshold, `for` duration, scope or link "
    "(store_metrics.shipped.settings; docs/alerts.md lists them); repeat for several"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="store-metrics",
        description="Counters for every Apache Airflow state store call.",
        epilog="Each command's --help says what it does, its exit codes and an example.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_demo, _add_check, _add_catalogue, _add_export, _add_inventory):
        add(commands)
    return parser


def _add_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo",
        help="run four shipped example DAGs on a throwaway Airflow and print the series",
        description=(
            "Runs the example DAGs shipped in store_metrics/example_dags (state_store_metrics_01, _02 "
            "twice, _03, example_resumable_job: the scenarios of the upstream proposal that defines "
            "these metrics, apache/airflow#75729) with "
            "dag.test() on a temporary Airflow home with SQLite, through the plugin with the "
            "OpenTelemetry backend and its Prometheus exporter, then prints the series a scrape returns."
        ),
        epilog=epilog(
            {
                0: "every DAG run succeeded",
                1: "a DAG run did not succeed (the Airflow home is kept)",
                EXIT_USAGE: "bad arguments (--runs below 1, --again below 0)",
            },
            [
                "store-metrics demo",
                "store-metrics demo --serve --host 0.0.0.0   # for a Prometheus in a container",
            ],
        ),
        formatter_class=_Formatter,
    )
    demo.add_argument("--runs", type=int, default=1, help="repeat the example DAGs' runs N times (default 1)")
    demo.add_argument("--serve", action="store_true", help="keep the scrape endpoint up until Ctrl-C")
    demo.add_argument(
        "--again",
        type=float,
        default=None,
        metavar="SECONDS",
        help=(
            "with --serve, run the example DAGs again every SECONDS (default 20; 0: never), "
            "so a Prometheus started beside the demo records calls: what the endpoint held at its first "
            "scrape is history to it"
        ),
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the temporary AIRFLOW_HOME (removed by default)"
    )
    demo.add_argument(
        "--port",
        type=int,
        default=None,
        help="scrape endpoint port (default: prometheus_port, 9464, with --serve, else a free port)",
    )
    demo.add_argument(
        "--host",
        default="127.0.0.1",
        help="scrape endpoint address (default 127.0.0.1; 0.0.0.0 for a Prometheus in a container)",
    )
    demo.set_defaults(func=_demo)


def _add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .check import EXIT_CODES, PROCESSES

    check = commands.add_parser(
        "check",
        help="read [store_metrics] as the plugin would, and send one test increment",
        description=(
            "Reads [store_metrics] (airflow.cfg or AIRFLOW__STORE_METRICS__* variables) exactly as the "
            "plugin would in the given kind of process, and prints the options that apply to it with "
            "where each value came from, whether the plugin stays out of the way because Airflow counts "
            "state store calls itself, and the series cap. Then it opens the backend, sends one "
            "store_metrics.check increment, flushes it, and says what 'sent' proves for that backend "
            "(over UDP: handed to the kernel, not received). Run it where that process runs, with its "
            "environment."
        ),
        epilog=epilog(
            EXIT_CODES,
            [
                "store-metrics check",
                "AIRFLOW__STORE_METRICS__BACKEND=statsd store-metrics check --process api-server",
            ],
        ),
        formatter_class=_Formatter,
    )
    check.add_argument(
        "--process",
        choices=PROCESSES,
        default="task",
        help="the kind of Airflow process to check the options of (default task)",
    )
    check.set_defaults(func=_check)


def _add_catalogue(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    catalogue = commands.add_parser(
        "catalogue",
        help="print the metric catalogue as a Markdown table",
        description="Prints every metric the tasks and the inventory emit: its name, its Prometheus "
        "series, its tags and what it counts, for a metric prefix.",
        epilog=epilog({0: "printed"}, ["store-metrics catalogue --prefix myco.airflow"]),
        formatter_class=_Formatter,
    )
    catalogue.add_argument(
        "--prefix", default="airflow", help="metric name prefix ([store_metrics] prefix; default airflow)"
    )
    catalogue.set_defaults(func=_catalogue)


def _add_export(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..shipped.folders import FOLDERS

    folders = ", ".join(f"{folder}/" for folder in FOLDERS)
    export = commands.add_parser(
        "export",
        help=f"write the pipeline's files ({folders}) for a metric prefix",
        description=f"Writes {folders} under --out, for the metric prefix the tasks use "
        "([store_metrics] prefix): OpenTelemetry Collector and Prometheus configs, recording and "
        "alerting rules with their promtool tests, statsd_exporter mappings, Grafana dashboard and "
        "provisioning, Helm values and Dockerfile for Airflow's chart, Datadog dashboard and monitors.",
        epilog=epilog(
            {
                0: "written (with --check: every file is up to date)",
                1: "with --check: a file is missing or differs",
                EXIT_USAGE: "the prefix is not valid",
            },
            ["store-metrics export --out store-metrics-files --prefix myco.airflow"],
        ),
        formatter_class=_Formatter,
    )
    export.add_argument("--out", required=True, help="output folder (created if missing)")
    export.add_argument("--prefix", default="airflow", help="metric name prefix (default airflow)")
    export.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    export.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help=_SET_HELP)
    export.add_argument(
        "--target",
        default="prometheus",
        help="the rule engine the rules and their unit tests are written for: prometheus (default; "
        "promtool tests) or victoriametrics (vmalert: no native histograms, vmalert-tool tests)",
    )
    export.set_defaults(func=_export)


def _add_inventory(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inventory = commands.add_parser(
        "inventory",
        help="what each DAG, task and asset keeps in the state store, read from the metadata database",
        description="Reads task_state_store and asset_state_store with one aggregate query each and prints "
        "entries, bytes, ages and expired entries per DAG and task and per asset, largest first. With "
        "--serve, reads them every [store_metrics] inventory_interval and serves the gauges (one such "
        "process per deployment). It only reads: SELECT on task_state_store, asset_state_store and asset "
        "is enough.",
        epilog=epilog(
            INVENTORY_EXIT_CODES,
            ["store-metrics inventory --top 50", "store-metrics inventory --serve --host 127.0.0.1"],
        ),
        formatter_class=_Formatter,
    )
    inventory.add_argument("--serve", action="store_true", help="keep reading and serving until stopped")
    inventory.add_argument(
        "--top", type=int, default=None, help="DAGs, tasks per DAG and assets shown (default inventory_top)"
    )
    inventory.add_argument("--host", default="0.0.0.0", help="--serve endpoint address (default 0.0.0.0)")
    inventory.add_argument(
        "--port", type=int, default=None, help="--serve endpoint port (default inventory_port, 9490)"
    )
    inventory.set_defaults(func=_inventory)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo" and args.serve and args.port is None:
        from ..config.options import default

        args.port = default("prometheus_port")
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
