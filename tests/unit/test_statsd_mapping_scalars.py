"""The help text of a statsd_exporter mapping as YAML: whatever a catalogue description says, the
mapping file reads back as exactly that text, written as PyYAML writes it (so the shipped files kept
their bytes when the mappings stopped being copied by hand)."""

from __future__ import annotations

import math

import pytest
import yaml

from store_metrics import catalogue
from store_metrics.shipped.statsd_mappings import yaml_scalar

#: Texts where a plain scalar would read back as something else, or not at all.
TRICKY = [
    "a: b",
    "#x",
    "x #y",
    "x#y",
    "yes",
    "No",
    "1.5",
    "0x1F",
    "2024-01-01",
    "12:30",
    "~",
    "null",
    ".inf",
    "-x",
    "- x",
    "x:",
    ":x",
    "? x",
    "'quoted'",
    "it's: here",
    "",
    " lead",
    "trail ",
    "@at",
    "`tick` first",
    "[x]",
    "{x}",
    "a,b",
    "50%",
    "<other>",
    "a\tb",
]


def _pyyaml(text: str) -> str:
    return yaml.safe_dump({"k": text}, width=math.inf)[len("k: ") :].rstrip("\n")


@pytest.mark.parametrize("text", [m.description for m in catalogue.ALL_METRICS] + TRICKY)
def test_a_help_text_reads_back_as_itself_written_as_pyyaml_writes_it(text: str) -> None:
    written = yaml_scalar(text)
    assert yaml.safe_load(f"help: {written}") == {"help": text}
    assert written == _pyyaml(text)


@pytest.mark.parametrize("text", ["é", "ünïcode: x", "a\nb", "tab\x7f"])
def test_text_beyond_printable_ascii_is_one_double_quoted_line(text: str) -> None:
    written = yaml_scalar(text)
    assert written.startswith('"') and "\n" not in written
    assert yaml.safe_load(f"help: {written}") == {"help": text}
