"""``store-metrics inventory``: print the footprint once, or ``--serve`` it until stopped.

Reads ``[store_metrics]`` (``inventory_*`` options, and for ``inventory_export = backend`` the
backend options the tasks use) and Airflow's ``[database]`` through Airflow itself. Exit codes:
0 done (or stopped by SIGTERM/SIGINT), 1 bad configuration, 2 Airflow or ``prometheus_client``
not installed, 3 the database could not be read (one-shot) or the endpoint could not be opened.
Log lines go to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

from .. import logs
from ..errors import ConfigError, MissingExtraError

EXIT_OK = 0
EXIT_CONFIG = 1
EXIT_MISSING = 2
EXIT_DATABASE = 3
#: ``--serve`` could not listen on its address (a port in use, an address not on this host).
EXIT_LISTEN = 4

METASTORE_BACKEND = "airflow.state.metastore.MetastoreBackend"


def _log_to_stderr() -> None:
    """Our log lines on stderr, one per line, whatever Airflow's logging did to the root logger."""
    logger = logs.logger
    if not any(getattr(h, "_store_metrics_inventory", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        handler._store_metrics_inventory = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _say_state_store_backends() -> None:
    """Say once what Airflow's state store backend configuration means for the figures."""
    from airflow.configuration import conf

    server = conf.get("state_store", "backend", fallback=METASTORE_BACKEND) or METASTORE_BACKEND
    if server != METASTORE_BACKEND:
        logs.once(
            "inventory:server-backend",
            logging.WARNING,
            "store-metrics inventory: [state_store] backend = %s, not Airflow's metadata database: the "
            "state store tables may hold none of the state; the footprint shows only what they hold",
            server,
        )
    worker = conf.get("workers", "state_store_backend", fallback="")
    if worker:
        logs.once(
            "inventory:worker-backend",
            logging.INFO,
            "store-metrics inventory: [workers] state_store_backend = %s: entries written through it hold "
            "a reference, counted as external_entries, and their groups' bytes are reported as unknown",
            worker,
        )


def run(args: argparse.Namespace) -> int:
    from ..config.reader import read_options

    _log_to_stderr()
    try:
        options = read_options()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    top = options.inventory_top if args.top is None else args.top
    if top < 1:
        print("error: --top must be at least 1", file=sys.stderr)
        return EXIT_CONFIG
    try:
        from .collect import Collector
        from .database import Database

        database = Database.from_airflow(options.inventory_timeout)
        _say_state_store_backends()
    except ImportError as exc:
        print(f"error: store-metrics inventory needs Apache Airflow 3.3+ installed ({exc})", file=sys.stderr)
        return EXIT_MISSING
    collector = Collector(database, top)
    if not args.serve:
        from .table import render

        snapshot = collector.collect()
        sys.stdout.write(render(snapshot, top))
        return EXIT_OK if all(snapshot.up.values()) else EXIT_DATABASE
    return _serve(args, options, collector)


def _serve(args: argparse.Namespace, options: Any, collector: Any) -> int:
    from ..counting.runtime import create_emitter
    from .publish import Publisher, emitter_arguments
    from .serve import ServeLoop

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    interval = options.inventory_interval
    close: Any = None
    try:
        if options.inventory_export == "prometheus":
            from .prometheus import Endpoint

            port = options.inventory_port if args.port is None else args.port
            endpoint = Endpoint(lambda: collector.snapshot, options.prefix, args.host, port)
            close = endpoint.close
            where = f"serving {endpoint.url}"
            loop = ServeLoop(collector, interval)
        else:
            emitter = create_emitter(**emitter_arguments(options))
            close = emitter.close
            publisher = Publisher(emitter, options.flush_timeout)
            where = f"sending to {emitter.backend.describe()} every {options.flush_interval:g} s"
            loop = ServeLoop(collector, interval, tick=options.flush_interval, on_tick=publisher.publish)
    except (ConfigError, MissingExtraError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MISSING if isinstance(exc, MissingExtraError) else EXIT_CONFIG
    except OSError as exc:
        print(
            f"error: cannot serve on {args.host}:{args.port or options.inventory_port}: {exc}",
            file=sys.stderr,
        )
        return EXIT_LISTEN
    logs.logger.info(
        "store-metrics inventory: reading the state store tables of %s every %g s (statement timeout %g s, "
        "top %d); %s",
        collector.database.describe(),
        interval,
        collector.database.timeout,
        collector.top,
        where,
    )
    try:
        loop.run(stop)
    finally:
        close()
    logs.logger.info("store-metrics inventory: stopped after %d collections", loop.collections)
    return EXIT_OK
