"""The Prometheus Operator's scrape jobs for a ServiceMonitor or a PodMonitor, and what Kubernetes
service discovery says of a chart's pods: a real Prometheus then applies the relabelings a cluster's
Prometheus would.

``scrape_jobs`` writes the ``relabel_configs`` as prometheus-operator generates them
(``pkg/prometheus/promcfg.go``, ``generatePodMonitorConfig`` / ``generateServiceMonitorConfig``,
read at v0.8x-v0.9x; Prometheus 2 and 3 alike): the job's old name kept in
``__tmp_prometheus_job_name``, the running-pod filter, one ``keep`` per ``matchLabels`` item (sorted)
and per ``matchExpressions`` item, the endpoint's port name, the ``namespace``/``service``/``pod``/
``container`` labels, ``job`` (a PodMonitor's ``<namespace>/<name>``, a ServiceMonitor's Service
name), ``endpoint``, the endpoint's own relabelings, then the sharding ``hashmod`` of one shard. The
job name is the Operator's (``podMonitor/<namespace>/<name>/<index>``). Only the discovery differs:
the targets come from a file (``file_sd_configs``) written by ``pod_targets`` and
``endpoint_targets`` with the labels Kubernetes discovery gives (roles ``pod`` and
``endpoints``), since there is no cluster here; the peers' Prometheus is built without the
Kubernetes discovery anyway (``remove_all_sd``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Container", "Pod", "endpoint_targets", "pod_targets", "scrape_jobs"]


def _sanitize(name: str) -> str:
    """The Operator's sanitizeLabelName: anything but ``[a-zA-Z0-9_]`` becomes ``_``."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _selector(kind: str, selector: dict[str, Any]) -> list[dict[str, Any]]:
    """The keep/drop rules of a label selector, on pod (PodMonitor) or service (ServiceMonitor) labels."""
    meta = "__meta_kubernetes_pod" if kind == "PodMonitor" else "__meta_kubernetes_service"
    rules: list[dict[str, Any]] = []
    for key in sorted(selector.get("matchLabels", {})):
        rules.append(
            {
                "action": "keep",
                "source_labels": [f"{meta}_label_{_sanitize(key)}", f"{meta}_labelpresent_{_sanitize(key)}"],
                "regex": f"({selector['matchLabels'][key]});true",
            }
        )
    for expression in selector.get("matchExpressions", []):
        key, operator = _sanitize(expression["key"]), expression["operator"]
        values = "|".join(expression.get("values", []))
        if operator in ("In", "NotIn"):
            rules.append(
                {
                    "action": "keep" if operator == "In" else "drop",
                    "source_labels": [f"{meta}_label_{key}", f"{meta}_labelpresent_{key}"],
                    "regex": f"({values});true",
                }
            )
        else:  # Exists, DoesNotExist
            rules.append(
                {
                    "action": "keep" if operator == "Exists" else "drop",
                    "source_labels": [f"{meta}_labelpresent_{key}"],
                    "regex": "true",
                }
            )
    return rules


def _own_relabelings(endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    """An endpoint's ``relabelings`` as Prometheus reads them (generateRelabelConfig)."""
    renamed = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    rules = []
    for relabeling in endpoint.get("relabelings", []):
        rule = {renamed.get(k, k): v for k, v in relabeling.items()}
        if "action" in rule:
            rule["action"] = str(rule["action"]).lower()
        rules.append(rule)
    return rules


_RUNNING = {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"}
_SHARD = [
    {"source_labels": ["__address__"], "target_label": "__tmp_hash", "modulus": 1, "action": "hashmod"},
    # The Operator writes $(SHARD), which its config reloader replaces with the shard's number.
    {"source_labels": ["__tmp_hash"], "regex": "0", "action": "keep"},
]


def _pod_monitor(monitor: dict[str, Any], endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    meta = monitor["metadata"]
    return [
        {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
        _RUNNING,
        *_selector("PodMonitor", monitor["spec"]["selector"]),
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_pod_container_port_name"],
            "regex": endpoint["port"],
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"target_label": "job", "replacement": f"{meta['namespace']}/{meta['name']}"},
        {"target_label": "endpoint", "replacement": endpoint["port"]},
        *_own_relabelings(endpoint),
        *_SHARD,
    ]


def _service_monitor(monitor: dict[str, Any], endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    target = [
        "__meta_kubernetes_endpoint_address_target_kind",
        "__meta_kubernetes_endpoint_address_target_name",
    ]
    return [
        {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
        *_selector("ServiceMonitor", monitor["spec"]["selector"]),
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_endpoint_port_name"],
            "regex": endpoint["port"],
        },
        {
            "source_labels": target,
            "separator": ";",
            "regex": "Node;(.*)",
            "replacement": "${1}",
            "target_label": "node",
        },
        {
            "source_labels": target,
            "separator": ";",
            "regex": "Pod;(.*)",
            "replacement": "${1}",
            "target_label": "pod",
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        _RUNNING,
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"},
        {"target_label": "endpoint", "replacement": endpoint["port"]},
        *_own_relabelings(endpoint),
        *_SHARD,
    ]


def scrape_jobs(
    monitor: dict[str, Any], namespace: str, targets: Path, interval: str
) -> list[dict[str, Any]]:
    """The Operator's scrape jobs for ``monitor`` applied in ``namespace``, one per endpoint.

    ``interval`` is the scrape interval where the endpoint sets none (the Prometheus' own).
    """
    monitor = {**monitor, "metadata": {**monitor["metadata"], "namespace": namespace}}
    kind, name = monitor["kind"], monitor["metadata"]["name"]
    endpoints = monitor["spec"]["podMetricsEndpoints" if kind == "PodMonitor" else "endpoints"]
    translate = _pod_monitor if kind == "PodMonitor" else _service_monitor
    prefix = "podMonitor" if kind == "PodMonitor" else "serviceMonitor"
    return [
        {
            "job_name": f"{prefix}/{namespace}/{name}/{index}",
            "honor_labels": False,
            "scrape_interval": endpoint.get("interval", interval),
            "metrics_path": endpoint.get("path", "/metrics"),
            "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}],
            "relabel_configs": translate(monitor, endpoint),
        }
        for index, endpoint in enumerate(endpoints)
    ]


@dataclass(frozen=True)
class Container:
    name: str
    #: (port name, port number) the container declares.
    ports: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    ip: str
    labels: dict[str, str]
    containers: tuple[Container, ...] = field(default_factory=tuple)

    def meta(self) -> dict[str, str]:
        labels = {
            "__meta_kubernetes_namespace": self.namespace,
            "__meta_kubernetes_pod_name": self.name,
            "__meta_kubernetes_pod_ip": self.ip,
            "__meta_kubernetes_pod_phase": "Running",
            "__meta_kubernetes_pod_ready": "true",
        }
        for key, value in self.labels.items():
            labels[f"__meta_kubernetes_pod_label_{_sanitize(key)}"] = value
            labels[f"__meta_kubernetes_pod_labelpresent_{_sanitize(key)}"] = "true"
        return labels


def _address(ip: str, port: int | None) -> str:
    host = f"[{ip}]" if ":" in ip else ip
    return host if port is None else f"{host}:{port}"


def pod_targets(pods: list[Pod]) -> list[dict[str, Any]]:
    """What the ``pod`` role discovers: a target per declared container port, one per port-less container."""
    groups = []
    for pod in pods:
        for container in pod.containers:
            declared = container.ports or ((None, None),)
            for port_name, number in declared:
                labels = {**pod.meta(), "__meta_kubernetes_pod_container_name": container.name}
                if port_name is not None:
                    labels["__meta_kubernetes_pod_container_port_name"] = port_name
                    labels["__meta_kubernetes_pod_container_port_number"] = str(number)
                    labels["__meta_kubernetes_pod_container_port_protocol"] = "TCP"
                groups.append({"targets": [_address(pod.ip, number)], "labels": labels})
    return groups


def endpoint_targets(
    service: str, service_labels: dict[str, str], port: tuple[str, int], pod: Pod, container: str
) -> list[dict[str, Any]]:
    """What the ``endpoints`` role discovers for one Service port served by one ready pod."""
    port_name, number = port
    labels = {
        **pod.meta(),
        "__meta_kubernetes_service_name": service,
        "__meta_kubernetes_endpoints_name": service,
        "__meta_kubernetes_endpoint_port_name": port_name,
        "__meta_kubernetes_endpoint_port_protocol": "TCP",
        "__meta_kubernetes_endpoint_ready": "true",
        "__meta_kubernetes_endpoint_address_target_kind": "Pod",
        "__meta_kubernetes_endpoint_address_target_name": pod.name,
        "__meta_kubernetes_pod_container_name": container,
        "__meta_kubernetes_pod_container_port_name": port_name,
        "__meta_kubernetes_pod_container_port_number": str(number),
    }
    for key, value in service_labels.items():
        labels[f"__meta_kubernetes_service_label_{_sanitize(key)}"] = value
        labels[f"__meta_kubernetes_service_labelpresent_{_sanitize(key)}"] = "true"
    return [{"targets": [_address(pod.ip, number)], "labels": labels}]
