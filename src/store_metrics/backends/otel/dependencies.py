"""Which packages each exporter needs besides the SDK, checked (and imported) at configuration time.

A missing one is a ``MissingExtraError`` when the backend is
configured, naming the distribution to install, never an ``ImportError`` on the worker thread.
"""

from __future__ import annotations

import importlib
import importlib.util

from ...errors import MissingExtraError

#: What each exporter needs besides the SDK: (importable module, distribution that brings it).
EXPORTER_NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "otlp:http/protobuf": (
        ("opentelemetry.exporter.otlp.proto.http", "opentelemetry-exporter-otlp-proto-http"),
    ),
    "otlp:grpc": (
        ("opentelemetry.exporter.otlp.proto.grpc", "opentelemetry-exporter-otlp-proto-grpc"),
        ("grpc", "grpcio"),
    ),
    "prometheus": (
        ("opentelemetry.exporter.prometheus", "opentelemetry-exporter-prometheus"),
        ("prometheus_client", "prometheus-client"),
    ),
    "console": (),
}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_exporter(exporter: str, protocol: str) -> None:
    """Import the chosen exporter's packages now; raise ``MissingExtraError`` if one is missing.

    Importing here, on the caller's thread at configuration time (about 40 ms for OTLP/HTTP),
    rather than in ``open()`` on the worker, also means a process that exits right after
    configuring cannot find its exporter half-imported during interpreter shutdown.
    """
    key = f"otlp:{protocol}" if exporter == "otlp" else exporter
    needs = EXPORTER_NEEDS[key]
    for module, distribution in needs:
        if not _importable(module):
            raise MissingExtraError("otel", "otel", distribution)
    modules = [module for module, _ in needs]
    if exporter == "otlp":
        suffix = "grpc" if protocol == "grpc" else "http"
        modules.append(f"opentelemetry.exporter.otlp.proto.{suffix}.metric_exporter")
    distributions = {module.split(".")[0]: distribution for module, distribution in needs}
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing = (exc.name or module).split(".")[0]
            raise MissingExtraError("otel", "otel", distributions.get(missing, missing)) from exc
