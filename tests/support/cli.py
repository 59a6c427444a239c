"""The ``store-metrics`` command, run as a user runs it: a fresh process, configured by its environment."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``store-metrics ARGS`` with this environment minus Airflow/OTel settings, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "OTEL_"))}
    return subprocess.run(
        [sys.executable, "-m", "store_metrics.commands.cli", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
