"""The shape every generated Prometheus rules file shares: a recording group, then an alerting group."""

from __future__ import annotations

from typing import Any

from . import templating, yaml_text


def document(group: str, recording: list[dict[str, Any]], alerting: list[dict[str, Any]]) -> dict[str, Any]:
    """Groups ``<group>.rules`` (recording) and ``<group>.alerts`` (alerting)."""
    return {
        "groups": [
            {"name": f"{group}.rules", "rules": recording},
            {"name": f"{group}.alerts", "rules": alerting},
        ]
    }


def render(rules: dict[str, Any], prefix: str, header: str) -> str:
    """The file's text: the generated-file header for ``prefix``, the file's own header, the rules."""
    return yaml_text.dump(rules, templating.generated_header(prefix) + header)
