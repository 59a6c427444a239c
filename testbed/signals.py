"""Files a test and the tasks of its DAG hand each other as signals: written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path


def send(folder: Path, name: str, text: str = "") -> None:
    """Write the signal ``name`` in ``folder`` whole: the other side polls for the file, and must
    never read it half written (a test once read an empty one)."""
    part = folder / f".{name}.part"
    part.write_text(text)
    os.replace(part, folder / name)
