"""``store-metrics export``: every shipped pipeline file, for a metric prefix and settings, from the package.

Layout (paths relative to ``--out``; the repository keeps the default prefix's files at the same
paths, and tests/shipped/test_export.py checks they are byte for byte what this writes)::

    collector/otel-collector.yaml                          OpenTelemetry Collector (contrib)
    collector/otel-collector-front.yaml, -backend.yaml     ... scaled out: a routing tier, N backends
    collector/prometheus.yml                               Prometheus scrape jobs + rule files
    collector/prometheus-demo.yml                          ... for `store-metrics demo --serve`
    collector/rules.yml, rules.test.yml                    task-side rules + promtool tests
    collector/server-rules.yml, server-rules.test.yml      API server rules + promtool tests
    collector/watcher-rules.yml, watcher-rules.test.yml    asset watchers' alert + promtool tests
    collector/footprint-rules.yml, footprint-rules.test.yml  state store footprint rules + tests
    collector/alertmanager-inhibit.yml                     Alertmanager inhibition rules
    collector/statsd-mapping.yml                           statsd_exporter, task side
    collector/statsd-mapping-server.yml                    statsd_exporter, API server side
    collector/statsd-mapping-inventory.yml                 statsd_exporter, the inventory's gauges
    dashboards/store-metrics.json                          Grafana dashboard
    dashboards/provisioning/datasources/store-metrics.yml  Grafana data source
    dashboards/provisioning/dashboards/store-metrics.yml   Grafana dashboard provider
    helm/values-store-metrics.yaml                         Airflow Helm chart values, StatsD topology
    helm/values-store-metrics-api-server.yaml              ... count_at = api_server topology
    helm/values-store-metrics-dev.yaml                     ... for a trial (Airflow's example DAGs)
    helm/Dockerfile                                        Airflow image with the package's wheel
    helm/merge_values.py                                   merge values files, joining their lists
    kubernetes/base/                                       PrometheusRules, dashboard ConfigMap, inventory
    kubernetes/statsd/, kubernetes/api-server/             + the ServiceMonitor / PodMonitors of a topology
    datadog/dashboard.json                                 Datadog dashboard (DogStatsD series)
    datadog/monitors/*.json                                Datadog monitors, one per alert

The Grafana dashboard and the Datadog dashboard and monitors are built from the catalogue for the
prefix and the export settings (``settings``: ``--set NAME=VALUE``) by ``grafana`` and ``datadog``
(``BUILT``, given a ``render_context.RenderContext``); every other file but Helm's is a template
(``templates/``) filled in by ``templating`` with the catalogue's names and the settings.
``prometheus.yml`` loads the rule files by name from its own folder and the promtool tests load
their rules the same way, so ``collector/`` works as it is written. ``helm/`` and ``kubernetes/``
wrap the text of other files (the statsd mappings, the rules, the dashboard): they are rendered
after ``FILES``, from what those rendered (``WRAPPERS``).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path, PurePosixPath

from store_metrics import catalogue
from store_metrics.naming import is_valid_prefix

from . import (
    helm,
    kubernetes,
    otel_collector,
    rule_test_files,
    rules,
    settings,
    statsd_mappings,
    templating,
    victoriametrics,
)
from .datadog import dashboard as datadog_dashboard
from .datadog import monitors as datadog_monitors
from .folders import COLLECTOR, DASHBOARDS, DATADOG, FOLDERS, HELM, KUBERNETES
from .grafana import dashboard as grafana_dashboard
from .render_context import RenderContext

__all__ = [
    "BUILT",
    "COLLECTOR",
    "DASHBOARDS",
    "DATADOG",
    "FILES",
    "FOLDERS",
    "HELM",
    "KUBERNETES",
    "TEMPLATES",
    "WRAPPERS",
    "render_all",
    "run",
]

_PROVISIONING = DASHBOARDS / "provisioning"
_MONITORS = DATADOG / "monitors"


#: Relative path -> its template (under ``templates/``), in the order the files are written.
TEMPLATES: dict[PurePosixPath, str] = {
    COLLECTOR / "otel-collector.yaml": "otel-collector.yaml",
    COLLECTOR / "otel-collector-front.yaml": "otel-collector-front.yaml",
    COLLECTOR / "otel-collector-backend.yaml": "otel-collector-backend.yaml",
    COLLECTOR / "prometheus.yml": "prometheus.yml",
    COLLECTOR / "prometheus-demo.yml": "prometheus-demo.yml",
    **{
        COLLECTOR / name: name
        for rules in ("rules", "server-rules", "watcher-rules", "footprint-rules")
        for name in (f"{rules}.yml", f"{rules}.test.yml")
        if name not in rule_test_files.BUILDERS
    },
    COLLECTOR / "alertmanager-inhibit.yml": "alertmanager-inhibit.yml",
    **{COLLECTOR / name: name for name in statsd_mappings.FILES},
    _PROVISIONING / "datasources" / "store-metrics.yml": "grafana-datasource.yml",
    _PROVISIONING / "dashboards" / "store-metrics.yml": "grafana-dashboard-provider.yml",
}


def _monitor(name: str) -> Callable[[RenderContext], str]:
    return lambda ctx: datadog_monitors.render(name, ctx)


#: Relative path -> its builder (the export's prefix and settings -> the file's text): the JSON
#: files, built from the catalogue (no header line: JSON has no comments).
BUILT: dict[PurePosixPath, Callable[[RenderContext], str]] = {
    DASHBOARDS / "store-metrics.json": grafana_dashboard.render,
    DATADOG / "dashboard.json": datadog_dashboard.render,
    **{_MONITORS / name: _monitor(name) for name in sorted(datadog_monitors.MONITORS)},
}
#: A template's own tokens (beyond catalogue names), computed when the file is written from the
#: prefix and the settings' values.
_VALUES: dict[str, Callable[[str, Mapping[str, str]], Mapping[str, str]]] = {
    "otel-collector.yaml": lambda prefix, given: otel_collector.values(),
    "otel-collector-front.yaml": lambda prefix, given: otel_collector.values(),
    "rules.yml": rules.values,
    "server-rules.test.yml": rule_test_files.server_values,
    **{name: partial(statsd_mappings.values, name) for name in statsd_mappings.FILES},
}


#: The promtool tests generated for the export's settings (``rule_test_files``), after the rules.
TESTS: tuple[PurePosixPath, ...] = tuple(COLLECTOR / name for name in rule_test_files.BUILDERS)
#: The paths written from templates, built, and the generated tests, in order; ``WRAPPERS`` add the
#: ones that wrap them.
FILES: tuple[PurePosixPath, ...] = (*TEMPLATES, *BUILT, *TESTS)

#: Renderers of files that wrap the text of ``FILES`` (rendered first): (files, prefix) -> files.
WRAPPERS: tuple[Callable[[Mapping[PurePosixPath, str], str], dict[PurePosixPath, str]], ...] = (
    helm.render,
    kubernetes.render,
)


def _check_prefix(prefix: str) -> None:
    if not is_valid_prefix(prefix):
        raise ValueError(
            f"invalid metric prefix {prefix!r}: dot-separated words of letters, digits and '_', "
            "each starting with a letter (or empty)"
        )


def _computed(name: str, prefix: str, given: Mapping[str, str]) -> Mapping[str, str]:
    compute = _VALUES.get(name)
    return compute(prefix, given) if compute else {}


def _check_target(target: str) -> None:
    if target not in victoriametrics.TARGETS:
        raise ValueError(
            f"invalid --target {target!r}: the rule engine the rules are written for, one of "
            + ", ".join(victoriametrics.TARGETS)
        )


def render_all(
    prefix: str = catalogue.DEFAULT_PREFIX,
    changes: Mapping[str, str] | None = None,
    tests: bool = True,
    target: str = "prometheus",
) -> dict[PurePosixPath, str]:
    """Every file's text for ``prefix`` and the settings ``changes`` (others at their defaults), by path
    relative to the output folder; without ``tests``, not the generated promtool tests (they take
    seconds for long windows). ``target`` ``victoriametrics`` adapts the rule files and their tests
    to vmalert (``victoriametrics``). Raises ``ValueError`` for a bad prefix, setting or
    target."""
    _check_prefix(prefix)
    _check_target(target)
    given = settings.values(changes)
    files = {
        path: templating.render(name, prefix, {**given, **_computed(name, prefix, given)})
        for path, name in TEMPLATES.items()
    }
    ctx = RenderContext(prefix, given)
    files.update({path: build(ctx) for path, build in BUILT.items()})
    rule_files = {path.name: text for path, text in files.items() if path.parent == COLLECTOR}
    for path in TESTS if tests else ():
        files[path] = templating.generated_header(prefix, "store_metrics.shipped.rule_test_files") + (
            rule_test_files.render(path.name, prefix, given, rule_files)
        )
    if target == "victoriametrics":
        files = victoriametrics.adapt(files, COLLECTOR)
    for wrap in WRAPPERS:
        files.update(wrap(dict(files), prefix))
    return files


def _sync(files: Mapping[PurePosixPath, str], out: Path, check: bool) -> list[Path]:
    """Write ``files`` under ``out``; with ``check``, write nothing and return the out-of-date paths."""
    result = []
    for relative, text in files.items():
        path = out.joinpath(relative)
        data = text.encode("utf-8")
        if check:
            if not path.is_file() or path.read_bytes() != data:
                result.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        result.append(path)
    return result


def _finish(paths: list[Path], check: bool, again: str) -> int:
    if check:
        for path in paths:
            print(f"out of date: {path}", file=sys.stderr)
        if paths:
            print(f"re-run: {again}", file=sys.stderr)
        return 1 if paths else 0
    for path in paths:
        print(f"wrote {path}")
    return 0


def run(
    out: Path,
    prefix: str = catalogue.DEFAULT_PREFIX,
    check: bool = False,
    assignments: Sequence[str] = (),
    target: str = "prometheus",
) -> int:
    """``store-metrics export``: write the files, or with ``check`` list the out-of-date ones (exit 1).

    ``assignments`` are the ``--set NAME=VALUE`` options, ``target`` the ``--target``; a bad prefix,
    setting or target exits 2.
    """
    try:
        files = render_all(prefix, settings.parse(list(assignments)), target=target)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sets = "".join(f" --set {shlex.quote(a)}" for a in assignments)
    if target != "prometheus":
        sets += f" --target {target}"
    again = f"store-metrics export --out {shlex.quote(str(out))} --prefix {shlex.quote(prefix)}{sets}"
    return _finish(_sync(files, out, check), check, again)
