"""collector/alertmanager-inhibit.yml, in a real Alertmanager: the pairs that share a cause stay quiet.

A store-wide failure (StateStoreFailingAcrossDags, critical) silences the per-DAG and per-watcher
error alerts of the same deployment and job, never another job's; an inventory that cannot read a
table silences that table's stale footprint; a stalled event loop silences the same worker's long
stalls. Debian's prometheus-alertmanager (scripts/setup dev) runs with the snippet merged into a
minimal config; alerts are posted to its API and read back with their ``inhibitedBy``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.servers import ServerProcess
from testbed.ports import free_port
from testbed.repository import ROOT
from testbed.waiting import wait_until

SNIPPET = ROOT / "collector" / "alertmanager-inhibit.yml"

pytestmark = pytest.mark.prometheus


def binary(*names: str) -> str:
    for name in names:
        if path := shutil.which(name):
            return path
    pytest.fail(f"{names[0]} is not installed (Debian: apt-get install -y prometheus-alertmanager)")


def severities() -> dict[str, str]:
    """Each alert's severity, from the shipped rule files."""
    found = {}
    for path in (ROOT / "collector").glob("*rules.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            found |= {r["alert"]: r["labels"]["severity"] for r in group["rules"] if "alert" in r}
    return found


def config(tmp_path: Path) -> Path:
    """A minimal alertmanager.yml: one receiver that sends nowhere, and the shipped inhibit_rules."""
    snippet = yaml.safe_load(SNIPPET.read_text())
    document = {
        "route": {"receiver": "nowhere", "group_wait": "1s", "group_interval": "1s"},
        "receivers": [{"name": "nowhere"}],
        **snippet,
    }
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


class Alertmanager(ServerProcess):
    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api/v2"
        command = [
            binary("prometheus-alertmanager", "alertmanager"),
            f"--config.file={config(tmp_path)}",
            f"--storage.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",  # alone: no gossip port
        ]
        super().__init__(command, tmp_path / "alertmanager.log", f"{self.url}/status", timeout=30)

    def post(self, alerts: list[dict[str, str]]) -> None:
        body = json.dumps([{"labels": labels} for labels in alerts]).encode()
        request = urllib.request.Request(
            f"{self.url}/alerts", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200

    def alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/alerts", timeout=5) as response:
            found: list[dict[str, Any]] = json.loads(response.read())
            return found


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[Alertmanager]:
    manager = Alertmanager(tmp_path)
    try:
        yield manager
    finally:
        manager.stop()


def test_amtool_accepts_the_snippet_merged_into_a_config(tmp_path: Path) -> None:
    checked = subprocess.run(
        [binary("amtool"), "check-config", str(config(tmp_path))],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert " - 3 inhibit rules" in checked.stdout


def alert(name: str, **labels: str) -> dict[str, str]:
    """An alert's labels as the rules give them: its name, its severity, its grouping labels."""
    return {"alertname": name, "severity": severities()[name], **labels}


#: (alert, inhibited?) for one store-wide failure in job airflow while other jobs and stores go on.
CASES = [
    (alert("StateStoreFailingAcrossDags", job="airflow"), False),
    (alert("StateStoreErrorRateHigh", job="airflow", dag_id="a"), True),
    (alert("StateStoreErrorRateHigh", job="airflow", dag_id="b", team_name="analytics"), True),
    (alert("StateStoreWatcherErrorRateHigh", job="airflow", operator="S3KeyTrigger", task_id="s3"), True),
    # Another job (a second deployment scraped by the same Prometheus): its own problem.
    (alert("StateStoreErrorRateHigh", job="statsd", dag_id="c"), False),
    (alert("StateStoreErrorRateHigh", cluster="b", job="airflow", dag_id="d"), False),
    (alert("StateStoreInventoryDown", store="task"), False),
    (alert("StateStoreInventoryStale", store="task"), True),
    (alert("StateStoreInventoryStale", store="asset"), False),
    (alert("StateStoreApiServerLoopStalled", job="api", worker="host-0"), False),
    (alert("StateStoreApiServerLongStalls", job="api", worker="host-0"), True),
    (alert("StateStoreApiServerLongStalls", job="api", worker="host-1"), False),
    # The hygiene finding inhibits nothing and nothing inhibits it.
    (alert("StateStoreTaskStateNeverRead", job="airflow", dag_id="a", task_id="t"), False),
]


@pytest.mark.slow
def test_inhibition_keeps_the_alerts_that_share_a_cause_quiet(alertmanager: Alertmanager) -> None:
    alertmanager.post([labels for labels, _ in CASES])

    def state() -> dict[tuple[tuple[str, str], ...], bool]:
        return {
            tuple(sorted(a["labels"].items())): bool(a["status"]["inhibitedBy"])
            for a in alertmanager.alerts()
        }

    wanted = {tuple(sorted(labels.items())): inhibited for labels, inhibited in CASES}
    # Inhibition is computed as the alerts arrive; wait (bounded) until all are listed as expected.
    wait_until(lambda: state() == wanted, timeout=20, interval=0.2)
    assert state() == wanted
