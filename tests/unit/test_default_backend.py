"""With no ``[store_metrics]`` section the counts keep their tags, whatever Airflow's ``[metrics]`` says.

``backend = auto`` (the default) goes through Airflow's own sender only where that sender keeps the
tags, and otherwise sends store-metrics' own tagged lines to the same receiver; with no ``[metrics]``
backend it sends nothing and says so. An explicit ``backend = airflow`` on a sender that would drop
tags is refused. Here: every ``[metrics]`` setting Airflow supports, read the way Airflow reads them
(environment variables through the same reader the plugin uses outside Airflow), and the command a
user runs to check. The end-to-end runs (a real DAG under ``dag.test()`` on the Helm chart's default
``[metrics]``, to a real UDP socket) are in test_airflow_scenarios.py.
"""

from __future__ import annotations

import pytest

from store_metrics.config.auto_backend import read_airflow_metrics
from store_metrics.config.reader import OptionValues, environment_reader, read_options
from store_metrics.errors import TagsLostError
from support.cli import run_cli


def settings(**metrics: str) -> OptionValues:
    environ = {f"AIRFLOW__{k.upper()}": v for k, v in metrics.items()}
    return read_options(environment_reader(environ), environ=environ)


#: The Helm chart's default: StatsD on, no tag flag, its statsd_exporter as the receiver.
CHART = {
    "metrics__statsd_on": "True",
    "metrics__statsd_host": "airflow-statsd",
    "metrics__statsd_port": "9125",
}


@pytest.mark.parametrize(
    ("metrics", "backend", "why"),
    [
        # The chart's default: Airflow's StatsD client would drop every tag.
        (CHART, "statsd", "statsd_on without statsd_influxdb_enabled"),
        ({**CHART, "metrics__statsd_influxdb_enabled": "True"}, "airflow", "keeps the tags"),
        ({"metrics__statsd_datadog_enabled": "true"}, "airflow", "keeps the tags"),
        (
            {"metrics__statsd_datadog_enabled": "t", "metrics__statsd_datadog_metrics_tags": "False"},
            "dogstatsd",
            "statsd_datadog_metrics_tags = False",
        ),
        ({"metrics__otel_on": "1"}, "airflow", "keeps the tags"),
        # DogStatsD wins over StatsD, StatsD over OTel: Airflow's own order.
        ({"metrics__statsd_on": "True", "metrics__otel_on": "True"}, "statsd", "statsd_influxdb_enabled"),
        # A tag-name block list that hits one of ours, and an allow list that hides our names.
        (
            {
                **CHART,
                "metrics__statsd_influxdb_enabled": "True",
                "metrics__statsd_disabled_tags": "job_id,operator",
            },
            "statsd",
            "statsd_disabled_tags drops operator",
        ),
        (
            {"metrics__otel_on": "True", "metrics__metrics_allow_list": "scheduler,executor"},
            "otel",
            "metrics_allow_list/metrics_block_list drops",
        ),
        ({"metrics__statsd_on": "False"}, "none", "[metrics] enables no backend"),
    ],
)
def test_auto_keeps_the_tags_on_every_metrics_setting(
    metrics: dict[str, str], backend: str, why: str
) -> None:
    s = settings(**metrics)
    assert s.backend == backend
    assert why in s.backend_reason
    assert s.sources["backend"] == "default"


def test_auto_sends_to_the_receiver_airflow_sends_to() -> None:
    s = settings(**CHART, metrics__statsd_prefix="af")
    assert (s.backend, s.host, s.port, s.prefix) == ("statsd", "airflow-statsd", 9125, "af")
    assert s.sources["host"] == "[metrics] statsd_host"


def test_airflows_default_tag_block_list_drops_none_of_ours() -> None:
    # Airflow's own default for statsd_disabled_tags is "job_id,run_id": run_id must not hide run_type.
    airflow = read_airflow_metrics(
        environment_reader(
            {"AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_DISABLED_TAGS": "job_id,run_id"}
        )
    )
    assert airflow.disabled_tags == ()


def test_an_explicit_airflow_backend_that_would_drop_the_tags_is_refused() -> None:
    with pytest.raises(TagsLostError) as caught:
        settings(store_metrics__backend="airflow", **CHART)
    assert str(caught.value) == (
        "[store_metrics] backend = 'airflow' would send the counts without their tags: through Airflow's "
        "[metrics] every tag is dropped ([metrics] statsd_on without statsd_influxdb_enabled). Remove the "
        "backend option (the default, auto, sends its own tagged lines to the same receiver), or change "
        "[metrics] so that nothing is dropped"
    )
    # The same backend on a sender that keeps the tags is taken as it is.
    assert settings(
        store_metrics__backend="airflow", **CHART, metrics__statsd_influxdb_enabled="True"
    ).backend == ("airflow")


def _env(**metrics: str) -> dict[str, str]:
    return {f"AIRFLOW__{k.upper()}": v for k, v in metrics.items()}


def test_check_on_the_charts_default_says_what_auto_chose_and_that_tags_are_kept() -> None:
    proc = run_cli("check", **_env(**{**CHART, "metrics__statsd_host": "127.0.0.1"}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "backend = auto chose 'statsd': through Airflow's StatsD client ([metrics] statsd_on) every tag"
        in proc.stdout
    )
    assert (
        "tags: kept: dag_id, task_id, run_type, operator (+ team_name) in every line, InfluxDB style"
        in proc.stdout
    )


def test_check_exits_5_when_an_explicit_airflow_backend_would_lose_the_tags() -> None:
    proc = run_cli("check", **_env(store_metrics__backend="airflow", **CHART))
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "tags: LOST on this path" in proc.stdout
    assert "statsd_on without statsd_influxdb_enabled" in proc.stdout
    assert ": ok" not in proc.stdout


def test_check_exits_4_when_no_metrics_backend_is_enabled() -> None:
    proc = run_cli("check")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "backend = auto chose 'none': [metrics] enables no backend" in proc.stdout
