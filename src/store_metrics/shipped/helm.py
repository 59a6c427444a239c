"""``helm/``: wiring for Airflow's official Helm chart (``apache-airflow/airflow``).

Every file is a template under ``templates/helm/``; this module fills in the values:

* ``values-store-metrics.yaml``: the StatsD topology. ``config.store_metrics`` (the
  ``[store_metrics]`` section of the chart's ``airflow.cfg``, read by every Airflow container)
  selects the ``statsd`` backend, whose host and port fall back to the chart's ``[metrics]``
  statsd_exporter; ``statsd.extraMappings`` is the ``mappings`` list of
  ``collector/statsd-mapping.yml`` then of ``collector/statsd-mapping-server.yml``, copied from
  their text (the chart appends them after its own mappings);
* ``values-store-metrics-api-server.yaml``: ``count_at = api_server`` with the ``otel`` backend's
  Prometheus exporter, and ``[api] workers`` (one scrape port per worker; the PodMonitor of
  ``kubernetes/api-server`` has one endpoint each): map keys only;
* ``values-store-metrics-dev.yaml``: for a trial on the built image, ``[core] load_examples``
  (Airflow's own ``example_task_state_store``: a DAG to trigger);
* ``Dockerfile``: the official image with the package installed from this version's wheel, copied
  in from beside it (built from a clone: no release is on the package index yet); the Airflow
  version is its one build argument;
* ``merge_values.py``: Helm replaces a list (``statsd.extraMappings``, ``env``) given in a later
  values file; this merges values files joining lists instead, for users whose own values set one.

The value names were checked against the chart's ``values.schema.json`` and ``helm template``
(tests/shipped/test_helm.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath

from store_metrics import __version__, catalogue
from store_metrics.config import options

from . import folders, templating

__all__ = [
    "AIRFLOW_IMAGE",
    "AIRFLOW_REPOSITORY",
    "AIRFLOW_VERSION",
    "API_SERVER_FILENAME",
    "API_SERVER_WORKERS",
    "BUILT_IMAGE",
    "BUILT_IMAGE_NAME",
    "DEV_FILENAME",
    "DOCKERFILE",
    "FILENAME",
    "FOLDER",
    "MERGE_SCRIPT",
    "PACKAGE",
    "STATSD_MAPPINGS",
    "list_items",
    "render",
    "requirement",
    "wheel",
]

FOLDER = folders.HELM
FILENAME = "values-store-metrics.yaml"
API_SERVER_FILENAME = "values-store-metrics-api-server.yaml"
DEV_FILENAME = "values-store-metrics-dev.yaml"
DOCKERFILE = "Dockerfile"
MERGE_SCRIPT = "merge_values.py"
#: The statsd_exporter mapping files whose ``mappings`` become ``statsd.extraMappings``, in order.
STATSD_MAPPINGS = (
    PurePosixPath("collector/statsd-mapping.yml"),
    PurePosixPath("collector/statsd-mapping-server.yml"),
)

#: The distribution's name (on the package index once released).
PACKAGE = "airflow-store-metrics"
#: The Airflow release the image and the dev values name (store-metrics needs Airflow 3.3 or later).
AIRFLOW_VERSION = "3.3.2"
#: The official Airflow image (Docker Hub), what the Dockerfile extends.
AIRFLOW_REPOSITORY = "apache/airflow"
AIRFLOW_IMAGE = f"{AIRFLOW_REPOSITORY}:{AIRFLOW_VERSION}"
#: What the Dockerfile's header and the inventory's Deployment call the image built from it: a
#: placeholder your kustomization's ``images`` replaces.
BUILT_IMAGE_NAME = "registry.example.com/airflow-store-metrics"
BUILT_IMAGE = f"{BUILT_IMAGE_NAME}:{AIRFLOW_VERSION}"
#: ``[api] workers`` with count_at = api_server: each worker serves its own port (collector/
#: prometheus.yml lists two too). Airflow's default is 1; two let one worker answer while the
#: other's event loop is busy, without the memory of more.
API_SERVER_WORKERS = 2


def requirement() -> str:
    """The pip requirement of this very version on the package index, with the extra the Prometheus
    endpoints need: what the Dockerfile installs once the version is released."""
    return f"{PACKAGE}[otel]=={__version__}"


def wheel() -> str:
    """The file name of this version's wheel (pure Python, any platform), as pip and build write it."""
    return f"{PACKAGE.replace('-', '_')}-{__version__}-py3-none-any.whl"


def list_items(text: str, key: str) -> str:
    """The lines of the top-level list ``key:`` of YAML ``text``, as they are (comments included).

    Only the text is read: the block runs from the line ``key:`` to the next top-level key.
    """
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.split("#")[0].rstrip() == f"{key}:")
    except StopIteration:
        raise ValueError(f"no top-level list {key!r} in this YAML") from None
    block = []
    for line in lines[start + 1 :]:
        if line and line[0] not in " -#":
            break
        block.append(line)
    while block and not block[-1].strip():
        block.pop()
    return "\n".join(block)


def _indent(block: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line if line.strip() else line for line in block.splitlines())


def _prefix(prefix: str) -> dict[str, str]:
    # An empty option falls back to Airflow's `[metrics] statsd_prefix` (the chart's `airflow`), so
    # an empty prefix cannot be set through airflow.cfg: the note says so.
    if prefix:
        return {"prefix_option": f'    prefix: "{prefix}"\n', "prefix_note": ""}
    return {
        "prefix_option": "",
        "prefix_note": (
            "# The prefix is empty: airflow.cfg cannot say so (an empty option falls back to Airflow's\n"
            "# [metrics] statsd_prefix), so set it in Python with store_metrics.configure(prefix='').\n"
        ),
    }


def render(files: Mapping[PurePosixPath, str], prefix: str) -> dict[PurePosixPath, str]:
    """Every file of ``helm/``; the StatsD values copy the mappings of ``files``' mapping files."""
    mappings = "\n".join(_indent(list_items(files[path], "mappings"), 2) for path in STATSD_MAPPINGS)
    versions = {
        "airflow_version": AIRFLOW_VERSION,
        "requirement": requirement(),
        "wheel": wheel(),
        "merge_script": MERGE_SCRIPT,
    }
    return {
        FOLDER / FILENAME: templating.render(
            f"helm/{FILENAME}",
            prefix,
            {
                **_prefix(prefix),
                **versions,
                "example_line": catalogue.get("task_state_store.write").full_name(prefix) + ",dag_id=..:1|c",
                "extra_mappings": mappings,
            },
        ),
        FOLDER / API_SERVER_FILENAME: templating.render(
            f"helm/{API_SERVER_FILENAME}",
            prefix,
            {
                **_prefix(prefix),
                **versions,
                "workers": str(API_SERVER_WORKERS),
                "server_port": str(options.default("server_prometheus_port")),
                "triggerer_port": str(options.default("prometheus_port")),
            },
        ),
        FOLDER / DEV_FILENAME: templating.render(
            f"helm/{DEV_FILENAME}", prefix, {**versions, "values": FILENAME}
        ),
        FOLDER / DOCKERFILE: templating.render(
            f"helm/{DOCKERFILE}",
            prefix,
            {
                **versions,
                "airflow_repository": AIRFLOW_REPOSITORY,
                "built_image_name": BUILT_IMAGE_NAME,
                "values": FILENAME,
            },
        ),
        FOLDER / MERGE_SCRIPT: templating.render(f"helm/{MERGE_SCRIPT}", prefix),
    }
