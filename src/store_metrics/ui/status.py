"""What ``store-metrics check`` says about the State store views: on or off, and whether the
Prometheus they query answers (one instant query, ``ui_timeout``). Never changes its exit code: the
views are optional."""

from __future__ import annotations

import re

from ..catalogue import metric_for
from ..config.reader import OptionValues
from .calls import COUNTERS
from .prometheus import Prometheus, PrometheusError
from .routes import NAME, PAGE_ROUTE, TAB_ROUTE


def check_lines(options: OptionValues) -> list[str]:
    if not options.ui:
        return ["ui: off (ui = false): no State store tab or page in Airflow's UI"]
    lines = [
        f"ui: a {NAME} tab on each DAG's page (dags/<dag_id>/plugin/{TAB_ROUTE}) and a {NAME} page "
        f"(plugin/{PAGE_ROUTE}), served by the API server"
    ]
    url = options.ui_prometheus_url
    if not url:
        lines.append("ui: no ui_prometheus_url: the tab shows what the state store holds, not the calls")
    else:
        series = [metric_for(store, outcome).prometheus_name(options.prefix) for store, outcome in COUNTERS]
        names = "|".join(re.escape(name) for name in series)
        matchers = options.ui_prometheus_selector
        deployment = f",{matchers}" if matchers else ""
        expr = f'count by (__name__) ({{__name__=~"{names}"{deployment}}})'
        where = f" with {matchers}" if matchers else ""
        try:
            held = len(Prometheus.from_options(options).query(expr))
            lines.append(
                f"ui: Prometheus at {url} answers; it holds {held} of the {len(series)} counters{where}"
            )
        except PrometheusError as exc:
            lines.append(
                f"ui: warning: Prometheus at {url} does not answer ({exc.detail}): the tab will say {exc}"
            )
    if options.ui_grafana_url:
        lines.append(f"ui: the tab links to Grafana at {options.ui_grafana_url}")
    return lines
