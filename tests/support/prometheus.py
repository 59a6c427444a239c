"""A real Prometheus server for the tests: ``prometheus`` on a free port, scraping what a test names.

Its configuration is generated from the committed ``collector/prometheus.yml`` (one of its scrape
jobs, pointed at the test's targets) with ``collector/rules.yml`` loaded, scraping and evaluating
every second. :meth:`Prometheus.api`, :meth:`~Prometheus.query` and :meth:`~Prometheus.scalar`
talk to its HTTP API as Grafana does (queries by POST).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.ports import free_port

COLLECTOR = Path(__file__).resolve().parents[2] / "collector"


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed (Debian: apt-get install -y prometheus)")
    return path


class Prometheus:
    """``prometheus`` on a free port, with the scrape job ``job`` of collector/prometheus.yml pointed
    at ``target`` (one ``host:port`` or several)."""

    def __init__(self, tmp: Path, target: str | Sequence[str], job: str = "store-metrics-demo") -> None:
        base = yaml.safe_load((COLLECTOR / "prometheus.yml").read_text())
        jobs = [j for j in base["scrape_configs"] if j["job_name"] == job]
        assert jobs, f"collector/prometheus.yml has no job {job}"
        scrape = dict(jobs[0])
        scrape["static_configs"] = [{"targets": [target] if isinstance(target, str) else list(target)}]
        config = {
            "global": {
                **base.get("global", {}),
                "scrape_interval": "1s",
                "scrape_timeout": "900ms",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(COLLECTOR / "rules.yml")],
            "scrape_configs": [scrape],
        }
        self.config = tmp / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (tmp / "prometheus.log").open("w")
        self.started = time.time()
        self.proc = subprocess.Popen(
            [
                require_binary("prometheus"),
                f"--config.file={self.config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._ready, 30, "Prometheus /-/ready")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.proc.returncode}; see {self.log.name}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: Any) -> Any:
        encoded = urllib.parse.urlencode(params, doseq=True)
        # Queries go by POST (dashboard expressions are long, as Grafana sends them); the other
        # endpoints only answer GET.
        request = (
            urllib.request.Request(f"{self.url}/api/v1/{path}", data=encoded.encode())
            if path == "query"
            else urllib.request.Request(f"{self.url}/api/v1/{path}?{encoded}")
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
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

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()
