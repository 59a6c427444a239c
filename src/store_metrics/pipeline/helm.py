"""``helm/``: wiring for Airflow's official Helm chart (``apache-airflow/airflow``).

Three files, for topology 3 (InfluxDB-StatsD → the chart's statsd_exporter → Prometheus):

* ``values-store-metrics.yaml``: the chart values that make the plugin send to the chart's own
  statsd_exporter and give that exporter store-metrics' mappings. ``config.store_metrics`` becomes
  the ``[store_metrics]`` section of the chart's ``airflow.cfg`` (every Airflow container: workers,
  scheduler, triggerer, API server, DAG processor, and KubernetesExecutor pods); ``host`` and
  ``port`` are left to their fallback, Airflow's ``[metrics] statsd_host``/``statsd_port``, which
  the chart already points at its statsd_exporter. ``statsd.extraMappings`` is exactly the
  ``mappings`` of ``collector/statsd-mapping.yml`` followed by those of
  ``collector/statsd-mapping-server.yml`` (the chart appends them after its own mappings, none of
  which matches a store-metrics name);
* ``values-store-metrics-dev.yaml``: for a trial without building an image, the official image's
  ``_PIP_ADDITIONAL_REQUIREMENTS`` (every container pip-installs the package at start: slow, and
  not for production, as the image's documentation says), and the Airflow version;
* ``Dockerfile``: the official image with the package installed, for production.

The value names were checked against the chart's ``values.schema.json`` (tests/test_helm.py
validates both values files against a copy of it).
"""

from __future__ import annotations

from typing import Any

from store_metrics import __version__, catalogue

from . import statsd_mapping, templating, yaml_text

__all__ = [
    "AIRFLOW_IMAGE",
    "AIRFLOW_VERSION",
    "DEV_FILENAME",
    "DOCKERFILE",
    "DOCKERFILE_TEMPLATE",
    "FILENAME",
    "PACKAGE",
    "dev_values_document",
    "render",
    "render_dev",
    "render_dockerfile",
    "requirement",
    "values_document",
]

FILENAME = "values-store-metrics.yaml"
DEV_FILENAME = "values-store-metrics-dev.yaml"
DOCKERFILE = "Dockerfile"
DOCKERFILE_TEMPLATE = "helm-Dockerfile"

#: The distribution's name on PyPI.
PACKAGE = "airflow-store-metrics"
#: The Airflow release the image and the dev values name (store-metrics needs Airflow 3.3 or later).
AIRFLOW_VERSION = "3.3.2"
AIRFLOW_IMAGE = f"apache/airflow:{AIRFLOW_VERSION}"
#: The backend that sends to the chart's statsd_exporter (InfluxDB tags; loss-free: docs/how-it-works.md).
BACKEND = "statsd"


def requirement() -> str:
    """The pip requirement of this very version: ``airflow-store-metrics==0.1.0``."""
    return f"{PACKAGE}=={__version__}"


def _store_metrics_section(prefix: str) -> dict[str, str]:
    section = {"backend": BACKEND}
    # An empty option falls back to Airflow's `[metrics] statsd_prefix` (the chart's `airflow`), so
    # an empty prefix cannot be set through airflow.cfg: the header says so.
    if prefix:
        section["prefix"] = prefix
    return section


def values_document(prefix: str) -> dict[str, Any]:
    """The chart values: ``[store_metrics]`` in airflow.cfg, and the statsd_exporter's extra mappings."""
    mappings = [
        *statsd_mapping.mapping_document(prefix)["mappings"],
        *statsd_mapping.server_mapping_document(prefix)["mappings"],
    ]
    return {
        "config": {"store_metrics": _store_metrics_section(prefix)},
        "statsd": {"enabled": True, "extraMappings": mappings},
    }


def dev_values_document(prefix: str) -> dict[str, Any]:
    """The trial values: an Airflow 3.3 image that pip-installs the package when a container starts."""
    return {
        "defaultAirflowTag": AIRFLOW_VERSION,
        "airflowVersion": AIRFLOW_VERSION,
        "env": [{"name": "_PIP_ADDITIONAL_REQUIREMENTS", "value": requirement()}],
    }


def _header(prefix: str) -> str:
    example = catalogue.get("task_state_store.write")
    empty = (
        "# The prefix is empty: airflow.cfg cannot say so (an empty option falls back to Airflow's\n"
        "# [metrics] statsd_prefix), so set it in Python with store_metrics.configure(prefix='').\n"
        if not prefix
        else ""
    )
    return f"""\
# Values for Airflow's official Helm chart (apache-airflow/airflow): store-metrics sends its
# counters with InfluxDB tags to the chart's statsd_exporter (`{example.full_name(prefix)},dag_id=..:1|c`),
# which serves them to Prometheus as `{example.prometheus_name(prefix)}{{dag_id=..}}`.
#   helm upgrade --install airflow apache-airflow/airflow -f {FILENAME} \\
#     --set images.airflow.repository=<your image built from helm/{DOCKERFILE}> \\
#     --set images.airflow.tag=<its tag> --set airflowVersion={AIRFLOW_VERSION}
# Trial without building an image: add -f {DEV_FILENAME} (pip-installs the package in
# every container at start; not for production).
# `config` merges into the chart's airflow.cfg; host and port follow [metrics] statsd_host and
# statsd_port, which the chart points at its statsd_exporter. Instead of `config` you may set
# env: [{{name: AIRFLOW__STORE_METRICS__BACKEND, value: {BACKEND}}}, ...].
# `statsd.extraMappings` = the mappings of collector/statsd-mapping.yml, then those of
# collector/statsd-mapping-server.yml. Keep `statsd.cache.ttl` at its default 0s: a daily DAG's
# series must outlive a day. Do not use `statsd.overrideMappings`: it drops these mappings.
{empty}"""


def render(prefix: str) -> str:
    """``helm/values-store-metrics.yaml``."""
    return yaml_text.dump(values_document(prefix), templating.generated_header(prefix) + _header(prefix))


_DEV_HEADER = f"""\
# Trial values for Airflow's Helm chart, used with {FILENAME}: the official Airflow {AIRFLOW_VERSION}
# image, and its _PIP_ADDITIONAL_REQUIREMENTS, which makes every Airflow container pip-install
# store-metrics when it starts. That slows every start and depends on PyPI at run time: the image's
# documentation says it is for testing only. For production build helm/{DOCKERFILE} instead.
#   helm upgrade --install airflow apache-airflow/airflow -f {FILENAME} -f {DEV_FILENAME}
"""


def render_dev(prefix: str) -> str:
    """``helm/values-store-metrics-dev.yaml``."""
    return yaml_text.dump(dev_values_document(prefix), templating.generated_header(prefix) + _DEV_HEADER)


def render_dockerfile(prefix: str) -> str:
    """``helm/Dockerfile``: the official image with the package installed (no prefix in it)."""
    return templating.render(
        DOCKERFILE_TEMPLATE,
        prefix,
        {
            "airflow_image": AIRFLOW_IMAGE,
            "airflow_version": AIRFLOW_VERSION,
            "requirement": requirement(),
            "values": FILENAME,
        },
    )
