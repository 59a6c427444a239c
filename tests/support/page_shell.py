"""A deployment page's commands, run as written by bash, with the cluster's programs recorded.

``bash_blocks`` reads a page's ```` ```bash ```` blocks with their label: a block whose first
line is a comment naming one of the page's alternatives (``# trial``, ``# production``,
``# count_at = api_server``, ``# StatsD``) belongs to that alternative; the others to every reader.
``PageShell`` runs the blocks a reader following one set of alternatives runs, in page order,
under ``bash -euo pipefail`` (an unset variable or a failed command stops it), in a folder of its
own. ``store-metrics``, ``python`` and the shell's own tools run for real; ``docker``, ``helm``,
``kubectl`` and ``pip``, which need a registry or a cluster, are replaced by recorders that write
each call's arguments (and its working directory) to ``calls.jsonl``; the ``kubectl`` recorder also
renders what ``kubectl apply -k DIR`` would apply with the real ``kubectl kustomize DIR``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testbed.repository import ROOT

PAGES = ROOT / "docs" / "deploy"
#: The alternatives a block can belong to: its first line is ``# <label>``.
LABELS = ("trial", "production", "count_at = api_server", "StatsD")
RECORDED = ("docker", "helm", "kubectl", "pip")

_RECORDER = """#!{python}
import json, os, shutil, subprocess, sys
from pathlib import Path
log = Path({log!r})
argv = sys.argv[1:]
with log.open("a") as out:
    out.write(json.dumps({{"program": {program!r}, "argv": argv, "cwd": os.getcwd()}}) + "\\n")
if {program!r} == "kubectl" and "apply" in argv and "-k" in argv:
    folder = argv[argv.index("-k") + 1]
    done = subprocess.run([{kubectl!r}, "kustomize", folder], capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    rendered = log.parent / f"applied-{{len(log.read_text().splitlines())}}.yaml"
    rendered.write_text(done.stdout)
    sys.exit(done.returncode)
"""


@dataclass(frozen=True)
class Block:
    label: str | None
    text: str
    section: str


def bash_blocks(page: str) -> list[Block]:
    """The page's bash blocks in order, each with its alternative (or None) and its ``##`` section."""
    found, section = [], ""
    text = (PAGES / page).read_text()
    for match in re.finditer(r"^## ([^\n]*)$|^```bash\n(.*?)^```$", text, flags=re.M | re.S):
        if match.group(1) is not None:
            section = match.group(1)
            continue
        body = match.group(2)
        first = body.splitlines()[0] if body else ""
        label = first[2:].strip() if first.startswith("# ") and first[2:].strip() in LABELS else None
        found.append(Block(label, body, section))
    return found


def reader_script(page: str, choices: set[str], sections: tuple[str, ...]) -> str:
    """What a reader who picks ``choices`` runs of the page's ``sections`` (their headings' starts)."""
    chosen = [
        b.text
        for b in bash_blocks(page)
        if b.section.startswith(sections) and (b.label is None or b.label in choices)
    ]
    return "\n".join(chosen)


class PageShell:
    """A folder, a PATH with the recorders first, and bash to run a page's commands in them."""

    def __init__(self, root: Path, environ: dict[str, str] | None = None) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.log = root / "calls.jsonl"
        kubectl = shutil.which("kubectl") or str(Path(sys.executable).parent / "kubectl")
        for program in RECORDED:
            shim = self.bin / program
            shim.write_text(
                _RECORDER.format(python=sys.executable, log=str(self.log), program=program, kubectl=kubectl)
            )
            shim.chmod(0o755)
        # `python` and `store-metrics` are this environment's (what `pip install` would have given).
        # A wrapper, not a link: a linked interpreter would not find the virtualenv it belongs to.
        python = self.bin / "python"
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        python.chmod(0o755)
        (self.bin / "store-metrics").symlink_to(Path(sys.executable).parent / "store-metrics")
        self.environ = {
            **(environ or dict(os.environ)),
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
        }

    def run(self, script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=self.root,
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def calls(self, program: str) -> list[list[str]]:
        if not self.log.exists():
            return []
        records = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [r["argv"] for r in records if r["program"] == program]

    def applied(self) -> list[list[dict[str, Any]]]:
        """What each ``kubectl apply -k`` would have applied, in order."""
        files = sorted(self.root.glob("applied-*.yaml"), key=lambda p: int(p.stem.split("-")[1]))
        return [[d for d in yaml.safe_load_all(f.read_text()) if d] for f in files]
