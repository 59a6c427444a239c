"""A real browser for the UI tests: Debian's Chromium, headless, driven by Selenium through Debian's
ChromeDriver (``scripts/setup dev`` installs both; nothing is downloaded at run time).

``Browser`` logs in through Airflow's own login page, opens a DAG's *State store* tab as a
user does (the DAG's page, then the tab), and reads what the tab shows inside Airflow's iframe.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: Flags that let Chromium start and stay quiet on this machine (no sandbox as root, no network
#: beyond localhost: without the background-networking flags it keeps trying Google's hosts).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def chromium_paths() -> tuple[str, str]:
    browser = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.fail("chromium and chromedriver are not installed (scripts/setup dev installs them)")
    return browser, driver


class Browser:
    """One headless Chromium with a fresh profile, ``width`` x ``height``, light or dark."""

    def __init__(self, base: str, width: int = 1400, height: int = 1000) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        browser, driver = chromium_paths()
        self.base = base
        self.profile = tempfile.mkdtemp(prefix="store-metrics-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = browser
        for flag in (*FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        self.driver = webdriver.Chrome(options=options, service=Service(executable_path=driver))
        self.driver.set_page_load_timeout(60)

    def wait(self, condition: Callable[[Any], Any], timeout: float = 60) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout, poll_frequency=0.2).until(condition)

    def login(self, user: str, password: str) -> None:
        """Airflow's login page: the Simple auth manager's form, as a user fills it in."""
        from selenium.webdriver.common.by import By

        self.driver.get(f"{self.base}/auth/login")
        self.wait(lambda d: d.find_elements(By.NAME, "username"))
        self.driver.find_element(By.NAME, "username").send_keys(user)
        self.driver.find_element(By.NAME, "password").send_keys(password)
        self.driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        self.wait(lambda d: "/auth/login" not in d.current_url and d.get_cookie("_token"))

    def set_theme(self, theme: str) -> None:
        """Airflow's UI keeps the user's choice in localStorage ``theme`` (next-themes)."""
        self.driver.execute_script("window.localStorage.setItem('theme', arguments[0]);", theme)

    def open_tab(self, dag_id: str, tab: str = "State store") -> None:
        """The DAG's page, then its tab: the iframe the UI makes for the plugin's external view."""
        from selenium.webdriver.common.by import By

        self.driver.switch_to.default_content()
        self.driver.get(f"{self.base}/dags/{dag_id}")
        link = self.wait(lambda d: _visible_link(d, By, tab))
        link.click()
        frame = self.wait(lambda d: d.find_elements(By.CSS_SELECTOR, f"iframe[title='{tab}']"))[0]
        self.driver.switch_to.frame(frame)
        self.wait(lambda d: d.find_element(By.ID, "page").get_attribute("data-state") != "loading")

    def open_page(self, url_route: str, title: str = "State store") -> None:
        """A nav page of a plugin (``plugin/<url_route>``), inside its iframe."""
        from selenium.webdriver.common.by import By

        self.driver.switch_to.default_content()
        self.driver.get(f"{self.base}/plugin/{url_route}")
        frame = self.wait(lambda d: d.find_elements(By.CSS_SELECTOR, f"iframe[title='{title}']"))[0]
        self.driver.switch_to.frame(frame)
        self.wait(lambda d: d.find_element(By.ID, "page").get_attribute("data-state") != "loading")

    def state(self) -> str:
        from selenium.webdriver.common.by import By

        return str(self.driver.find_element(By.ID, "page").get_attribute("data-state"))

    def table(self, kind: str) -> dict[str, dict[str, str]]:
        """A table of the framed page: row name -> field -> the text shown (``data-value`` for bytes)."""
        from selenium.webdriver.common.by import By

        rows: dict[str, dict[str, str]] = {}
        for row in self.driver.find_elements(By.CSS_SELECTOR, f"table[data-table='{kind}'] tbody tr"):
            cells = {}
            for cell in row.find_elements(By.CSS_SELECTOR, "td[data-field]"):
                field = str(cell.get_attribute("data-field"))
                cells[field] = str(cell.get_attribute("data-value") or cell.text)
            rows[str(row.get_attribute("data-row"))] = cells
        return rows

    def text(self, css: str) -> str:
        from selenium.webdriver.common.by import By

        return "\n".join(e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css))

    def screenshot(self, path: Path) -> None:
        """The whole window (Airflow's UI around the framed page)."""
        self.driver.switch_to.default_content()
        path.parent.mkdir(parents=True, exist_ok=True)
        assert self.driver.save_screenshot(str(path)), path

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)


def _visible_link(driver: Any, by: Any, text: str) -> Any:
    for element in driver.find_elements(
        by.XPATH, f"//a[normalize-space()='{text}'] | //button[normalize-space()='{text}']"
    ):
        if element.is_displayed():
            return element
    return None
