"""Fixtures every folder of the suite uses; each folder's own ``conftest.py`` adds what it needs.

The suite is laid out by what a test needs: ``unit/`` the package in process (real sockets on
127.0.0.1, fresh Python processes; no Airflow component running), ``shipped/`` the exported files
and the programs that read them (promtool, Prometheus, Alertmanager, helm, kubectl), ``airflow/``
real Airflow (``dag.test()``, ``airflow standalone``, Celery, its API server and triggerer),
``docs/`` the documentation site, ``bench/`` the benchmarks' own tests (the only ones that import them).
``support/`` holds the test-only helpers, ``deploy/`` the plugins and modules the tests deploy into
Airflow; what the tests share with the benchmarks is the test bed's (``testbed/``, every DAG file too).

Nothing here fakes a backend: the UDP receiver is a real socket on 127.0.0.1 and tests read the
exact datagrams the adapters sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store_metrics.counting import runtime
from support.e2e import E2E_SETTINGS
from support.exported import Exported, export_files
from support.helm_chart import chart_folder
from testbed.udp import UdpReceiver

# The tests that use a pinned peer run last (their build may still be going on: scripts/test).
pytest_plugins = ("support.peer_order",)


@pytest.fixture
def udp_receiver() -> Iterator[UdpReceiver]:
    receiver = UdpReceiver()
    yield receiver
    receiver.close()


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """``store-metrics export`` for a prefix and export settings, written once per session.

    ``exported("myco.airflow")`` is the folder ``store-metrics export --prefix myco.airflow`` wrote;
    ``exported(error_ratio="0.1")`` the one ``--set error_ratio=0.1`` wrote. Read it, never change
    it: other tests read the same folder.
    """
    made: dict[tuple[str | None, tuple[tuple[str, str], ...]], Path] = {}

    def export(prefix: str | None = None, **settings: str) -> Path:
        key = (prefix, tuple(sorted(settings.items())))
        if key not in made:
            out = tmp_path_factory.mktemp("exported") / "out"
            made[key] = export_files(out, prefix, **settings)
        return made[key]

    return export


@pytest.fixture(scope="session")
def e2e_export(exported: Exported) -> Path:
    """The export the Prometheus end-to-end tests load: rules recorded every second
    (``support.e2e.E2E_SETTINGS``)."""
    return exported(**E2E_SETTINGS)


@pytest.fixture(scope="session")
def chart() -> Path:
    """The chart/ folder of an apache/airflow checkout (``STORE_METRICS_AIRFLOW_CHART``), or a skip."""
    return chart_folder()


@pytest.fixture(autouse=True)
def _reset_active_emitter() -> Iterator[None]:
    """Every test starts and ends with no configured emitter."""
    runtime.shutdown(timeout=1.0)
    yield
    runtime.shutdown(timeout=1.0)
