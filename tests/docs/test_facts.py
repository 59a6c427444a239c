"""The facts that drift, kept equal to the code: what the docs quote and what exported files name.

Each fact lives in the code once; these tests read the pages (and the files ``store-metrics export``
writes) for the places that repeat it and compare:

* command outputs quoted in the docs: ``airflow config get-value store_metrics ...`` as the real
  ``airflow`` prints it in a fresh home; a configuration error as the option's own check raises it;
* exit codes: every ``store-metrics check`` exit code a page names is one the command has, a range
  of them spans exactly the command's codes, and the troubleshooting list names every failing one;
* exported files: every docs page, site page and file they name exists (in the export, the
  repository or the docs), and the dashboard size the Helm page quotes is the exported header's;
* tested Airflow versions are stated in one place (the Airflow versions page and the versions block).

The generated blocks (options, CLI help, tables) are kept current by test_docs.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from store_metrics.commands.check import EXIT_CODES
from store_metrics.config.options import BY_NAME
from store_metrics.errors import ConfigError
from support.exported import Exported
from testbed.airflow import AirflowHome
from testbed.repository import ROOT

DOCS = ROOT / "docs"
SITE = "https://store-metrics.github.io/airflow-store-metrics/"
#: The pages a user reads: every page of the site and the README, but the contributors' page.
USER_PAGES = sorted([p for p in DOCS.rglob("*.md") if p.name != "contributing.md"] + [ROOT / "README.md"])


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def prose(page: Path) -> str:
    """The page without its generated blocks (test_docs.py keeps those current)."""
    return re.sub(r"<!-- (\w[\w-]*):start -->.*?<!-- \1:end -->", "", page.read_text(), flags=re.DOTALL)


# -- command outputs quoted in the docs -------------------------------------------------------------------

GET_VALUE = re.compile(r"^\$ (airflow config get-value store_metrics \w+)\n([^\n`]+)$", re.MULTILINE)


def quoted_get_values() -> list[tuple[str, str, str]]:
    return [(page_id(p), cmd, out) for p in USER_PAGES for cmd, out in GET_VALUE.findall(p.read_text())]


def test_some_page_quotes_a_get_value() -> None:
    assert quoted_get_values(), "getting-started.md quotes `airflow config get-value store_metrics backend`"


@pytest.mark.parametrize(("page", "command", "quoted"), quoted_get_values())
def test_quoted_airflow_config_values_are_what_airflow_prints(
    tmp_path: Path, page: str, command: str, quoted: str
) -> None:
    home = AirflowHome(tmp_path)
    home.dags.mkdir()
    env = home.env()
    del env["AIRFLOW__STORE_METRICS__FLUSH_TIMEOUT"]  # a fresh home sets nothing of ours
    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(airflow), *command.split()[1:]],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == quoted, f"{page} quotes {quoted!r}"


ERROR = re.compile(r"`(\[store_metrics\] (\w+) = '([^']*)' is not valid: [^`]*)`")


def quoted_errors() -> list[tuple[str, str, str, str]]:
    return [(page_id(p), *found) for p in USER_PAGES for found in ERROR.findall(p.read_text())]


def test_some_page_quotes_a_configuration_error() -> None:
    assert quoted_errors(), "configure.md quotes the error for `backend = prometheus`"


@pytest.mark.parametrize(("page", "quoted", "option", "value"), quoted_errors())
def test_quoted_configuration_errors_are_what_the_option_raises(
    page: str, quoted: str, option: str, value: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        BY_NAME[option].check(option, value)
    assert str(raised.value) == quoted, page


# -- exit codes -------------------------------------------------------------------------------------------

#: "exit codes 0-4" (hyphen or en dash), "exit codes 0 to 5".
CODE_RANGE = re.compile(r"exit codes? (\d) ?(?:\u2013|-|to) ?(\d)")
#: "exits 0", "with exit 3", "(3 if the send failed, 1 on a bad option: its exit codes)".
CODE_NAMED = re.compile(r"\bexits? (?:code )?(\d)\b|\((\d) if [^()]*?, (\d) on [^()]*?exit codes")


def check_paragraphs(page: Path) -> list[str]:
    """The paragraphs of a page that speak of ``store-metrics check``."""
    return [p for p in re.split(r"\n\s*\n", prose(page)) if "check" in p]


def test_exit_codes_the_pages_name_are_checks() -> None:
    wrong = []
    for page in USER_PAGES:
        for paragraph in check_paragraphs(page):
            for low, high in CODE_RANGE.findall(paragraph):
                if (int(low), int(high)) != (min(EXIT_CODES), max(EXIT_CODES)):
                    wrong.append(f"{page_id(page)}: exit codes {low}-{high}")
            for groups in CODE_NAMED.findall(paragraph):
                wrong += [f"{page_id(page)}: exit {c}" for c in groups if c and int(c) not in EXIT_CODES]
    assert not wrong, f"store-metrics check exits with {sorted(EXIT_CODES)} only: {wrong}"


def test_troubleshooting_lists_every_failing_exit_code_of_check() -> None:
    text = (DOCS / "troubleshooting.md").read_text()
    step = re.search(r"\*\*Does the configuration send anywhere\?\*\*(.*?)\n\d+\. \*\*", text, re.DOTALL)
    assert step, "troubleshooting.md's step on store-metrics check"
    listed = [int(code) for code in re.findall(r"(?:: |, )(\d) (?:a|the)\b", step.group(1))]
    assert listed == sorted(set(EXIT_CODES) - {0})


# -- what exported files name -----------------------------------------------------------------------------

DOCS_PAGE = re.compile(r"\bdocs/([\w/.-]+?\.md)\b")
SITE_PAGE = re.compile(re.escape(SITE) + r"([\w/-]*)")
#: Repository or export paths: at least one folder, a file type we ship.
FILE_PATH = re.compile(r"(?<![\w./@-])((?:[\w-]+/)+[\w.-]+\.(?:py|ya?ml|json|sql|md|sh|toml))\b")
PY_FILE = re.compile(r"(?<![\w./-])([\w-]+\.py)\b")


def site_page_exists(path: str) -> bool:
    page = path.strip("/")
    return not page or (DOCS / f"{page}.md").is_file() or (DOCS / page / "index.md").is_file()


def file_exists(name: str, export: Path) -> bool:
    """A path relative to the export, the repository, the package or its templates."""
    package = ROOT / "src" / "store_metrics"
    roots = (export, ROOT, ROOT / "src", package, package / "shipped" / "templates")
    return any((root / name).exists() for root in roots)


def exported_texts(export: Path) -> list[tuple[str, str]]:
    return [
        (str(f.relative_to(export)), f.read_text())
        for f in sorted(export.rglob("*"))
        if f.is_file() and f.suffix in {".yml", ".yaml", ".json", ".md", ".sql", ".txt", ""}
    ]


def test_exported_files_name_only_pages_and_files_that_exist(exported: Exported) -> None:
    export = exported()
    repository_names = {p.name for p in ROOT.rglob("*.py") if ".venv" not in p.parts}
    missing = []
    for name, text in exported_texts(export):
        missing += [f"{name}: docs/{page}" for page in DOCS_PAGE.findall(text) if not (DOCS / page).is_file()]
        missing += [f"{name}: {SITE}{page}" for page in SITE_PAGE.findall(text) if not site_page_exists(page)]
        missing += [f"{name}: {path}" for path in FILE_PATH.findall(text) if not file_exists(path, export)]
        missing += [f"{name}: {py}" for py in PY_FILE.findall(text) if py not in repository_names]
    assert not missing


def kib(text: str, where: str) -> int:
    found = re.search(r"the dashboard alone is (\d+) KiB", text.replace("\n# ", " ").replace("\n", " "))
    assert found, f"{where} states the dashboard's size"
    return int(found.group(1))


def test_the_dashboard_size_the_helm_page_quotes_is_the_exported_headers(exported: Exported) -> None:
    export = exported()
    header = kib((export / "kubernetes/base/grafana-dashboard.yaml").read_text(), "the ConfigMap's header")
    measured = round(len((export / "dashboards/store-metrics.json").read_bytes()) / 1024)
    assert header == measured
    assert kib((DOCS / "deploy/helm.md").read_text(), "helm.md") == measured


# -- tested versions --------------------------------------------------------------------------------------

TESTED_ON = re.compile(r"tested on (?:Airflow )?3\.\d")


def test_only_the_versions_pages_say_which_airflow_releases_are_tested() -> None:
    stated = [
        page_id(p) for p in USER_PAGES if p.name not in {"airflow-versions.md"} and TESTED_ON.search(prose(p))
    ]
    assert not stated, "link to airflow-versions.md instead of repeating the tested releases"


# -- generated text ---------------------------------------------------------------------------------------


def test_the_panels_table_keeps_whole_sentences() -> None:
    from generators.alert_tables import panels_table

    cut = [row for row in panels_table().splitlines() if re.search(r"\b(?:i\.e|e\.g)\.\s*\|$", row)]
    assert not cut, "a panel's description cut after an abbreviation"


# -- user pages read as a guide ---------------------------------------------------------------------------

#: Pages that say what is tested where, by design: contributing, the Airflow versions page and the
#: benchmarks' report.
PROOF_PAGES = {"contributing.md", "airflow-versions.md", "performance.md"}
TEST_CITATION = re.compile(r"\btests/\w|\btest_\w+\.py\b")
#: Words of the lab notebook a reader has no key to (the topologies are named on how-it-works.md).
JARGON = re.compile(r"\bstand(?:s|ing)? down\b|\bscenarios? [0-9]|\btopolog(?:y|ies) [0-9]", re.IGNORECASE)


def test_user_pages_cite_no_tests() -> None:
    cited = [
        f"{page_id(p)}: {m.group(0)}"
        for p in USER_PAGES
        if p.name not in PROOF_PAGES
        for m in TEST_CITATION.finditer(prose(p))
    ]
    assert not cited, "say what is tested where in contributing.md, not on a user page"


def test_user_pages_use_no_lab_notebook_words() -> None:
    used = [
        f"{page_id(p)}: {m.group(0)}"
        for p in USER_PAGES
        if p.name != "how-it-works.md"
        for m in JARGON.finditer(prose(p))
    ]
    assert not used


RECORDED_NAME = re.compile(r"\b[a-z_]+:(?:[a-z0-9_]+_)?store_metrics_[a-z0-9_]+:[a-z0-9_]+")


def test_the_recorded_series_pages_name_are_the_exported_rules() -> None:
    """A page's query over a recorded series names one the shipped rule files record (at the default
    prefix, or another prefix's spelling of one); upgrading.md also names the old, unprefixed ones."""
    recorded = {
        name
        for rules in (ROOT / "collector").glob("*rules.yml")
        for name in re.findall(r"^\s*- record: (\S+)$", rules.read_text(), re.MULTILINE)
    }
    assert len(recorded) > 10
    named = {
        (page_id(page), name)
        for page in USER_PAGES
        if page.name != "upgrading.md"
        for name in RECORDED_NAME.findall(page.read_text())
    }
    assert named
    # An example at another prefix (--prefix myco.airflow) names the same series.
    at_default = {
        (page, re.sub(r":[a-z0-9_]+?_store_metrics_", ":airflow_store_metrics_", n)) for page, n in named
    }
    assert sorted((page, name) for page, name in at_default if name not in recorded) == []
