"""``scripts/screenshots``: the State store tab (light and dark) and page, as docs/ui-*.png.

The deployment of the UI tests (``support.ui``: the DAGs run once, the API server counts their
calls, Prometheus scrapes them), then Debian's Chromium (``support.browser``) logs in as
``admin`` through Airflow's login page and takes each picture of the whole window, Airflow's UI
around the framed page. Everything it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from support.browser import Browser
from support.ui import ORDERS, PASSWORDS, start_deployment
from testbed.repository import ROOT

DOCS = ROOT / "docs"
#: file name -> (theme, what to open: a DAG's tab or the deployment page)
SHOTS = {
    "ui-state-store-tab.png": ("light", ORDERS),
    "ui-state-store-tab-dark.png": ("dark", ORDERS),
    "ui-state-store-page.png": ("light", None),
}


def take(out: Path) -> list[Path]:
    with tempfile.TemporaryDirectory(prefix="store-metrics-screenshots-") as tmp:
        deployment = start_deployment(Path(tmp), cache_ttl=30)  # the default, as the pictures say
        try:
            deployment.run_dags()
            deployment.wait_for_calls()
            browser = Browser(deployment.base, width=1440, height=1500)
            try:
                browser.login("admin", PASSWORDS["admin"])
                written = []
                for name, (theme, dag_id) in SHOTS.items():
                    browser.set_theme(theme)
                    if dag_id is None:
                        browser.open_page("store-metrics")
                    else:
                        browser.open_tab(dag_id)
                        browser.wait(lambda d: browser.table("calls"))
                    browser.screenshot(out / name)
                    written.append(out / name)
                return written
            finally:
                browser.close()
        finally:
            deployment.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--out", type=Path, default=DOCS, help="where to write the PNG files (default: docs/)"
    )
    args = parser.parse_args()
    for path in take(args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
