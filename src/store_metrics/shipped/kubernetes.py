"""``kubernetes/``: the pipeline's files as Prometheus Operator and Grafana sidecar objects.

Everything is a template under ``templates/kubernetes/``; this module only fills it in and wraps
the text of files other modules wrote, without reading it:

* ``base/``: each rule file of ``collector/`` (``*rules.yml``) as a ``PrometheusRule`` whose
  ``spec`` is the file's text, unchanged; the Grafana dashboard as a ``ConfigMap`` value, byte for
  byte, labelled for Grafana's dashboard sidecar; ``store-metrics inventory --serve`` as a
  Deployment (at the Pod Security Standards' ``restricted`` profile), its Service, a ServiceMonitor
  and a NetworkPolicy; a ``kustomization.yaml`` listing them;
* ``statsd/``: ``base`` and a ServiceMonitor of the Helm chart's statsd_exporter (StatsD topology);
* ``api-server/``: ``base`` and one PodMonitor of the API server workers, one endpoint per worker,
  and of the triggerer (``count_at = api_server``): one job for both, as on a VM.

The inventory runs the image built from ``helm/Dockerfile`` (its name a placeholder your
kustomization's ``images`` replaces).

The ports come from the option table, the worker count and the image from ``helm``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath

from store_metrics.config import options

from . import folders, helm, templating

__all__ = [
    "API_SERVER",
    "BASE",
    "DASHBOARD",
    "FOLDER",
    "STATSD",
    "literal_block",
    "render",
    "rule_files",
    "rule_object_name",
]

FOLDER = folders.KUBERNETES
BASE = FOLDER / "base"
STATSD = FOLDER / "statsd"
API_SERVER = FOLDER / "api-server"
#: The site page on the footprint and the inventory (what the inventory's header points at).
FOOTPRINT_PAGE = "https://store-metrics.github.io/airflow-store-metrics/footprint/"
#: The files of other modules this one wraps (by their paths in ``store-metrics export``'s layout).
COLLECTOR = PurePosixPath("collector")
DASHBOARD = PurePosixPath("dashboards/store-metrics.json")

#: Characters a YAML literal block keeps as they are (YAML 1.1 printable, less its line breaks
#: other than \n: \r, \x85, \u2028, \u2029).
_LITERAL_SAFE = re.compile(
    "[\t\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]*"
)


def _render(template: str, prefix: str, values: Mapping[str, str] | None = None) -> str:
    return templating.render(f"kubernetes/{template}", prefix, values)


def rule_files(files: Mapping[PurePosixPath, str]) -> list[PurePosixPath]:
    """The Prometheus rule files among ``files``: ``collector/*rules.yml`` (not their tests)."""
    return sorted(path for path in files if path.parent == COLLECTOR and path.name.endswith("rules.yml"))


def rule_object_name(rule_file: PurePosixPath) -> str:
    """``collector/server-rules.yml`` -> ``store-metrics-server-rules``."""
    return f"store-metrics-{rule_file.name.removesuffix('.yml')}"


def _rule_resource(rule_file: PurePosixPath) -> str:
    return f"prometheusrule-{rule_file.name.removesuffix('.yml')}.yaml"


def _indented(text: str, spaces: int) -> str:
    """``text`` with every non-empty line indented: a YAML document becomes a node's value."""
    for line in text.splitlines():
        if line.startswith(("---", "...", "%")):
            raise ValueError(f"cannot nest a YAML stream (a line {line[:3]!r}) inside another document")
    pad = " " * spaces
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


def literal_block(text: str, spaces: int) -> str:
    """``text`` as a YAML literal block scalar whose lines are indented by ``spaces``: byte for byte.

    The result ends without a line end, for a template line ``key: @token@`` to close.

    Raises ``ValueError`` for text a literal block cannot hold exactly (a character YAML reads as a
    line break or does not allow, a first line that starts with a space, no text at all).
    """
    if not text or text[0] in " \t\n" or _LITERAL_SAFE.fullmatch(text) is None:
        raise ValueError("this text cannot be written as a YAML literal block byte for byte")
    stripped = text.rstrip("\n")
    trailing = len(text) - len(stripped)
    chomping = {0: "-", 1: ""}.get(trailing, "+")
    pad = " " * spaces
    lines = [pad + line if line else line for line in stripped.split("\n")]
    # The template's own line end closes the last line; "+" keeps the empty lines after it.
    return f"|{chomping}\n" + "\n".join(lines) + "\n" * max(trailing - 1, 0)


def _endpoint(declared: str, port: int) -> str:
    """A podMetricsEndpoint: the pod's declared port ``declared``, moved to ``port`` on the same IP."""
    return (
        f"    - port: {declared}\n"
        "      relabelings:\n"
        "        - sourceLabels: [__address__]\n"
        "          regex: '(.+):\\d+'\n"
        "          targetLabel: __address__\n"
        f"          replacement: '$1:{port}'\n"
    )


def _prefix_env(prefix: str) -> tuple[str, str]:
    """The inventory's prefix: an environment variable, or (empty prefix) a note saying why not."""
    if prefix:
        return f'            - name: AIRFLOW__STORE_METRICS__PREFIX\n              value: "{prefix}"\n', ""
    return "", (
        "# The prefix is empty: an environment variable cannot say so (an empty option falls back to\n"
        "# [metrics] statsd_prefix); the inventory reads airflow.cfg's [store_metrics] prefix.\n"
    )


def _base(files: Mapping[PurePosixPath, str], prefix: str) -> dict[PurePosixPath, str]:
    out: dict[PurePosixPath, str] = {}
    for rule_file in rule_files(files):
        out[BASE / _rule_resource(rule_file)] = _render(
            "prometheusrule.yaml",
            prefix,
            {
                "rule_file": rule_file.name,
                "name": rule_object_name(rule_file),
                "spec": _indented(files[rule_file], 2),
            },
        )
    out[BASE / "grafana-dashboard.yaml"] = _render(
        "grafana-dashboard.yaml",
        prefix,
        {
            "dashboard": DASHBOARD.name,
            "json": literal_block(files[DASHBOARD], 4),
            "dashboard_kib": str(round(len(files[DASHBOARD].encode()) / 1024)),
        },
    )
    env, note = _prefix_env(prefix)
    out[BASE / "inventory.yaml"] = _render(
        "inventory.yaml",
        prefix,
        {
            "image": helm.BUILT_IMAGE,
            "inventory_port": str(options.default("inventory_port")),
            "prefix_env": env,
            "prefix_note": note,
            "footprint_page": FOOTPRINT_PAGE,
        },
    )
    out[BASE / "networkpolicy-inventory.yaml"] = _render(
        "networkpolicy-inventory.yaml",
        prefix,
        {"inventory_port": str(options.default("inventory_port"))},
    )
    resources = [path.name for path in out]
    out[BASE / "kustomization.yaml"] = _render(
        "base-kustomization.yaml",
        prefix,
        {"resources": "".join(f"  - {name}\n" for name in resources).rstrip("\n")},
    )
    return out


def render(files: Mapping[PurePosixPath, str], prefix: str) -> dict[PurePosixPath, str]:
    """Every file of ``kubernetes/``, wrapping the rule files and the dashboard among ``files``."""
    first = int(options.default("server_prometheus_port"))
    triggerer = int(options.default("prometheus_port"))
    return {
        **_base(files, prefix),
        STATSD / "kustomization.yaml": _render("statsd-kustomization.yaml", prefix),
        STATSD / "servicemonitor.yaml": _render("servicemonitor-statsd.yaml", prefix),
        API_SERVER / "kustomization.yaml": _render("api-server-kustomization.yaml", prefix),
        API_SERVER / "podmonitor.yaml": _render(
            "podmonitor-api-server.yaml",
            prefix,
            {
                "workers": str(helm.API_SERVER_WORKERS),
                "first_port": str(first),
                "triggerer_port": str(triggerer),
                "api_server_endpoints": "".join(
                    _endpoint("api-server", first + worker) for worker in range(helm.API_SERVER_WORKERS)
                ),
                "triggerer_endpoint": _endpoint("triggerer-logs", triggerer).rstrip("\n"),
            },
        ),
    }
