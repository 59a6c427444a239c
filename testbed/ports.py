"""Free ports on 127.0.0.1."""

from __future__ import annotations

import socket


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port that is free on 127.0.0.1 right now (TCP by default, UDP with SOCK_DGRAM)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
