"""The Kubernetes objects ``export`` writes, judged as a cluster's admission and a policy scanner judge them.

* Kubernetes' own Pod Security Standards evaluator (``k8s.io/pod-security-admission``, the code the
  API server's PodSecurity admission runs, built from its Go module: ``testbed.peers``) allows
  every pod each topology renders (``kubernetes/statsd``, ``kubernetes/api-server``) at the
  ``restricted`` level, the latest policy version;
  and it refuses the same pod without each protection (so the check can fail);
* kube-score (a widely used static checker, also built from its Go module, with its optional
  seccomp and container-port checks on) finds nothing critical or warning-worthy; each check the
  manifests tell it to leave out (``kube-score/ignore``) is named, with its reason, in a
  ``store-metrics/kube-score-ignore-why`` annotation beside it;
* the inventory's NetworkPolicy selects the inventory's pods, admits only the Prometheus
  Operator's Prometheus pods on the metrics port, and lets the pod reach only DNS and the database.

No cluster runs here: the verdicts are those of the programs' own code on the rendered objects.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from store_metrics.config import options
from support.kubernetes_checks import kustomize
from testbed import peers
from testbed.repository import ROOT

pytestmark = pytest.mark.peers

TOPOLOGIES = ["statsd", "api-server"]
KUBE_SCORE_OPTIONAL = ("container-seccomp-profile", "container-ports-check")
#: kube-score grades: 1 critical, 5 warning, 7 "almost OK" (e.g. no livenessProbe, which its own
#: documentation recommends only where a deadlock is possible), 10 OK.
KUBE_SCORE_ALMOST_OK = 7


def rendered(tmp_path: Path, topology: str) -> Path:
    """What ``kubectl kustomize`` renders for a user's kustomization of ``topology``."""
    shutil.copytree(ROOT / "kubernetes", tmp_path / "kubernetes")
    (tmp_path / "kustomization.yaml").write_text(f"resources:\n  - kubernetes/{topology}\n")
    out = tmp_path / "rendered.yaml"
    out.write_text(yaml.safe_dump_all(kustomize(tmp_path)))
    return out


def pod_security(path: Path, level: str = "restricted") -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run(
        [str(peers.binary("podsecurity", "current")), "--level", level, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def kube_score(path: Path) -> list[dict[str, Any]]:
    """Every check kube-score ran on the objects of ``path``, as (object, check id, grade, comments)."""
    command = [
        str(peers.binary("kube-score", "current")),
        "score",
        "-o",
        "json",
        "--kubernetes-version",
        "v1.33",
    ]
    for check in KUBE_SCORE_OPTIONAL:
        command += ["--enable-optional-test", check]
    done = subprocess.run([*command, str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout, done.stderr
    return [
        {
            "object": f"{obj['type_meta']['kind']}/{obj['object_meta']['name']}",
            "id": check["check"]["id"],
            "grade": check["grade"],
            "skipped": check["skipped"],
            "comments": [c["summary"] for c in check.get("comments") or []],
        }
        for obj in json.loads(done.stdout)
        for check in obj["checks"]
    ]


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def inventory(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    return deployment


# --- the Pod Security Standards --------------------------------------------------------------


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_every_exported_pod_meets_the_restricted_profile(topology: str, tmp_path: Path) -> None:
    code, verdicts = pod_security(rendered(tmp_path, topology))
    assert [(v["kind"], v["name"]) for v in verdicts] == [("Deployment", "store-metrics-inventory")]
    assert verdicts[0]["forbidden"] == [] and code == 0, verdicts


@pytest.mark.parametrize(
    ("remove", "reason"),
    [
        (("pod", "seccompProfile"), "seccompProfile"),
        (("container", "allowPrivilegeEscalation"), "allowPrivilegeEscalation != false"),
        (("container", "capabilities"), "unrestricted capabilities"),
        (("both", "runAsNonRoot"), "runAsNonRoot != true"),
    ],
)
def test_the_restricted_profile_refuses_the_pod_without_each_protection(
    remove: tuple[str, str], reason: str, tmp_path: Path
) -> None:
    """The evaluator is no rubber stamp: each protection the manifest sets is one it checks."""
    docs = documents(rendered(tmp_path, "api-server"))
    pod = inventory(docs)["spec"]["template"]["spec"]
    where, key = remove
    if where in ("pod", "both"):
        pod["securityContext"].pop(key, None)
    if where in ("container", "both"):
        pod["containers"][0]["securityContext"].pop(key)
    if key == "seccompProfile":
        pod["containers"][0]["securityContext"].pop(key)
    mutated = tmp_path / "mutated.yaml"
    mutated.write_text(yaml.safe_dump_all(docs))
    code, (verdict,) = pod_security(mutated)
    assert code == 1
    assert reason in [f["reason"] for f in verdict["forbidden"]], verdict
    # The same pod is still fine at the baseline level: these are restricted's own checks.
    assert pod_security(mutated, "baseline")[0] == 0


def test_the_inventory_pod_gives_up_what_it_does_not_need(tmp_path: Path) -> None:
    """Beyond the profile: no service account token, a read-only root with one small writable
    /tmp, no group 0, and its own read-only database role's Secret."""
    deployment = inventory(documents(rendered(tmp_path, "statsd")))
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsGroup"] == container["securityContext"]["runAsGroup"] == 50000
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert writable == {"/tmp"}
    (tmp,) = [v for v in pod["volumes"] if v["name"] == "tmp"]
    assert tmp["emptyDir"]["sizeLimit"] == "32Mi"
    (database,) = [e for e in container["env"] if e["name"] == "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert database["valueFrom"]["secretKeyRef"] == {
        "name": "store-metrics-inventory-db",
        "key": "connection",
    }
    assert container["command"] == ["store-metrics"]
    assert container["args"] == ["inventory", "--serve", "--port", str(options.default("inventory_port"))]


# --- kube-score ------------------------------------------------------------------------------


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_kube_score_finds_nothing_beyond_the_written_exceptions(topology: str, tmp_path: Path) -> None:
    checks = kube_score(rendered(tmp_path, topology))
    assert {c["object"] for c in checks} >= {
        "Deployment/store-metrics-inventory",
        "Service/store-metrics-inventory",
        "NetworkPolicy/store-metrics-inventory",
    }
    ran = [c for c in checks if not c["skipped"]]
    assert {c["id"] for c in ran} >= {
        "container-security-context-privileged",
        "container-security-context-readonlyrootfilesystem",
        "container-security-context-user-group-id",
        "container-seccomp-profile",
        "pod-networkpolicy",
        "networkpolicy-targets-pod",
        "container-resources",
    } - (_ignored(rendered(tmp_path / "again", topology)))
    failing = [c for c in ran if c["grade"] < KUBE_SCORE_ALMOST_OK]
    assert failing == []
    almost = [(c["id"], c["comments"]) for c in ran if c["grade"] == KUBE_SCORE_ALMOST_OK]
    assert almost == [("pod-probes", ["Container is missing a livenessProbe"])]


def _ignored(path: Path) -> set[str]:
    annotations = inventory(documents(path))["metadata"]["annotations"]
    return set(annotations.get("kube-score/ignore", "").split(",")) - {""}


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_every_kube_score_exception_is_written_down_with_its_reason(topology: str, tmp_path: Path) -> None:
    path = rendered(tmp_path, topology)
    annotations = inventory(documents(path))["metadata"]["annotations"]
    reasons = annotations["store-metrics/kube-score-ignore-why"]
    ignored = _ignored(path)
    assert ignored
    for check in ignored:
        # "<id>: why" or "<id>, <id>: why", each with a sentence after it
        assert re.search(rf"{re.escape(check)}[^:]*: \w+", reasons), (check, reasons)
    # Nothing the pod could meet is left out.
    assert ignored == {"container-image-pull-policy", "deployment-replicas"}


def test_kube_score_flags_the_pod_without_its_protections(tmp_path: Path) -> None:
    """Take away the read-only root and the NetworkPolicy: kube-score says so (critical)."""
    docs = [d for d in documents(rendered(tmp_path, "api-server")) if d["kind"] != "NetworkPolicy"]
    pod = inventory(docs)["spec"]["template"]["spec"]
    pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] = False
    mutated = tmp_path / "mutated.yaml"
    mutated.write_text(yaml.safe_dump_all(docs))
    critical = {c["id"] for c in kube_score(mutated) if not c["skipped"] and c["grade"] == 1}
    assert critical == {"container-security-context-readonlyrootfilesystem", "pod-networkpolicy"}


# --- the NetworkPolicy -------------------------------------------------------------------------


def test_the_network_policy_admits_only_prometheus_on_the_metrics_port(tmp_path: Path) -> None:
    docs = documents(rendered(tmp_path, "statsd"))
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    pod_labels = inventory(docs)["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert all(pod_labels.get(k) == v for k, v in spec["podSelector"]["matchLabels"].items())
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": options.default("inventory_port")}]
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "prometheus",
        "app.kubernetes.io/managed-by": "prometheus-operator",
    }
    reachable = {(p["protocol"], p["port"]) for r in spec["egress"] for p in r["ports"]}
    assert reachable == {("UDP", 53), ("TCP", 53), ("TCP", 5432), ("TCP", 6543), ("TCP", 3306)}
    assert all("to" not in r for r in spec["egress"])
