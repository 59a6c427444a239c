"""A real ``prometheus`` (Debian's package) on a free port of 127.0.0.1, for a config a test writes."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.ports import free_port
from support.waiting import wait_until


class PrometheusServer:
    """``prometheus`` with ``config`` (written to ``tmp``), its data in ``tmp``; ready when made."""

    def __init__(self, tmp: Path, config: Mapping[str, Any], ready_within: float = 30.0) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is not installed (Debian: apt-get install -y prometheus)")
        self.config = tmp / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(dict(config), sort_keys=False))
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = (tmp / "prometheus.log").open("w")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={self.config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address={self.url.removeprefix('http://')}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            self.wait(self._ready, "Prometheus /-/ready", ready_within)
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.proc.returncode}; see {self.log.name}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def wait(self, condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
        """Poll ``condition`` until it holds; after ``timeout`` fail, naming ``what`` and the log."""
        try:
            wait_until(condition, timeout=timeout, interval=0.2)
        except AssertionError:
            self.log.flush()
            raise AssertionError(f"{what}: not within {timeout} s; see {self.log.name}") from None

    def api(self, path: str, **params: Any) -> Any:
        """``GET /api/v1/<path>?<params>``'s ``data``; fails on an error answer."""
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{path} {params}: HTTP {exc.code} {exc.read().decode()}") from None
        assert body["status"] == "success", body
        return body["data"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()
