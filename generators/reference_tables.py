"""The reference tables of the docs, each from the one source its facts have.

The ``[store_metrics]`` options and the ``configure()`` arguments (the option table), the metrics
(the catalogue), the ``store-metrics`` command (its parser), and the supported versions
(``pyproject.toml``, the tested releases, the dashboard). ``generators.docs`` writes them into
the pages.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

# Python 3.11+: the generators are development tools, run in .venv (mypy checks as the lowest Python the
# package claims, 3.10, where tomllib does not exist).
import tomllib  # type: ignore[import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parent.parent

#: The width argparse formats help for; fixed, so the CLI page does not depend on a terminal.
HELP_COLUMNS = "100"


def options_table() -> str:
    from store_metrics.config import options

    return options.markdown_table()


def arguments_table() -> str:
    """The ``configure()`` arguments that are not ``[store_metrics]`` options."""
    from store_metrics.config import options

    rows = ["| argument | values | default | what it does |", "|---|---|---|---|"]
    for option in options.OPTIONS:
        if option.in_config:
            continue
        default = "none" if option.default in (None, "") else f"`{option.default}`"
        rows.append(f"| `{option.keyword}` | {option.accepted} | {default} | {option.doc} |")
    return "\n".join(rows) + "\n"


def catalogue_table() -> str:
    from store_metrics import catalogue

    return catalogue.markdown_table()


def _buckets(metric: object) -> str:
    from store_metrics import catalogue

    assert isinstance(metric, catalogue.Metric)
    kind = metric.kind.value
    if metric.kind is catalogue.Kind.HISTOGRAM:
        return f"{kind}, {metric.unit}: " + ", ".join(f"{b:g}" for b in metric.buckets)
    if metric.kind is catalogue.Kind.GAUGE:
        return f"{kind}, {metric.unit}"
    return kind


def server_table() -> str:
    """The API server's metrics: ``store_metrics.catalogue.SERVER_METRICS``."""
    from store_metrics import catalogue

    rows = ["| metric | Prometheus series | kind, buckets | tags | description |", "|---|---|---|---|---|"]
    for m in catalogue.SERVER_METRICS:
        rows.append(
            f"| `{m.full_name()}` | `{m.prometheus_name()}` | {_buckets(m)} | {', '.join(m.tags)} "
            f"| {m.description} |"
        )
    return "\n".join(rows) + "\n"


def cli_reference() -> str:
    """``store-metrics --help`` and every subcommand's ``--help``, as the command prints them."""
    from store_metrics.commands.cli import build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        parser = build_parser()
        parts = ["```text\n$ store-metrics --help\n" + parser.format_help() + "```\n"]
        for name, sub in _subcommands(parser).items():
            parts.append(f"\n## `store-metrics {name}`\n\n```text\n$ store-metrics {name} --help\n")
            parts.append(sub.format_help() + "```\n")
        return "".join(parts)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


#: The page the versions table links to (what runs where), relative to docs/: each page that holds
#: the table links to it relatively (README.md: docs/airflow-versions.md), so the link works in a
#: clone, on the forge and in the built site alike.
VERSIONS_PAGE = "airflow-versions.md"
#: The section of docs/airflow-versions.md that names the stand-ins (Grafana among them).
STAND_INS = "#the-programs-beside-airflow-real-ones-and-the-two-stand-ins"


def _peer_versions(peer: str, *roles: str) -> str:
    """The pinned versions of ``peer`` (testbed/peers.py) playing ``roles``, each with its role."""
    from testbed import peers

    said = {"chart": "the Airflow chart 1.19.0's", "lts": "LTS", "newest": "newest", "minimum": "minimum"}
    parts = []
    for role in roles:
        pin = peers.pin_for(peer, role)
        parts.append(f"{pin.version} ({said[role]})" if role in said else pin.version)
    return ", ".join(parts)


def versions_table(link: str = VERSIONS_PAGE) -> str:
    """Supported versions: Airflow and Python from pyproject.toml, Grafana from the dashboard's builder, the
    peers (statsd_exporter, the Collector, Prometheus, Alertmanager, Jaeger) from testbed/peers.py's pins:
    the minimum is the pin playing ``minimum``, and every pin is a version the tests run. ``link``
    is docs/airflow-versions.md as the page holding the table reaches it."""
    from store_metrics.integration.compatibility import TESTED
    from store_metrics.shipped.grafana.dashboard import OLDEST_GRAFANA as grafana
    from testbed import peers

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (airflow,) = project["optional-dependencies"]["airflow"]
    low, high = re.findall(r"[<>]=?\s*([\d.]+)", airflow)
    python = project["requires-python"].lstrip(">=")
    prometheus = peers.pin_for("prometheus", "minimum").version
    statsd_exporter = peers.pin_for("statsd_exporter", "minimum").version
    collector = peers.pin_for("otelcol", "minimum").version
    helm = link.replace("airflow-versions.md", "deploy/helm.md") + "#what-the-files-were-checked-against"
    rows = [
        "| component | minimum | tested on | why |",
        "|---|---|---|---|",
        f"| Apache Airflow | {low} (below {high}) | {', '.join(TESTED)} | the state store came with 3.3 "
        f"([what runs where]({link})) |",
        f"| Python | {python} | | the package's `requires-python` |",
        f"| Prometheus | {prometheus} | {_peer_versions('prometheus', 'newest', 'lts', 'minimum')} | "
        "the rules' promtool tests run on the minimum; every topology's rules, alerts and dashboard "
        "run end to end on the 3.x pins (the OTLP one on the minimum too) |",
        f"| statsd_exporter | {statsd_exporter} | {_peer_versions('statsd_exporter', 'chart', 'minimum')} | "
        "the API server mappings use `observer_type` and `histogram_options` |",
        f"| OpenTelemetry Collector (contrib components) | {collector} | "
        f"{_peer_versions('otelcol', 'newest', 'minimum')} | the shipped collector config: the `statsd` "
        "receiver's `ignore_host` (0.148.0 refuses it; 0.149.0 to 0.151.0 could not be tried) and "
        "`deltatocumulative`; the scaled-out tier's `loadbalancing` exporter (`routing_key: streamID`) "
        "runs on 0.152.0 (the Go module proxy serves it up to 0.161.0 only, which does not build "
        "against 0.165.0) |",
        "| Airflow's Helm chart | | 1.19.0; 1.22.0 keys only | the values files pass 1.19.0's schema "
        "and render where a copy of the chart is given; 1.22.0's values keys and OpenTelemetry "
        f"service were read from its release, not rendered ([Helm and Kubernetes]({helm})) |",
        f"| Alertmanager | | {_peer_versions('alertmanager', 'current')} | receives the alerts in the "
        "end-to-end tests; the rules need nothing of a particular release |",
        f"| Jaeger | | {_peer_versions('jaeger', 'current')} | a retried task's trace is read back through "
        "its query API in the tests; the spans are plain OTLP, so any OTLP trace backend shows them "
        f"([Traces]({link.replace(VERSIONS_PAGE, 'traces.md')}#seeing-it-in-jaeger)) |",
        "| VictoriaMetrics (single-node, vmagent, vmalert) | | "
        f"{_peer_versions('victoriametrics', 'current')} | "
        "a global layer over several clusters' Prometheus (full, or in agent mode) or vmagents: "
        "`store-metrics export --target victoriametrics`, whose unit tests run in vmalert-tool; two "
        "clusters' calls, alerts, dashboard, a cluster going away and restarts end to end "
        f"([scaling out]({link.replace('airflow-versions.md', 'scaling-out.md')})) |",
        f"| Thanos (sidecar, query) | | {_peer_versions('thanos', 'current')} | a global view over several "
        "clusters' Prometheus, each evaluating the shipped rules itself: nothing in the export changes; "
        "two clusters' calls, alerts, dashboard, a cluster going away and restarts end to end "
        f"([scaling out]({link.replace('airflow-versions.md', 'scaling-out.md')}#thanos)) |",
        f"| Kubernetes manifests | | {peers.pin_for('podsecurity', 'current').version} "
        f"(pod-security-admission), {peers.pin_for('kube-score', 'current').version} (kube-score) | "
        "the inventory's pod is admitted at the `restricted` Pod Security level by the admission's own "
        "code and kube-score finds nothing critical; no cluster runs in the tests "
        f"([the stand-ins]({link}{STAND_INS})) |",
        f"| Grafana | {grafana} | | the dashboard's `__requires`; no Grafana runs in the tests "
        f"([the stand-ins]({link}{STAND_INS})) |",
    ]
    return "\n".join(rows) + "\n"
