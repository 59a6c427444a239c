"""[store_metrics] configuration: defaults follow [metrics], bad values name the option and the choices."""

from __future__ import annotations

import pytest

from store_metrics.config.reader import OPTIONS, OptionValues, environment_reader, read_options
from store_metrics.errors import ConfigError
from testbed.repository import ROOT


def settings(**env: str) -> OptionValues:
    environ = {f"AIRFLOW__{k.upper()}": v for k, v in env.items()}
    return read_options(environment_reader(environ), environ=environ)


def test_defaults_follow_airflow_metrics_section() -> None:
    s = settings()
    # No [metrics] backend either: auto sends nowhere, and says why.
    assert (s.enabled, s.backend, s.host, s.port, s.prefix) == (True, "none", "localhost", 8125, "airflow")
    assert s.sends_nowhere and "[metrics] enables no backend" in s.backend_reason
    assert (s.otel_exporter, s.otel_temporality, s.prometheus_port, s.flush_interval) == (
        "otlp",
        "delta",
        9464,
        10.0,
    )
    s = settings(
        metrics__statsd_host="statsd.internal", metrics__statsd_port="9125", metrics__statsd_prefix="af"
    )
    assert (s.host, s.port, s.prefix) == ("statsd.internal", 9125, "af")
    assert s.sources["host"] == "[metrics] statsd_host"
    # the OTel backend takes otel_prefix, StatsD ones statsd_prefix
    s = settings(store_metrics__backend="otel", metrics__otel_prefix="ot", metrics__statsd_prefix="sd")
    assert s.prefix == "ot"


def test_own_section_wins_over_metrics() -> None:
    s = settings(metrics__statsd_host="a", store_metrics__host="b", store_metrics__backend="DogStatsD")
    assert (s.host, s.backend, s.sources["host"]) == ("b", "dogstatsd", "[store_metrics] host")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "backend",
            "prometheus",
            "[store_metrics] backend = 'prometheus' is not valid: "
            "accepted values are auto, airflow, otel, dogstatsd, statsd, none",
        ),
        (
            "enabled",
            "maybe",
            "[store_metrics] enabled = 'maybe' is not valid: accepted values are true, false",
        ),
        (
            "port",
            "99999",
            "[store_metrics] port = '99999' is not valid: "
            "accepted values are an integer port from 1 to 65535",
        ),
        ("prometheus_port", "http", "[store_metrics] prometheus_port = 'http' is not valid"),
        (
            "otel_exporter",
            "jaeger",
            "[store_metrics] otel_exporter = 'jaeger' is not valid: "
            "accepted values are otlp, prometheus, console",
        ),
        ("otel_temporality", "both", "accepted values are delta, cumulative"),
        (
            "max_udp_rate",
            "-1",
            "[store_metrics] max_udp_rate = '-1' is not valid: accepted values are an integer >= 0",
        ),
        ("max_udp_rate", "4MiB", "[store_metrics] max_udp_rate = '4MiB' is not valid"),
        (
            "flush_interval",
            "0",
            "[store_metrics] flush_interval = '0' is not valid: accepted values are a number of seconds > 0",
        ),
        ("flush_interval", "soon", "flush_interval = 'soon' is not valid"),
        (
            "flush_timeout",
            "-1",
            "flush_timeout = '-1' is not valid: accepted values are a number of seconds >= 0",
        ),
        ("prefix", "air flow", "[store_metrics] prefix = 'air flow' is not valid"),
        ("prefix", "airflow.", "prefix = 'airflow.' is not valid"),
        (
            "worker_label",
            "pod",
            "[store_metrics] worker_label = 'pod' is not valid: accepted values are auto, host_slot, slot",
        ),
        (
            "host",
            "bad host",
            "[store_metrics] host = 'bad host' is not valid: accepted values are a host name or IP address",
        ),
    ],
)
def test_bad_values_name_the_option_and_the_accepted_values(option: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings(**{f"store_metrics__{option}": value})
    assert message in str(err.value)
    assert err.value.option == option


@pytest.mark.parametrize(
    ("env", "style"),
    [
        ({}, "host_slot"),  # auto, no backend
        ({"store_metrics__backend": "statsd"}, "host_slot"),  # one statsd_exporter holds every pod's
        ({"store_metrics__backend": "otel"}, "host_slot"),  # OTLP: one Collector holds every pod's
        ({"store_metrics__backend": "otel", "store_metrics__otel_exporter": "prometheus"}, "slot"),
        ({"store_metrics__backend": "statsd", "store_metrics__worker_label": "slot"}, "slot"),
        (
            {
                "store_metrics__backend": "otel",
                "store_metrics__otel_exporter": "prometheus",
                "store_metrics__worker_label": "HOST_SLOT",
            },
            "host_slot",
        ),
    ],
)
def test_worker_label_auto_is_the_slot_alone_only_where_each_worker_is_scraped(
    env: dict[str, str], style: str
) -> None:
    assert settings(**env).worker_label_style == style


def test_unknown_option_is_an_error_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        settings(store_metrics__backnd="otel")
    assert "[store_metrics] backnd" in str(err.value)
    assert "backend" in err.value.accepted and "flush_interval" in err.value.accepted


def test_the_docs_document_every_option() -> None:

    page = (ROOT / "docs" / "configure.md").read_text()
    for option in OPTIONS:
        assert f"`{option}`" in page, option


def test_settings_reach_the_backend_factories() -> None:
    kwargs = settings(store_metrics__backend="statsd", store_metrics__port="9999").configure_kwargs()
    assert kwargs["backend"] == "statsd" and kwargs["port"] == 9999 and kwargs["flush_interval"] == 10.0


def test_the_docs_configuration_table_is_the_option_table() -> None:

    from store_metrics.config import options

    page = (ROOT / "docs" / "configure.md").read_text()
    block = page.split("<!-- options:start -->\n", 1)[1].split("<!-- options:end -->", 1)[0]
    assert block == options.markdown_table()


def test_settings_hold_exactly_the_config_options() -> None:
    import dataclasses

    fields = [f.name for f in dataclasses.fields(OptionValues) if f.name not in ("sources", "backend_reason")]
    assert fields == list(OPTIONS)


@pytest.mark.parametrize("backend", ["statsd", "dogstatsd", "otel", "airflow", "none"])
def test_each_backend_takes_exactly_the_keywords_the_table_gives_it(backend: str) -> None:
    import importlib
    import inspect

    from store_metrics.config import options

    module = importlib.import_module(options.BACKENDS[backend][0])
    parameters = inspect.signature(module.create).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters), "no **kwargs catch-all"
    assert {p.name for p in parameters} == set(options.backend_options(backend))
