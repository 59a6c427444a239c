"""Free ports on 127.0.0.1: :func:`testbed.ports.free_port`, shared with the benchmarks."""

from __future__ import annotations

from testbed.ports import free_port

__all__ = ["free_port"]
