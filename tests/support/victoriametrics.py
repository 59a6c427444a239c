"""VictoriaMetrics' programs as the tests run them (the pinned 1.151.0 of ``testbed.peers``):
single-node storage, vmalert (serving, or one replay of a past window), vmagent, and Prometheus in
agent mode beside them, each on its own free port.

The storage makes data visible to queries 1 s after it arrives (30 s by default,
``-search.latencyOffset``), and vmalert evaluates each slot 1 s behind (``-rule.evalDelay``, 30 s by
default): as with the defaults, an evaluation's instant is never closer to now than the latency
offset, so VictoriaMetrics answers for that very instant (closer, it would answer for now minus the
offset instead) and a replay of the same slot computes the same value.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from support.servers import ServerProcess
from testbed import peers
from testbed.ports import free_port

__all__ = ["PrometheusAgent", "VictoriaMetrics", "VmAgent", "VmAlert", "replay"]

#: vmalert's delay behind now, equal to the storage's latency offset (their defaults are both 30 s).
EVAL_DELAY = "1s"


class VictoriaMetrics(ServerProcess):
    """victoria-metrics (single-node), ``extra`` flags appended (e.g. ``-dedup.minScrapeInterval``)."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [
            str(peers.binary("victoria-metrics", "current")),
            f"-storageDataPath={tmp / 'vm-data'}",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            "-retentionPeriod=1d",
            f"-search.latencyOffset={EVAL_DELAY}",
            "-search.disableCache",
            "-loggerLevel=WARN",
            *extra,
        ]
        super().__init__(command, tmp / "victoria-metrics.log", f"{self.url}/health")

    @property
    def write_url(self) -> str:
        return f"{self.url}/api/v1/write"

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        data = urllib.parse.urlencode(params).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=30) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        assert body["data"]["resultType"] == "vector", body
        return list(body["data"]["result"])


def _vmalert_flags(rules: list[Path], vm: VictoriaMetrics) -> list[str]:
    """What a serving vmalert and a replay share: the rules, where they read and write."""
    return [
        str(peers.binary("vmalert", "current")),
        *(f"-rule={path}" for path in rules),
        f"-datasource.url={vm.url}",
        f"-remoteWrite.url={vm.url}",
        "-remoteWrite.flushInterval=1s",
        f"-rule.evalDelay={EVAL_DELAY}",
        "-loggerLevel=WARN",
    ]


class VmAlert(ServerProcess):
    """vmalert over ``vm``: the rule files every second, recorded series written back, alerts to
    ``notifier`` (an Alertmanager's host:port) when given; ``extra`` flags appended."""

    def __init__(
        self,
        tmp: Path,
        rules: list[Path],
        vm: VictoriaMetrics,
        *extra: str,
        notifier: str = "",
        name: str = "vmalert",
    ) -> None:
        self.port = free_port()
        command = [
            *_vmalert_flags(rules, vm),
            *([f"-notifier.url=http://{notifier}"] if notifier else ["-notifier.blackhole"]),
            "-evaluationInterval=1s",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            *extra,
        ]
        super().__init__(command, tmp / f"{name}.log", f"http://127.0.0.1:{self.port}/health")


def replay(
    rules: list[Path], vm: VictoriaMetrics, start: float, end: float
) -> subprocess.CompletedProcess[str]:
    """vmalert's replay mode over ``[start, end]`` (whole seconds, UTC): each group's rules evaluated
    at every slot of the window and the results written to ``vm``, as docs/scaling-out.md runs it."""

    def rfc3339(at: float) -> str:
        return datetime.datetime.fromtimestamp(int(at), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    command = [
        *_vmalert_flags(rules, vm),
        f"-replay.timeFrom={rfc3339(start)}",
        f"-replay.timeTo={rfc3339(end)}",
        "-replay.disableProgressBar",
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


class VmAgent(ServerProcess):
    """vmagent scraping ``scrape`` (a Prometheus scrape configuration, ``global.external_labels``
    included) and remote-writing all of it to ``vm``, its queue on disk under ``tmp``."""

    def __init__(self, tmp: Path, scrape: dict[str, Any], vm: VictoriaMetrics) -> None:
        config = tmp / "vmagent.yml"
        config.write_text(yaml.safe_dump(scrape, sort_keys=False))
        self.port = free_port()
        command = [
            str(peers.binary("vmagent", "current")),
            f"-promscrape.config={config}",
            f"-remoteWrite.url={vm.write_url}",
            f"-remoteWrite.tmpDataPath={tmp / 'vmagent-queue'}",
            "-remoteWrite.flushInterval=1s",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            "-loggerLevel=WARN",
        ]
        super().__init__(command, tmp / "vmagent.log", f"http://127.0.0.1:{self.port}/health")


class PrometheusAgent(ServerProcess):
    """Prometheus (the newest pin) in agent mode: ``scrape`` scraped and remote-written to ``vm``
    (every second, one shard), kept in its write-ahead log under ``tmp`` until sent."""

    def __init__(self, tmp: Path, scrape: dict[str, Any], vm: VictoriaMetrics) -> None:
        remote_write = {"url": vm.write_url, "queue_config": {"batch_send_deadline": "1s", "max_shards": 1}}
        config = tmp / "prometheus-agent.yml"
        config.write_text(yaml.safe_dump({**scrape, "remote_write": [remote_write]}, sort_keys=False))
        self.port = free_port()
        command = [
            str(peers.binary("prometheus", "newest")),
            "--agent",
            f"--config.file={config}",
            f"--storage.agent.path={tmp / 'agent-wal'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        super().__init__(command, tmp / "prometheus-agent.log", f"http://127.0.0.1:{self.port}/-/ready")
