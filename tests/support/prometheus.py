"""A real Prometheus on a free port, with a config a test writes: Debian's ``prometheus`` (2.42, the
minimum), or a pinned build of ``testbed.peers`` (``role="newest"`` or ``"lts"``: Prometheus 3).

Queries go through its HTTP API, as Grafana sends them; ``stats=all`` returns Prometheus' own
query statistics (samples read), which the dashboard cost measurement reads.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.servers import ServerProcess
from testbed import peers
from testbed.ports import free_port
from testbed.waiting import wait_until

__all__ = ["PrometheusServer"]


def _binary(role: str | None) -> str:
    if role is not None:
        return str(peers.binary("prometheus", role))
    path = shutil.which("prometheus")
    if path is None:
        pytest.fail("prometheus is not installed (Debian: apt-get install -y prometheus)")
    return path


class PrometheusServer(ServerProcess):
    """``prometheus --config.file=<config>`` in ``tmp``, stopped by ``stop``; ``role`` picks the
    pinned build of ``testbed.peers`` that plays it, Debian's ``prometheus`` when ``None``."""

    def __init__(self, tmp: Path, config: dict[str, Any], *extra: str, role: str | None = None) -> None:
        self.config = tmp / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.started = time.time()
        command = [
            _binary(role),
            f"--config.file={self.config}",
            f"--storage.tsdb.path={tmp / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
            *extra,
        ]
        super().__init__(command, tmp / "prometheus.log", f"{self.url}/-/ready")

    def api(self, path: str, **params: Any) -> Any:
        """``/api/v1/<path>``'s data. Queries go by POST (dashboard expressions are long, as Grafana
        sends them); the other endpoints only answer GET."""
        encoded = urllib.parse.urlencode(params, doseq=True)
        request = (
            urllib.request.Request(f"{self.url}/api/v1/{path}", data=encoded.encode())
            if path in ("query", "query_range")
            else urllib.request.Request(f"{self.url}/api/v1/{path}?{encoded}")
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{path} {params}: HTTP {exc.code} {exc.read().decode()}") from None
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", **params)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def scalar(self, expr: str, at: float | None = None) -> float | None:
        result = self.query(expr, at)
        return float(result[0]["value"][1]) if result else None

    def wait(self, condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
        """Poll ``condition`` until it holds; after ``timeout`` fail, naming ``what`` and the log."""
        try:
            wait_until(condition, timeout=timeout, interval=0.2)
        except AssertionError:
            self.log.flush()
            raise AssertionError(f"{what}: not within {timeout} s; see {self.log.name}") from None

    def rules_healthy(self) -> None:
        """Prometheus loaded every rule and evaluates it without error."""
        rules = [r for g in self.api("rules")["groups"] for r in g["rules"]]
        assert rules and all(r["health"] == "ok" for r in rules), [
            (r["name"], r.get("lastError")) for r in rules
        ]


def scraping_job(
    tmp: Path, exported: Path, job: str, targets: list[str], role: str | None = None
) -> PrometheusServer:
    """Prometheus with the exported ``prometheus.yml``'s ``job`` aimed at ``targets``, scraping and
    evaluating every second, with the exported task-side rules (``rules.yml``) loaded; ``role`` as
    ``PrometheusServer``'s."""
    collector = exported / "collector"
    base = yaml.safe_load((collector / "prometheus.yml").read_text())
    (scrape,) = [j for j in base["scrape_configs"] if j["job_name"] == job]
    config = {
        "global": {
            **base["global"],
            "scrape_interval": "1s",
            "scrape_timeout": "900ms",
            "evaluation_interval": "1s",
        },
        "rule_files": [str(collector / "rules.yml")],
        "scrape_configs": [{**scrape, "static_configs": [{"targets": targets}]}],
    }
    return PrometheusServer(tmp, config, "--storage.tsdb.retention.time=1h", role=role)
