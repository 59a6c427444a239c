"""The ``store-metrics`` command: ``demo``, ``check``, ``catalogue``, ``export`` and ``inventory``."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence


def _catalogue(args: argparse.Namespace) -> int:
    from .catalogue import CATALOGUE_TABLE

    prefix = args.prefix
    print("| metric | Prometheus series | tags | description |")
    print("|---|---|---|---|")
    for m in CATALOGUE_TABLE:
        tags = ", ".join(m.tags) + (f" (+ {', '.join(m.optional_tags)} when set)" if m.optional_tags else "")
        print(
            f"| `{m.full_name(prefix)}` | `{m.prometheus_name(prefix)}` | {tags or '-'} | {m.description} |"
        )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo, serve_forever

    if args.runs < 1:
        print("error: --runs must be at least 1", file=sys.stderr)
        return 2
    result = run_demo(runs=args.runs, host=args.host, port=args.port)
    failed = [name for name, state, _ in result.runs if state != "success"]
    if failed:
        print(f"error: DAG runs did not succeed: {', '.join(failed)} (kept {result.home} for a look)")
        return 1
    if args.serve:
        serve_forever(result.endpoint)
    if args.keep:
        print(f"kept the demo's AIRFLOW_HOME: {result.home}")
    else:
        shutil.rmtree(result.home, ignore_errors=True)
    return 0


def _check(args: argparse.Namespace) -> int:
    from .check import run_check

    return run_check()


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .pipeline.export import run

    return run(Path(args.out), args.prefix, check=args.check, assignments=args.set)


def _inventory(args: argparse.Namespace) -> int:
    from .inventory.command import run

    return run(args)


_SET_HELP = (
    "change an export setting: a threshold, `for` duration, scope or link "
    "(store_metrics.pipeline.settings; docs/alerts.md lists them); repeat for several"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="store-metrics",
        description="Counters for every Apache Airflow state store call.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo",
        help="run the upstream proposal's four scenarios on a throwaway Airflow and print the series",
        description=(
            "Runs the upstream proposal's scenarios (01, 02 twice, 03, example_resumable_job) with "
            "dag.test() on a temporary Airflow home with SQLite, through the plugin with the "
            "OpenTelemetry backend and its Prometheus exporter, then prints the series a scrape returns."
        ),
    )
    demo.add_argument("--runs", type=int, default=1, help="repeat the proposal's runs N times (default 1)")
    demo.add_argument("--serve", action="store_true", help="keep the scrape endpoint up until Ctrl-C")
    demo.add_argument(
        "--keep", action="store_true", help="keep the temporary AIRFLOW_HOME (removed by default)"
    )
    demo.add_argument(
        "--port",
        type=int,
        default=None,
        help="scrape endpoint port (default: 9464 with --serve, else a free port)",
    )
    demo.add_argument(
        "--host",
        default="127.0.0.1",
        help="scrape endpoint address (default 127.0.0.1; 0.0.0.0 for a Prometheus in a container)",
    )
    demo.set_defaults(func=_demo)

    check = commands.add_parser(
        "check", help="read [store_metrics] as the plugin would, and send one test increment"
    )
    check.set_defaults(func=_check)

    catalogue = commands.add_parser("catalogue", help="print the metric catalogue as a Markdown table")
    catalogue.add_argument("--prefix", default="airflow")
    catalogue.set_defaults(func=_catalogue)

    export = commands.add_parser(
        "export",
        help="write the collector, Prometheus, statsd_exporter and Grafana files for a metric prefix",
        description="Writes collector/ (OpenTelemetry Collector and Prometheus configs, rules with their "
        "promtool tests, statsd_exporter mappings) and dashboards/ (Grafana dashboard, provisioning) "
        "under --out, for the metric prefix the tasks use ([store_metrics] prefix).",
    )
    export.add_argument("--out", required=True, help="output folder (created if missing)")
    export.add_argument("--prefix", default="airflow", help="metric name prefix (default airflow)")
    export.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    export.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help=_SET_HELP)
    export.set_defaults(func=_export)

    inventory = commands.add_parser(
        "inventory",
        help="what each DAG, task and asset keeps in the state store, read from the metadata database",
        description="Reads task_state_store and asset_state_store with one aggregate query each and prints "
        "entries, bytes, ages and expired entries per DAG and task and per asset, largest first. With "
        "--serve, reads them every [store_metrics] inventory_interval and serves the gauges (one such "
        "process per deployment).",
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo" and args.serve and args.port is None:
        args.port = 9464
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
