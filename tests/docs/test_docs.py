"""The docs site and the README: built in strict mode, generated parts current, facts in one place.

The site is built with the real MkDocs and Material theme (the dev extra installs them), in strict
mode with every page in the nav and every internal link and anchor checked (mkdocs.yml). A copy of
the docs with one broken anchor must fail the same build, so the check is known to work.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from testbed import peers
from testbed.repository import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
SITE = "https://store-metrics.github.io/airflow-store-metrics/"
#: Which generated block lives on which page (each exactly once in the site).
BLOCK_PAGES = {
    "options": "configure.md",
    "arguments": "configure.md",
    "catalogue": "metrics.md",
    "server-metrics": "metrics.md",
    "cli": "cli.md",
    "versions": "getting-started.md",
    "settings": "alerts.md",
    "alerts": "alerts.md",
    "panels": "alerts.md",
}


def generate() -> ModuleType:
    """The one writer of the generated blocks (``python -m generators.docs``)."""
    from generators import docs

    return docs


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(config),
            "--site-dir",
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_every_generated_block_is_current() -> None:
    gen = generate()
    blocks = {name: make() for name, make in gen.BLOCKS.items()}
    assert set(blocks) == set(BLOCK_PAGES)
    for page in gen.pages():
        text = page.read_text()
        current = gen.refresh(text, gen.page_blocks(page, blocks))
        assert current == text, f"{page.relative_to(ROOT)}: run python -m generators.docs"


def test_each_generated_block_is_on_its_page_once() -> None:
    gen = generate()
    for name, page in BLOCK_PAGES.items():
        assert gen.block_names((DOCS / page).read_text()).count(name) == 1, (name, page)
    others = [p for p in DOCS.rglob("*.md") if p.name not in BLOCK_PAGES.values()]
    # (docs/performance.md has markers of its own, which the benchmarks fill.)
    assert not [p for p in others if set(gen.block_names(p.read_text())) & set(BLOCK_PAGES)]


def test_the_readme_states_the_supported_versions_as_the_docs_do() -> None:
    gen = generate()
    (readme_block,) = re.findall(
        r"<!-- versions:start -->\n(.*?)<!-- versions:end -->", README.read_text(), re.S
    )
    assert readme_block == gen.versions_table()
    assert "| Apache Airflow | 3.3.0 (below 3.5) |" in readme_block
    # Every pinned peer the tests run is named with its exact version, the minimum pins as minimums.
    rows = {row.split("|")[1].strip(): row for row in readme_block.splitlines()}
    component = {
        "statsd_exporter": "statsd_exporter",
        "otelcol": "OpenTelemetry Collector (contrib components)",
        "prometheus": "Prometheus",
        "alertmanager": "Alertmanager",
        "podsecurity": "Kubernetes manifests",
        "kube-score": "Kubernetes manifests",
        "jaeger": "Jaeger",
        "victoriametrics": "VictoriaMetrics (single-node, vmagent, vmalert)",
        "thanos": "Thanos (sidecar, query)",
    }
    for pin in peers.PINS:
        row = rows[component[pin.peer]]
        assert f" {pin.version}" in row.split("|")[3], (pin.key, row)
        if "minimum" in pin.roles:
            assert row.split("|")[2].strip() == pin.version, (pin.key, row)


def test_the_docs_command_tables_are_what_the_command_prints() -> None:
    from store_metrics.config import options

    configure = (DOCS / "configure.md").read_text()
    assert options.markdown_table() in configure
    proc = subprocess.run(
        [sys.executable, "-m", "store_metrics.commands.cli", "catalogue"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout in (DOCS / "metrics.md").read_text()


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    proc = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    for page in ("configure", "metrics", "cli", "performance", "how-it-works"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


@pytest.mark.slow
def test_a_broken_anchor_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    with (docs / "index.md").open("a") as page:
        page.write("\n[a section that is not there](configure.md#no-such-section)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"docs_dir: {docs}\n" + (ROOT / "mkdocs.yml").read_text())
    proc = mkdocs_build(config, tmp_path / "site")
    assert proc.returncode != 0
    assert "does not contain an anchor '#no-such-section'" in proc.stderr


def _headings_anchors(page: Path) -> set[str]:
    """The anchors MkDocs gives ``page``'s headings (the toc extension's slugs)."""
    from markdown.extensions.toc import slugify

    text = re.sub(r"^```.*?^```$", "", page.read_text(), flags=re.M | re.S)
    return {slugify(h.strip(), "-") for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_the_readme_is_short_and_every_link_in_it_resolves_in_a_clone() -> None:
    """Read in a clone, on the forge or from an unpacked sdist: every link of the README but the
    upstream proposal's is a relative path to a file of the repository (a docs page, the changelog),
    and an anchor in it names a heading of that page. The site's address is only mkdocs.yml's."""
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert len([link for link in links if link.startswith("docs/")]) >= 20, "the README links into the docs"
    external = [link for link in links if "://" in link]
    assert external == ["https://github.com/apache/airflow/pull/75729"]
    broken = []
    for link in links:
        if "://" in link:
            continue
        path, _, anchor = link.partition("#")
        target = (ROOT / path) if path else README
        if not target.is_file() or (anchor and anchor not in _headings_anchors(target)):
            broken.append(link)
    assert broken == []
    assert SITE not in text and "github.com/store-metrics" not in text
    assert f"site_url: {SITE}" in (ROOT / "mkdocs.yml").read_text()


def test_a_broken_readme_link_is_caught() -> None:
    # The check above would see a page that is not there, and a heading that is not there.
    assert not (ROOT / "docs/no-such-page.md").is_file()
    assert "no-such-heading" not in _headings_anchors(DOCS / "how-it-works.md")
    assert "topologies" in _headings_anchors(DOCS / "how-it-works.md")


def test_the_readme_names_the_two_commands_and_ci_runs_the_test_one() -> None:
    text = README.read_text()
    assert "scripts/demo" in text and "scripts/test" in text
    assert "exec scripts/test" in (ROOT / ".ci" / "run").read_text()


def test_no_page_or_test_points_at_the_removed_pages() -> None:
    removed = ("docs/wiring.md", "docs/inventory.md", "wiring.md", "inventory.md")
    places = [*DOCS.rglob("*.md"), README, *(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    offenders = [
        str(p.relative_to(ROOT))
        for p in places
        if p != Path(__file__).resolve() and any(name in p.read_text() for name in removed)
    ]
    assert offenders == []


def test_release_files_are_there() -> None:
    from store_metrics import __version__

    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert "Version 2.0, January 2004" in (ROOT / "LICENSE").read_text()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{__version__}]" in changelog
    assert "keepachangelog.com" in changelog
    security = (ROOT / "SECURITY.md").read_text()
    assert "0.0.0.0" in security and "SELECT" in security
