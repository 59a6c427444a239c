"""``server-rules.yml`` and ``server-rules.test.yml``: the API server side's Prometheus rules.

Recording rules: state store requests per second by store, operation and outcome; request
duration quantiles; the share of time each worker's event loop was stalled; long stalls per
second. Alerting rules: sustained stalls. Built from the catalogue; the promtool unit tests are
hand-written (``templates/server-rules.test.yml``) with the series names filled in for the prefix.
"""

from __future__ import annotations

from typing import Any

from store_metrics import catalogue

from . import rule_file, templating
from .promql import by

__all__ = [
    "API_DURATION",
    "API_LONG_STALLS",
    "API_LOOP_STALLED",
    "API_RECORDED",
    "API_REQUESTS",
    "FILENAME",
    "TESTS_FILENAME",
    "alerting_rules",
    "recording_rules",
    "render",
    "render_tests",
    "rules_document",
]

FILENAME = "server-rules.yml"
TESTS_FILENAME = "server-rules.test.yml"

#: Recorded series of the API server side.
API_REQUESTS = "store_operation_outcome:store_metrics_api_requests:rate5m"
API_DURATION = "store_operation:store_metrics_api_request_duration_ms:quantile_rate5m"
API_LOOP_STALLED = "worker:store_metrics_api_loop_stalled:ratio_rate5m"
API_LONG_STALLS = "worker:store_metrics_api_loop_long_stalls:rate5m"
API_RECORDED = (API_REQUESTS, API_DURATION, API_LOOP_STALLED, API_LONG_STALLS)
#: A stall at least this long (ms) is a long stall in the rules; must be a stall bucket bound.
LONG_STALL_MS = 100
#: The loop may be stalled at most this fraction of the time (5%: 50 ms per second) ...
LOOP_STALLED_RATIO_THRESHOLD = 0.05
#: ... and have at most this many long stalls per second (one a minute) before the alerts fire.
LONG_STALLS_PER_SECOND_THRESHOLD = 1 / 60

_HEADER = """\
# API server side (docs/api-server-health.md). Recording rules: state store requests per
# second by store, operation and outcome; request duration quantiles; the share of time each
# worker's event loop was stalled; long stalls per second. Alerting rules: sustained stalls.
# Bucket bounds are matched as le="100" or le="100.0", whichever the path writes.
# Unit tests: promtool test rules collector/server-rules.test.yml
"""
_WHAT_TO_DO = (
    "See https://store-metrics.github.io/airflow-store-metrics/api-server-health/#when-the-stall-alert-fires"
)


def _le(bound: float) -> str:
    """A matcher for one bucket bound, however the path spells it: ``le="100"`` (Go exporters)
    or ``le="100.0"`` (the Python OpenTelemetry exporter, Prometheus 3 normalisation)."""
    text = f"{bound:g}"
    return f'le=~"{text}(\\\\.0)?"' if "." not in text else f'le="{text}"'


def _requests_rule(prefix: str) -> dict[str, Any]:
    """State store requests per second the API server answered, by store, operation, outcome."""
    requests = catalogue.SERVER_REQUESTS.prometheus_name(prefix)
    labels = (catalogue.STORE, catalogue.OPERATION, catalogue.OUTCOME)
    return {"record": API_REQUESTS, "expr": f"sum {by(labels)}(rate({requests}[5m]))"}


def _duration_rules(prefix: str) -> list[dict[str, Any]]:
    """Request duration quantiles by store and operation (ms)."""
    duration = catalogue.SERVER_DURATION.prometheus_name(prefix)
    labels = ("le", catalogue.STORE, catalogue.OPERATION)
    return [
        {
            "record": API_DURATION,
            "expr": f"histogram_quantile({quantile}, sum {by(labels)}(rate({duration}_bucket[5m])))",
            "labels": {"quantile": quantile},
        }
        for quantile in ("0.5", "0.99")
    ]


def _stall_rules(prefix: str) -> list[dict[str, Any]]:
    """Share of time each worker's loop was stalled, and stalls of at least LONG_STALL_MS per second."""
    stall = catalogue.LOOP_STALL.prometheus_name(prefix)
    worker = by((catalogue.WORKER,))
    if LONG_STALL_MS not in catalogue.STALL_BUCKETS_MS:
        raise ValueError(f"LONG_STALL_MS {LONG_STALL_MS} is not a stall bucket bound")
    return [
        # Stalled ms per second / 1000.
        {"record": API_LOOP_STALLED, "expr": f"sum {worker}(rate({stall}_sum[5m])) / 1000"},
        # All stalls minus those at or below the bound.
        {
            "record": API_LONG_STALLS,
            "expr": f"sum {worker}(rate({stall}_count[5m]))\n- sum {worker}"
            f"(rate({stall}_bucket{{{_le(LONG_STALL_MS)}}}[5m]))",
        },
    ]


def recording_rules(prefix: str) -> list[dict[str, Any]]:
    return [_requests_rule(prefix), *_duration_rules(prefix), *_stall_rules(prefix)]


def _loop_stalled_alert() -> dict[str, Any]:
    return {
        "alert": "StateStoreApiServerLoopStalled",
        "expr": f"{API_LOOP_STALLED} > {LOOP_STALLED_RATIO_THRESHOLD}",
        "for": "10m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": (
                "API server worker {{ $labels.worker }}: event loop stalled "
                "{{ $value | humanizePercentage }} of the time"
            ),
            "description": (
                "For 10 minutes the event loop of API server worker {{ $labels.worker }} has been "
                f"unable to serve anything more than {LOOP_STALLED_RATIO_THRESHOLD:.0%} of the time: "
                "every request it serves (task heartbeats, state store calls, the UI) waits that much "
                "longer. " + _WHAT_TO_DO
            ),
        },
    }


def _long_stalls_alert(prefix: str) -> dict[str, Any]:
    return {
        "alert": "StateStoreApiServerLongStalls",
        "expr": f"{API_LONG_STALLS} > {LONG_STALLS_PER_SECOND_THRESHOLD}",
        "for": "15m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": (
                f"API server worker {{{{ $labels.worker }}}}: stalls of {LONG_STALL_MS} ms or more, "
                "{{ $value | humanize }} per second"
            ),
            "description": (
                f"For 15 minutes the event loop of API server worker {{{{ $labels.worker }}}} has had "
                f"stalls of {LONG_STALL_MS} ms or longer more than once a minute. "
                f"{catalogue.LONG_STALLS.prometheus_name(prefix)} says which state store routes were in "
                "flight. " + _WHAT_TO_DO
            ),
        },
    }


def alerting_rules(prefix: str) -> list[dict[str, Any]]:
    return [_loop_stalled_alert(), _long_stalls_alert(prefix)]


def rules_document(prefix: str) -> dict[str, Any]:
    return rule_file.document("store-metrics-server", recording_rules(prefix), alerting_rules(prefix))


def render(prefix: str) -> str:
    """``server-rules.yml``."""
    return rule_file.render(rules_document(prefix), prefix, _HEADER)


def render_tests(prefix: str) -> str:
    """``server-rules.test.yml``: promtool unit tests of :func:`render`'s rules."""
    return templating.render(TESTS_FILENAME, prefix)
