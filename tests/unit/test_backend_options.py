"""Configuration-time errors: a bad option or a missing extra fails ``configure()`` clearly.

Nothing is started when configuring fails: the previous emitter (here none) stays active.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest

import store_metrics
from store_metrics import ConfigError, MissingExtraError
from store_metrics.contracts import NullEmitter


def workers() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "store-metrics-emitter" and t.is_alive())


SECONDS = "a number of seconds > 0"
PORT = "an integer port from 1 to 65535"
HOST = "a host name or IP address"


@pytest.mark.parametrize(
    ("backend", "options", "option", "accepted"),
    [
        ("prom", {}, "backend", "auto, airflow, otel, dogstatsd, statsd, none"),
        ("statsd", {"port": 0}, "port", PORT),
        ("statsd", {"port": 70000}, "port", PORT),
        ("statsd", {"port": "http"}, "port", PORT),
        ("dogstatsd", {"port": 81.5}, "port", PORT),
        ("statsd", {"host": ""}, "host", HOST),
        ("dogstatsd", {"host": "bad host"}, "host", HOST),
        ("statsd", {"host": "http://collector/"}, "host", HOST),
        ("statsd", {"prefix": "1airflow"}, "prefix", "dot-separated words"),
        ("dogstatsd", {"prefix": "air flow"}, "prefix", "dot-separated words"),
        ("otel", {"exporter": "zipkin"}, "otel_exporter", "otlp, prometheus, console"),
        ("otel", {"temporality": "both"}, "otel_temporality", "delta, cumulative"),
        ("otel", {"prometheus_port": -1}, "prometheus_port", PORT),
        ("otel", {"prometheus_host": ""}, "prometheus_host", HOST),
        ("statsd", {"flush_interval": 0}, "flush_interval", SECONDS),
        ("none", {"flush_interval": -1}, "flush_interval", SECONDS),
        ("otel", {"flush_interval": "soon"}, "flush_interval", SECONDS),
        ("statsd", {"flush_interval": float("inf")}, "flush_interval", SECONDS),
        ("statsd", {"flush_timeout": -0.5}, "flush_timeout", "a number of seconds >= 0"),
        ("statsd", {"exit_timeout": "never"}, "exit_timeout", "a number of seconds >= 0"),
        ("none", {"max_series": 0}, "max_series", "an integer >= 1"),
        ("none", {"max_series": True}, "max_series", "an integer >= 1"),
    ],
)
def test_a_bad_value_names_the_option_and_what_it_accepts(
    backend: str, options: dict[str, Any], option: str, accepted: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        store_metrics.configure(backend, **options)
    error = caught.value
    assert error.option == option
    assert accepted in error.accepted
    value = backend if option == "backend" else next(iter(options.values()))
    assert (
        str(error)
        == f"[store_metrics] {option} = {value!r} is not valid: accepted values are {error.accepted}"
    )
    assert isinstance(store_metrics.get_emitter(), NullEmitter)
    assert workers() == 0


def test_the_exact_text_for_an_unknown_backend() -> None:
    with pytest.raises(ConfigError) as caught:
        store_metrics.configure("prom")
    assert str(caught.value) == (
        "[store_metrics] backend = 'prom' is not valid: "
        "accepted values are auto, airflow, otel, dogstatsd, statsd, none"
    )


def test_a_bad_otlp_protocol_variable_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", raising=False)
    with pytest.raises(
        ConfigError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL = 'http/json' .* http/protobuf, grpc"
    ):
        store_metrics.configure("otel")


def test_values_are_accepted_case_and_type_tolerant() -> None:
    emitter = store_metrics.configure("otel", exporter="Console", temporality="DELTA", flush_interval="5")
    assert emitter.flush_interval == 5.0
    emitter = store_metrics.configure("dogstatsd", port="8125", host="localhost")
    assert emitter.backend.describe() == "dogstatsd udp://localhost:8125 prefix='airflow'"


# -- missing extras ----------------------------------------------------------------------------


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``modules`` unimportable, as if their distribution were not installed.

    ``None`` in ``sys.modules`` makes an import fail; already imported submodules are taken out
    so they are imported (and fail) afresh, and so are our adapters.
    """
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)
        for loaded in [m for m in sys.modules if m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)  # restored after the test
    for name in list(sys.modules):
        if name.startswith("store_metrics.backends."):
            monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize(
    ("backend", "options", "hidden", "message"),
    [
        ("otel", {}, ["opentelemetry"], ("opentelemetry", "otel")),
        ("airflow", {}, ["airflow.sdk.observability"], ("airflow.sdk.observability", "airflow")),
        (
            "otel",
            {"exporter": "prometheus"},
            ["opentelemetry.exporter.prometheus"],
            ("opentelemetry-exporter-prometheus", "otel"),
        ),
        ("otel", {"exporter": "prometheus"}, ["prometheus_client"], ("prometheus-client", "otel")),
        (
            "otel",
            {"exporter": "otlp"},
            ["opentelemetry.exporter.otlp.proto.http"],
            ("opentelemetry-exporter-otlp-proto-http", "otel"),
        ),
    ],
)
def test_a_missing_extra_is_a_clear_error_at_configure_time(
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    options: dict[str, Any],
    hidden: list[str],
    message: tuple[str, str],
) -> None:
    missing, extra = message
    hide(monkeypatch, *hidden)
    with pytest.raises(MissingExtraError) as caught:
        store_metrics.configure(backend, **options)
    assert str(caught.value) == (
        f"store-metrics backend {backend!r} needs the {missing!r} package, which is not installed: "
        f"pip install 'airflow-store-metrics[{extra}]'"
    )
    assert caught.value.extra == extra
    assert isinstance(caught.value, ImportError)
    assert isinstance(store_metrics.get_emitter(), NullEmitter)
    assert workers() == 0


def test_grpc_protocol_needs_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc")
    hide(monkeypatch, "grpc")
    with pytest.raises(MissingExtraError, match=r"needs the 'grpcio' package.*airflow-store-metrics\[otel\]"):
        store_metrics.configure("otel")


def test_a_provider_passed_in_needs_no_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.metrics import MeterProvider

    hide(monkeypatch, "opentelemetry.exporter.otlp.proto.http", "opentelemetry.exporter.prometheus")
    emitter = store_metrics.configure("otel", meter_provider=MeterProvider(shutdown_on_exit=False))
    assert emitter.flush(5.0)


@pytest.mark.parametrize(("backend", "library"), [("statsd", "statsd"), ("dogstatsd", "datadog")])
def test_the_statsd_backends_need_no_client_library(
    monkeypatch: pytest.MonkeyPatch, backend: str, library: str
) -> None:
    # Every byte comes from store_metrics.backends.statsd_lines: with the old client library hidden,
    # they still work.
    hide(monkeypatch, library)
    emitter = store_metrics.configure(backend, host="127.0.0.1", port=9)
    assert emitter.backend.describe().startswith(f"{backend} udp://127.0.0.1:9")
    assert sys.modules[library] is None  # still hidden: nothing imported it


def test_a_misspelt_argument_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError) as caught:
        store_metrics.configure("statsd", prot=9125)
    assert caught.value.option == "prot"
    assert "[store_metrics] prot" in str(caught.value) and "port" in caught.value.accepted


def test_an_option_another_backend_takes_is_ignored_not_an_error() -> None:
    # One set of settings serves every backend: `exporter` is otel's, statsd ignores it.
    emitter = store_metrics.configure("statsd", exporter="prometheus", host="127.0.0.1")
    assert emitter.backend.describe().startswith("statsd udp://127.0.0.1:8125")
